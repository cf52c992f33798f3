#!/usr/bin/env bash
# A throw-away highly available PostgreSQL on loopback, for the failover test
# (tests/pgfailover_test.go) and for trying Homing through a failover by hand:
# a pg_auto_failover monitor and two data nodes (a primary and its
# synchronous standby), or three (PGHA_NODES=3: a primary and two standbys,
# with number-sync-standbys 1 so that the primary always waits for one of
# them), all under one directory, as the postgres OS user.
#
#   scripts/pgha.sh start         install pg_auto_failover if missing, create
#                                 the monitor and both nodes, wait until one is
#                                 primary and the other secondary, print the
#                                 multi-host URL (last line of the output)
#   scripts/pgha.sh status        the monitor's view (pg_autoctl show state)
#                                 and the replication settings
#   scripts/pgha.sh primary       the port of the current primary
#   scripts/pgha.sh failover      pg_autoctl perform failover, and wait until
#                                 the other node is primary
#   scripts/pgha.sh kill-primary [PORT]  SIGKILL the primary's pg_autoctl and
#                                 its postmaster (a lost machine: nothing
#                                 restarts it), then return at once. With PORT,
#                                 that node, which must be taking writes;
#                                 without, the node the monitor names primary
#                                 (waiting up to 60s while the group moves
#                                 between states and names none)
#   scripts/pgha.sh kill-postmaster  SIGKILL the primary's postmaster only (its
#                                 pg_autoctl starts it again, and the monitor
#                                 may or may not fail over meanwhile)
#   scripts/pgha.sh wait-primary [PORT]  wait until a node (other than PORT)
#                                 takes writes and print its port
#   scripts/pgha.sh wait-ready    wait until one node is primary and the others
#                                 its secondaries again, and print the primary
#   scripts/pgha.sh stop          stop every process started here and remove
#                                 the directory (safe to run twice, or after a
#                                 start that failed half-way)
#
# start exits 3 when pg_auto_failover is missing and cannot be installed.
#
# PGHA_DIR (default /tmp/homing-pgha) holds everything; PGHA_PORT (default
# 5441) is the monitor's port and the nodes use the next PGHA_NODES (default
# 2; 3 sets the formation's number-sync-standbys to 1). Several groups
# can run at once with different PGHA_DIR and PGHA_PORT. PGHA_DB (default
# homing) is the database created on the nodes.
set -euo pipefail

cmd=${1:-}
dir=${PGHA_DIR:-/tmp/homing-pgha}
mon_port=${PGHA_PORT:-5441}
nodes=${PGHA_NODES:-2}
case $nodes in 2 | 3) ;; *)
  echo "pgha: PGHA_NODES must be 2 or 3, not $nodes" >&2
  exit 2
  ;;
esac
ports=()
for ((i = 1; i <= nodes; i++)); do ports+=("$((mon_port + i))"); done
db=${PGHA_DB:-homing}
pgbin=${PGHA_PGBIN:-}
export PGCONNECT_TIMEOUT=3

usage() {
  echo "usage: $0 start|status|primary|failover|kill-primary [PORT]|kill-postmaster|wait-primary [PORT]|wait-ready|stop" >&2
  exit 2
}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else "$@"
  fi
}

# find_pgbin sets pgbin to the newest PostgreSQL with a pg_auto_failover
# extension installed (Debian: /usr/lib/postgresql/N/bin).
find_pgbin() {
  [ -n "$pgbin" ] && return 0
  local v
  for v in $(ls /usr/lib/postgresql 2>/dev/null | sort -rV); do
    if [ -f "/usr/share/postgresql/$v/extension/pgautofailover.control" ]; then
      pgbin=/usr/lib/postgresql/$v/bin
      return 0
    fi
  done
  return 1
}

