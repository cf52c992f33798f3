#!/usr/bin/env bash
# Makes PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) available for
# the tests, and idempotently so: a service that answers is left alone, one
# installed but stopped is started, one missing is installed with apt-get and
# started. Then it waits (at most 30 s each) until both answer, ensures the
# database homing_test exists, and prints one line per service.
#
#   scripts/services.sh             PostgreSQL and Redis, plus chromium and
#                                   redis-sentinel for the tests (make test)
#   scripts/services.sh redis-only  Redis only, and never installs (make run)
#
# SERVICES_REDIS_PORT and SERVICES_PG_DB exist to exercise this script
# against a scratch Redis or database; the tests expect the defaults.
set -euo pipefail

mode=${1:-all}
case $mode in all | redis-only) ;; *) echo "usage: $0 [redis-only]" >&2; exit 2 ;; esac

redis_port=${SERVICES_REDIS_PORT:-6379}
pg_db=${SERVICES_PG_DB:-homing_test}
export PGCONNECT_TIMEOUT=5

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else "$@"
  fi
}

redis_up() { command -v redis-cli >/dev/null && [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" = PONG ]; }
pg_up() { command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432; }
pg_installed() { ls -d /etc/postgresql/*/main >/dev/null 2>&1; }
# shellcheck disable=SC2012 # version directories are plain numbers
pg_version() { ls /etc/postgresql | sort -V | tail -1; }

wait_for() { # name check-function
  local _
  for _ in $(seq 60); do
    "$2" && return 0
    sleep 0.5
  done
  echo "services: $1 did not answer within 30s" >&2
  return 1
}

start_redis() {
  redis-server --daemonize yes --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no >/dev/null
}

start_postgres() {
  as_root pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main start
}

# psql_admin runs SQL as the postgres superuser: over TCP as the tests do,
# else over the local socket as the postgres OS user (peer auth).
psql_admin() {
  psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -w -v ON_ERROR_STOP=1 -tAc "$1" 2>/dev/null ||
    as_root su postgres -c "psql -d postgres -v ON_ERROR_STOP=1 -tAc \"$1\""
}

# trust_tcp lets the tests connect to 127.0.0.1 as postgres without a
# password, as on the project's machines. A fresh Debian install asks for
# one (scram), so this adds two trust lines ahead of the others and reloads.
trust_tcp() {
  psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -w -tAc 'SELECT 1' >/dev/null 2>&1 && return 0
  local hba
  hba=/etc/postgresql/$(pg_version)/main/pg_hba.conf
  echo "services: allowing passwordless TCP logins from 127.0.0.1 in $hba (for the tests)"
  as_root sh -c "{ printf 'host all all 127.0.0.1/32 trust # homing-test\nhost all all ::1/128 trust # homing-test\n'; grep -v '# homing-test' '$hba'; } > '$hba.new' && chown --reference='$hba' '$hba.new' && chmod --reference='$hba' '$hba.new' && mv '$hba.new' '$hba'"
  as_root pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main reload
}

# install_missing installs, in one apt-get run, whatever is needed and absent.
installed=""
install_missing() {
  local pkgs=()
  if ! redis_up && ! command -v redis-server >/dev/null; then
    if [ "$mode" = redis-only ]; then
      echo "services: redis-server is not installed (scripts/services.sh without arguments installs it)" >&2
      return 1
    fi
    pkgs+=(redis-server)
  fi
  if [ "$mode" = all ] && ! pg_up && ! pg_installed; then
    pkgs+=(postgresql)
  fi
  # The tests' own tools: headless Chromium drives the console's browser
  # tests, redis-sentinel (with redis-server) the failover tests.
  if [ "$mode" = all ]; then
    command -v chromium >/dev/null || pkgs+=(chromium)
    command -v redis-sentinel >/dev/null || pkgs+=(redis-sentinel)
  fi
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "services: installing ${pkgs[*]} with apt-get"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
    installed=" ${pkgs[*]} "
  fi
}

how() { # package: how the service came up
  case $installed in *" $1 "*) echo "installed and started" ;; *) echo "started" ;; esac
}

ensure_redis() {
  local how="already running"
  if ! redis_up; then
    how=$(how redis-server)
    # A fresh install may have started it already.
    redis_up || start_redis || true
    wait_for redis redis_up
  fi
  echo "services: redis on 127.0.0.1:$redis_port ($how)"
}

ensure_postgres() {
  local how="already running"
  if ! pg_up; then
    how=$(how postgresql)
    pg_up || start_postgres || true
    wait_for postgresql pg_up
  fi
  trust_tcp
  if [ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname = '$pg_db'")" != 1 ]; then
    psql_admin "CREATE DATABASE $pg_db" >/dev/null
    how="$how, created database $pg_db"
  fi
  echo "services: postgresql on 127.0.0.1:5432 ($how; database $pg_db)"
}

install_missing
ensure_redis
if [ "$mode" = all ]; then
  ensure_postgres
fi
