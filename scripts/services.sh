#!/usr/bin/env bash
# Makes PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) available:
# nothing when they answer, start them when installed but stopped, install
# them with apt-get when missing. `services.sh redis-only` skips PostgreSQL.
set -euo pipefail

mode=${1:-all}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }
apt_updated=
install() {
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

redis_up() { command -v redis-cli >/dev/null && redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
pg_up() { command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432; }

wait_for() { # name check
  for _ in $(seq 1 60); do "$2" && return 0; sleep 0.5; done
  echo "services: $1 did not come up within 30s" >&2; return 1
}

ensure_redis() {
  if redis_up; then echo "services: redis is up on 127.0.0.1:6379"; return; fi
  command -v redis-server >/dev/null || install redis-server
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  wait_for redis redis_up
  echo "services: started redis on 127.0.0.1:6379"
}

ensure_postgres() {
  if ! pg_up; then
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
      install postgresql
    fi
    ver=$(ls /etc/postgresql | sort -V | tail -1)
    # Trust local TCP connections so tests connect as postgres without a password.
    hba=/etc/postgresql/$ver/main/pg_hba.conf
    if ! grep -q "homing-test" "$hba" 2>/dev/null; then
      as_root sh -c "printf 'host all all 127.0.0.1/32 trust # homing-test\nhost all all ::1/128 trust # homing-test\n' | cat - '$hba' > '$hba.new' && mv '$hba.new' '$hba' && chown postgres:postgres '$hba'"
    fi
    as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
    wait_for postgresql pg_up
    echo "services: started postgresql $ver on 127.0.0.1:5432"
  else
    echo "services: postgresql is up on 127.0.0.1:5432"
  fi
}

ensure_redis
[ "$mode" = redis-only ] || ensure_postgres
