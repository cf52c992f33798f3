#!/usr/bin/env bash
# make run: Homing on this machine, as `homing run`: a worker, the scheduler
# (with the outbox relay), the HTTP API with the console, and the asynqmon
# UI, in one process that listens on 127.0.0.1 only, on a real Redis
# (started if installed, never installed) and the configured database
# (embedded SQLite by default). It prints the console's URL and an admin
# token; Ctrl-C or SIGTERM stops every part gracefully. Without a Redis it
# runs `homing dev` instead (embedded, in-memory Redis). Arguments go to
# homing run: scripts/run.sh --monitor-addr ''
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/services.sh redis-only || true
go build -o bin/ ./cmd/...
exec bin/homing run "$@"