# install installs pg_auto_failover (the monitor's extension for the
# installed PostgreSQL and pg_autoctl) with apt-get when missing.
install() {
  if command -v pg_autoctl >/dev/null && find_pgbin; then
    return 0
  fi
  local v
  # shellcheck disable=SC2012 # version directories are plain numbers
  v=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -1)
  if [ -z "$v" ]; then
    echo "pgha: PostgreSQL is not installed (scripts/services.sh installs it)" >&2
    return 1
  fi
  if ! command -v apt-get >/dev/null; then
    echo "pgha: pg_auto_failover is missing and there is no apt-get: install postgresql-$v-auto-failover and pg-auto-failover-cli" >&2
    return 1
  fi
  echo "pgha: installing postgresql-$v-auto-failover pg-auto-failover-cli with apt-get" >&2
  # Tests run side by side: wait for another install to release dpkg's lock.
  as_root apt-get -o DPkg::Lock::Timeout=300 update -qq >&2 || true
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "postgresql-$v-auto-failover" pg-auto-failover-cli >/dev/null; then
    echo "pgha: apt-get could not install postgresql-$v-auto-failover pg-auto-failover-cli" >&2
    return 1
  fi
  find_pgbin
}

# as_pg runs a command as the postgres OS user when we are root (PostgreSQL
# refuses to run as root), else as ourselves, with pg_autoctl's
# configuration, state and pid files kept under $dir.
as_pg() {
  local env=(env "XDG_CONFIG_HOME=$dir/config" "XDG_DATA_HOME=$dir/data" "XDG_RUNTIME_DIR=$dir/run"
    "PATH=$pgbin:/usr/bin:/bin" "PGCONNECT_TIMEOUT=3")
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "${env[@]}" "$@"
  else
    "${env[@]}" "$@"
  fi
}

monitor_url() { echo "postgres://autoctl_node@127.0.0.1:$mon_port/pg_auto_failover?sslmode=disable"; }

# monitor_sql runs SQL on the monitor.
monitor_sql() {
  as_pg psql -X -h 127.0.0.1 -p "$mon_port" -d pg_auto_failover -v ON_ERROR_STOP=1 -tAc "$1"
}

