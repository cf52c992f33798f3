#!/usr/bin/env bash
# Makes what the tests or `make run` need available, idempotently: a service
# that answers is left alone, one installed but stopped is started, a
# package missing is installed with apt-get. It prints one line per service.
#
#   scripts/services.sh             for the tests (make test): PostgreSQL on
#                                   127.0.0.1:5432 running, and the programs
#                                   the tests start themselves installed:
#                                   redis-server (each test binary runs a Redis
#                                   of its own on a private port, never the one
#                                   on 6379), redis-sentinel, chromium and
#                                   pg_auto_failover (for the failover tests)
#   scripts/services.sh redis-only  a Redis on 127.0.0.1:6379, started if
#                                   installed, never installed (make run)
#
# The tests create only databases named homing_tmpl_* and homing_t_* on the
# PostgreSQL server, and drop them. This script changes the server's
# authentication (trust for TCP logins from loopback) only when it installed
# PostgreSQL itself, in this run, and it says so when it does; otherwise a
# server that asks for a password gets HOMING_TEST_DATABASE_URL, with one.
#
# SERVICES_REDIS_PORT exists to exercise redis-only against a scratch Redis.
set -euo pipefail

mode=${1:-all}
case $mode in all | redis-only) ;; *) echo "usage: $0 [redis-only]" >&2; exit 2 ;; esac

redis_port=${SERVICES_REDIS_PORT:-6379}
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

# test_url is where the tests connect to PostgreSQL (internal/testing/testenv's
# default unless HOMING_TEST_DATABASE_URL is set).
test_url=${HOMING_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

# can_login reports whether the tests can log in at test_url.
can_login() { psql "$test_url" -w -tAc 'SELECT 1' >/dev/null 2>&1; }

# trust_tcp lets the tests connect to 127.0.0.1 as postgres without a
# password. A fresh Debian install asks for one (scram), so when this run
# installed the server, it adds two trust lines ahead of the others and
# reloads. A server it did not install keeps its authentication: the tests
# are then told how to log in.
trust_tcp() {
  can_login && return 0
  case $installed in *" postgresql "*) ;; *)
    echo "services: cannot log in to PostgreSQL at $test_url, and this server was not installed by this script, so its authentication is left as it is." >&2
    echo "services: set HOMING_TEST_DATABASE_URL to a URL of a role that may create databases (e.g. postgres://me:password@127.0.0.1:5432/postgres)." >&2
    return 1
    ;;
  esac
  local hba
  hba=/etc/postgresql/$(pg_version)/main/pg_hba.conf
  echo "services: this run installed PostgreSQL; allowing passwordless TCP logins from 127.0.0.1 and ::1 in $hba (for the tests)"
  as_root sh -c "{ printf 'host all all 127.0.0.1/32 trust # homing-test\nhost all all ::1/128 trust # homing-test\n'; grep -v '# homing-test' '$hba'; } > '$hba.new' && chown --reference='$hba' '$hba.new' && chmod --reference='$hba' '$hba.new' && mv '$hba.new' '$hba'"
  as_root pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main reload
}

# install_missing installs, in one apt-get run, whatever is needed and absent.
installed=""
install_missing() {
  local pkgs=()
  if ! command -v redis-server >/dev/null && { [ "$mode" = all ] || ! redis_up; }; then
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
    as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${pkgs[@]}" >/dev/null
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
  echo "services: postgresql on 127.0.0.1:5432 ($how)"
}

# install_pgha installs pg_auto_failover for the PostgreSQL failover tests
# (scripts/pgha.sh runs it), once the server's version is known.
install_pgha() {
  local v
  v=$(pg_version)
  if command -v pg_autoctl >/dev/null && [ -f "/usr/share/postgresql/$v/extension/pgautofailover.control" ]; then
    return 0
  fi
  echo "services: installing postgresql-$v-auto-failover pg-auto-failover-cli with apt-get (for the PostgreSQL failover tests)"
  as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "postgresql-$v-auto-failover" pg-auto-failover-cli >/dev/null
}

install_missing
if [ "$mode" = all ]; then
  ensure_postgres
  install_pgha
  echo "services: redis-server $(redis-server --version | grep -o 'v=[0-9.]*'), for the tests' own Redis on a private port ($(case $installed in *" redis-server "*) echo installed ;; *) echo "already installed" ;; esac))"
else
  ensure_redis
fi
