#!/usr/bin/env bash
# make run: the worker and the scheduler in the foreground, on a real Redis
# (started if installed, never installed) and the configured database
# (embedded SQLite by default). Ctrl-C or SIGTERM stops both gracefully; if
# either exits, the other is stopped too. Without a Redis it falls back to
# `homing dev` (one process, embedded in-memory Redis) where that exists.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/services.sh redis-only || true
go build -o bin/ ./cmd/...

redis_url=${HOMING_REDIS_URL:-redis://127.0.0.1:6379/0}
if ! command -v redis-cli >/dev/null || [ "$(redis-cli -u "$redis_url" ping 2>/dev/null)" != PONG ]; then
  echo "run: no Redis answers at $redis_url; running homing dev (embedded, in-memory Redis)" >&2
  exec bin/homing dev
fi

bin/homing migrate
if [ "${HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS:-false}" != true ]; then
  echo "run: webhooks to a local receiver (127.0.0.1, 10.x, 192.168.x) are refused; to allow them run" >&2
  echo "run:   HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true make run   (it must be set where the worker runs)" >&2
fi
bin/scheduler & sched=$!
bin/worker & work=$!
interrupted=
stop() { kill -TERM "$sched" "$work" 2>/dev/null || true; }
trap 'interrupted=1; stop' INT TERM

# Background jobs of a script ignore SIGINT, so Ctrl-C reaches only this
# shell; the trap passes it on as SIGTERM, which both handle gracefully.
status=0
wait -n "$sched" "$work" || status=$?
stop
wait "$sched" "$work" 2>/dev/null || true
if [ -n "$interrupted" ]; then status=0; fi
exit "$status"