# spawn runs pg_autoctl for one node in the background, in its own process
# group, logging to $dir/NAME.log, and records its pid in $dir/NAME.pid.
spawn() { # name pg_autoctl-args...
  local name=$1
  shift
  # setsid does not fork here (a background job is no group leader), so $!
  # is the new process group's id.
  PGHA_PGBIN=$pgbin setsid "$0" as-pg pg_autoctl "$@" >>"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

wait_until() { # seconds what command...
  local secs=$1 what=$2 i
  shift 2
  for ((i = 0; i < secs * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "pgha: $what did not happen within ${secs}s; logs in $dir/*.log" >&2
  return 1
}

# primary_port prints the port of the node that takes writes, as the
# monitor has it (assigned and reported): primary, or wait_primary while it
# has no secondary (then it commits without waiting for one).
primary_port() {
  monitor_sql "SELECT nodeport FROM pgautofailover.node WHERE goalstate = reportedstate AND reportedstate IN ('primary', 'wait_primary')" 2>/dev/null | head -1
}

primary_named() { [ -n "$(primary_port)" ]; }

# has_single is true once the first node runs alone.
has_single() { [ "$(monitor_sql "SELECT count(*) FROM pgautofailover.node WHERE reportedstate = 'single' AND goalstate = 'single'" 2>/dev/null)" = 1 ]; }

ready() { # one primary and every other node its secondary, all settled
  [ "$(monitor_sql "SELECT count(*) FROM pgautofailover.node WHERE goalstate = reportedstate AND reportedstate IN ('primary', 'secondary')" 2>/dev/null)" = "$nodes" ] &&
    [ "$(monitor_sql "SELECT count(*) FROM pgautofailover.node WHERE reportedstate = 'primary'" 2>/dev/null)" = 1 ]
}

url() {
  local hosts p
  hosts=$(for p in "${ports[@]}"; do printf '127.0.0.1:%s,' "$p"; done)
  echo "postgres://postgres@${hosts%,}/$db?sslmode=disable&target_session_attrs=read-write"
}

start() {
  install || exit 3 # the test skips on 3: pg_auto_failover cannot be installed here
  if [ -f "$dir/started" ] && ready; then
    url
    return 0
  fi
  stop >/dev/null 2>&1 || true
  mkdir -p "$dir/config" "$dir/data" "$dir/run"
  [ "$(id -u)" = 0 ] && chown -R postgres: "$dir"
  chmod 700 "$dir"

  # pg_autoctl sizes shared_buffers to a quarter of the machine's memory,
  # for each of three instances; a test needs little, and postgresql.auto.conf
  # wins over pg_autoctl's settings (node2 gets node1's by its base backup).
  local pgdata
  for pgdata in monitor node1; do
    as_pg initdb --pgdata "$dir/$pgdata" --username postgres --auth trust --no-sync >/dev/null
    printf '%s\n' "shared_buffers = '32MB'" "effective_cache_size = '256MB'" "work_mem = '4MB'" \
      "maintenance_work_mem = '32MB'" "wal_keep_size = '256MB'" >>"$dir/$pgdata/postgresql.auto.conf"
  done

  # The monitor, with health checks tightened from their defaults (a node
  # is unhealthy after 20 s; here 6 s) so that a failover is quick.
  spawn monitor create monitor --pgdata "$dir/monitor" --pgport "$mon_port" --pgctl "$pgbin/pg_ctl" \
    --hostname 127.0.0.1 --auth trust --no-ssl --run
  wait_until 60 "the monitor to start" monitor_sql "SELECT 1 FROM pgautofailover.formation"
  local setting
  for setting in health_check_period=1000 health_check_timeout=1000 health_check_max_retries=1 \
    health_check_retry_delay=500 node_considered_unhealthy_timeout=5000 primary_demote_timeout=4000; do
    monitor_sql "ALTER SYSTEM SET pgautofailover.${setting%=*} = ${setting#*=}" >/dev/null
  done
  monitor_sql "SELECT pg_reload_conf()" >/dev/null

  # The nodes one after the other: the first becomes primary, the others
  # its standbys (base backups of it).
  local i
  for ((i = 0; i < nodes; i++)); do
    spawn "node$((i + 1))" create postgres --pgdata "$dir/node$((i + 1))" --pgport "${ports[$i]}" --pgctl "$pgbin/pg_ctl" \
      --hostname 127.0.0.1 --listen 127.0.0.1 --name "node$((i + 1))" --dbname "$db" --monitor "$(monitor_url)" \
      --auth trust --no-ssl --run
    if [ "$i" = 0 ]; then
      wait_until 60 "node1 to start" has_single
      # node2 starts from a base backup, which waits for a checkpoint spread
      # over minutes unless there is next to nothing left to write.
      as_pg psql -X -h 127.0.0.1 -p "${ports[0]}" -d postgres -tAc CHECKPOINT >/dev/null
    fi
  done
  wait_until 120 "a primary and its secondaries" ready
  if [ "$nodes" = 3 ]; then
    # The primary then waits for one of its two standbys at every commit,
    # even while the other is away (two nodes would leave it none: the
    # monitor refuses the setting there).
    as_pg pg_autoctl set formation number-sync-standbys 1 --monitor "$(monitor_url)" >/dev/null
    wait_until 60 "number-sync-standbys 1 to apply" sync_standbys_set
  fi
  touch "$dir/started"
  url
}

# stop kills every pg_autoctl process group started here, then any
# postmaster left in a data directory of ours, and removes $dir.
stop() {
  [ -d "$dir" ] || return 0
  local f pid
  for f in "$dir"/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null) || continue # gone meanwhile: it stopped
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for f in "$dir"/*/postmaster.pid; do
    [ -f "$f" ] || continue
    pid=$(head -1 "$f" 2>/dev/null) || continue # gone meanwhile: it stopped
    [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null || true
  done
  sleep 0.5
  for f in "$dir"/*.pid; do
    [ -f "$f" ] || continue
    kill -KILL -- "-$(cat "$f" 2>/dev/null)" 2>/dev/null || true
  done
  for f in "$dir"/*/postmaster.pid; do
    [ -f "$f" ] || continue
    pid=$(head -1 "$f" 2>/dev/null) || continue # gone meanwhile: it stopped
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

# sync_standbys_set is true once the primary names its synchronous standbys.
sync_standbys_set() {
  local p
  p=$(primary_port) && [ -n "$p" ] &&
    [ -n "$(as_pg psql -X -h 127.0.0.1 -p "$p" -d postgres -tAc 'SHOW synchronous_standby_names' 2>/dev/null)" ]
}

node_of_port() { # port → node directory name
  local i
  for ((i = 0; i < nodes; i++)); do
    [ "${ports[$i]}" = "$1" ] && echo "node$((i + 1))" && return 0
  done
  return 1
}

wait_primary() { # [old-port]
  local old=${1:-} p i
  for ((i = 0; i < 600; i++)); do
    p=$(primary_port || true)
    # The monitor's word, and the node's own: a primary whose postmaster
    # was just killed is still primary for the monitor for a few seconds.
    if [ -n "$p" ] && [ "$p" != "$old" ] &&
      [ "$(as_pg psql -X -h 127.0.0.1 -p "$p" -d postgres -tAc 'SELECT NOT pg_is_in_recovery()' 2>/dev/null)" = t ]; then
      echo "$p"
      return 0
    fi
    sleep 0.2
  done
  echo "pgha: no node${old:+ other than $old} became primary within 120s; logs in $dir/*.log" >&2
  return 1
}

case $cmd in
as-pg) # internal: the rest of the command line, as as_pg runs it
  shift
  as_pg "$@"
  ;;
start) start ;;
stop) stop ;;
status)
  find_pgbin
  as_pg pg_autoctl show state --pgdata "$dir/monitor"
  as_pg pg_autoctl show settings --monitor "$(monitor_url)"
  ;;
