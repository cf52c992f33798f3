#!/usr/bin/env bash
# make run: worker + scheduler in the foreground on a real Redis and the
# embedded SQLite default. Ctrl-C stops both gracefully.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh redis-only || true
if ! redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
  if go run ./cmd/homing dev --help >/dev/null 2>&1; then
    echo "run: no Redis reachable; starting homing dev (embedded Redis, in memory only)"
    exec go run ./cmd/homing dev
  fi
  echo "run: Redis is needed at 127.0.0.1:6379 (install redis-server or set HOMING_REDIS_URL)" >&2
  exit 1
fi
mkdir -p bin
go build -o bin/ ./cmd/...
bin/homing migrate
bin/scheduler & sched=$!
bin/worker & work=$!
trap 'kill -TERM $sched $work 2>/dev/null || true' INT TERM
wait $work || true
kill -TERM $sched 2>/dev/null || true
wait $sched || true