primary)
  find_pgbin
  p=$(primary_port)
  [ -n "$p" ] || { echo "pgha: no primary" >&2; exit 1; }
  echo "$p"
  ;;
failover)
  find_pgbin
  old=$(primary_port)
  as_pg pg_autoctl perform failover --monitor "$(monitor_url)" --wait 0 >/dev/null 2>&1 ||
    as_pg pg_autoctl perform failover --pgdata "$dir/node1" --wait 0
  wait_primary "$old"
  ;;
kill-primary)
  [ $# -le 2 ] || usage
  find_pgbin
  if [ -n "${2:-}" ]; then
    old=$2
    node_of_port "$old" >/dev/null || { echo "pgha: $old is not a node of this group (${ports[*]})" >&2; exit 1; }
    # The node's own word: the monitor's goal and reported states differ
    # while it applies settings (a standby lost, a synchronous one named).
    [ "$(as_pg psql -X -h 127.0.0.1 -p "$old" -d postgres -tAc 'SELECT NOT pg_is_in_recovery()' 2>/dev/null)" = t ] ||
      { echo "pgha: the node on $old is not taking writes" >&2; exit 1; }
  else
    wait_until 60 "a primary named by the monitor" primary_named
    old=$(primary_port)
  fi
  node=$(node_of_port "$old")
  # The keeper first, or it would start PostgreSQL again at once.
  pm=$(head -1 "$dir/$node/postmaster.pid")
  kill -KILL -- "-$(cat "$dir/$node.pid")" 2>/dev/null || true
  # The postmaster may have gone with the keeper's process group already:
  # gone is what this asks, so only a postmaster still there after the kill
  # is a failure.
  kill -KILL "$pm" 2>/dev/null || ! kill -0 "$pm" 2>/dev/null || { echo "pgha: could not kill the postmaster $pm" >&2; exit 1; }
  echo "$old"
  ;;
kill-postmaster)
  find_pgbin
  wait_until 60 "a primary named by the monitor" primary_named
  old=$(primary_port)
  kill -KILL "$(head -1 "$dir/$(node_of_port "$old")/postmaster.pid")"
  echo "$old"
  ;;
wait-primary)
  [ $# -le 2 ] || usage
  find_pgbin
  wait_primary "${2:-}"
  ;;
wait-ready)
  find_pgbin
  wait_until 120 "a primary and its secondaries" ready
  primary_port
  ;;
*) usage ;;
esac
