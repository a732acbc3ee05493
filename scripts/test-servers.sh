#!/usr/bin/env bash
# scripts/test-servers.sh — throwaway Redis, PostgreSQL and MongoDB servers for
# convo's tests, on 127.0.0.1, on free ports, with all their data in DIR.
#
#   scripts/test-servers.sh start DIR            start them; write DIR/env
#   scripts/test-servers.sh stop DIR             stop all it started (safe twice)
#   scripts/test-servers.sh restart-redis [DIR]     stop + start, same port, same data
#   scripts/test-servers.sh restart-postgres [DIR]  stop + start, same port, same data
#   scripts/test-servers.sh status [DIR]         what runs (exit 1 if something is down)
#   scripts/test-servers.sh logs [DIR]           the end of each server's log
#
# DIR defaults to $CONVO_TEST_SERVER_DIR for everything but start, so a test
# program that sourced DIR/env can run "$CONVO_TEST_SERVERS" restart-redis.
#
# DIR/env (to be sourced) exports:
#   CONVO_TEST_SERVER_DIR=DIR   CONVO_TEST_SERVERS=<this script>
#   CONVO_TEST_REDIS_URL=redis://127.0.0.1:PORT
#   CONVO_TEST_REDIS_CLUSTER_URL=redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/
#     (a 6-node Redis Cluster, 3 masters + 3 replicas: scripts/redis-cluster.sh,
#     files in DIR/cluster; CONVO_TEST_REDIS_CLUSTER_PORTS lists all six ports)
#   CONVO_TEST_POSTGRES_URL=postgres://convo:PASSWORD@127.0.0.1:PORT/convo
#   CONVO_TEST_MONGO_URL=mongodb://127.0.0.1:PORT
#   CONVO_TEST_MONGO_KIND=standin|real|none
#   and CONVO_TEST_{REDIS,POSTGRES,MONGO}_PORT.
#
# MongoDB: when CONVO_TEST_MONGO_URL is already set (a real mongod), that URL
# is kept and nothing is started (KIND=real); otherwise the Node stand-in
# tests/mongo-server/server.js is started (KIND=standin), or skipped with a
# warning when it does not exist (KIND=none, no URL).
# Redis keeps no data on disk except across restart-redis (SHUTDOWN SAVE).
# CONVO_TEST_NO_CLUSTER=1 starts no Redis Cluster (its suites then skip, or fail
# under CONVO_REQUIRE_ALL=1).
# PostgreSQL runs as the postgres user when this runs as root.
# Status goes to stderr; stdout stays empty.
set -eu

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$SCRIPT_DIR/$(basename "${BASH_SOURCE[0]}")"
ROOT=$(dirname "$SCRIPT_DIR")

log() { printf 'test-servers: %s\n' "$*" >&2; }
warn() { log "warning: $*"; }
die() { log "error: $*"; exit 1; }

usage() {
  sed -n '2,13p' "$SELF" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# alive PID
# shellcheck source=scripts/proc-common.sh
. "$SCRIPT_DIR/proc-common.sh"

# wait_gone PID SECONDS
wait_gone() {
  local pid=$1 n=$(($2 * 10))
  while alive "$pid"; do
    [ "$n" -gt 0 ] || return 1
    n=$((n - 1))
    sleep 0.1
  done
}

# kill_pid PID: TERM, then KILL if it does not go within 10 s.
kill_pid() {
  local pid=$1
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait_gone "$pid" 10 && return 0
  warn "pid $pid ignored SIGTERM; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone "$pid" 5 || warn "pid $pid still there"
}

# Run a daemon-starting command with no file descriptors but 0-2: a caller's
# open fds (the lock below, a test program's sockets or pipes) must not be
# kept open by a long-lived server.
close_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    case "$fd" in ''|*[!0-9]*) continue ;; esac
    if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
  done
}
run_closed() {
  (
    close_fds
    exec "$@"
  )
}

# free_port: print a TCP port that nothing listens on at 127.0.0.1.
free_port() {
  if command -v python3 >/dev/null 2>&1 &&
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()' 2>/dev/null; then
    return 0
  fi
  local i p
  for i in $(seq 1 200); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
    : "$i"
  done
  die "no free port found"
}

# tail_log FILE: show the end of a server log on stderr.
tail_log() {
  if [ -f "$1" ]; then
    log "---- last lines of $1 ----"
    tail -n 30 "$1" >&2 || true
  fi
}

# env_line NAME VALUE: a line `export NAME='VALUE'` safe to source.
env_line() {
  local q="'\\''"
  printf "export %s='%s'\n" "$1" "${2//\'/$q}"
}

set_dir() {
  DIR=${1:-${CONVO_TEST_SERVER_DIR:-}}
  [ -n "$DIR" ] || usage
  [ -d "$DIR" ] || die "$DIR is not a directory"
  DIR=$(cd "$DIR" && pwd)
  STATE="$DIR/state"
}

# lock: one command at a time per DIR (tests may restart servers in parallel).
lock() {
  exec 9>"$DIR/.lock"
  flock -w 300 9 || die "could not lock $DIR/.lock"
}

load_state() {
  REDIS_PORT="" CLUSTER=0 PG_PORT="" PG_ROOT="" PG_BINDIR="" PG_EXTERNAL=0 MONGO_KIND=none
  # shellcheck disable=SC1090
  if [ -f "$STATE" ]; then . "$STATE"; fi
}

# ---------------------------------------------------------------- Redis

redis_launch() {
  local port=$1 d="$DIR/redis" n pid
  mkdir -p "$d"
  command -v redis-server >/dev/null 2>&1 || die "redis-server not found (scripts/install-deps.sh)"
  command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found (scripts/install-deps.sh)"
  run_closed redis-server --port "$port" --bind 127.0.0.1 --dir "$d" \
    --save '' --appendonly no --daemonize yes \
    --pidfile "$d/redis.pid" --logfile "$d/redis.log" </dev/null >/dev/null 2>&1 ||
    { tail_log "$d/redis.log"; return 1; }
  n=300
  while [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" != PONG ]; do
    pid=$(cat "$d/redis.pid" 2>/dev/null || true)
    if [ "$n" -le 0 ] || { [ "$n" -lt 280 ] && ! alive "$pid"; }; then
      log "redis-server did not come up on port $port"
      tail_log "$d/redis.log"
      [ -z "$pid" ] || kill_pid "$pid"
      return 1
    fi
    n=$((n - 1))
    sleep 0.1
  done
}

# redis_halt save|nosave
redis_halt() {
  local d="$DIR/redis" pid
  pid=$(cat "$d/redis.pid" 2>/dev/null || true)
  if alive "$pid"; then
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown "$1" >/dev/null 2>&1 || true
    wait_gone "$pid" 15 || kill_pid "$pid"
  fi
  rm -f "$d/redis.pid"
}

redis_start() {
  local try port
  for try in 1 2 3; do
    port=$(free_port)
    if redis_launch "$port"; then
      REDIS_PORT=$port
      echo "REDIS_PORT=$port" >>"$STATE"
      log "redis-server on 127.0.0.1:$port"
      return 0
    fi
    log "redis start attempt $try failed"
  done
  return 1
}

# ---------------------------------------------------------------- Redis Cluster

cluster_start() {
  if [ "${CONVO_TEST_NO_CLUSTER:-0}" = 1 ]; then
    warn "CONVO_TEST_NO_CLUSTER=1: no Redis Cluster"
    return 0
  fi
  echo "CLUSTER=1" >>"$STATE"
  CLUSTER=1
  "$SCRIPT_DIR/redis-cluster.sh" start "$DIR/cluster" 3 1
}

cluster_halt() {
  [ "$CLUSTER" = 1 ] || return 0
  "$SCRIPT_DIR/redis-cluster.sh" stop "$DIR/cluster" || true
}

# ---------------------------------------------------------------- PostgreSQL

pg_find_bindir() {
  local d
  if [ -n "${CONVO_PG_BINDIR:-}" ]; then
    echo "$CONVO_PG_BINDIR"
    return 0
  fi
  d=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
    echo "$d"
    return 0
  fi
  d=$(command -v pg_ctl 2>/dev/null || true)
  if [ -n "$d" ]; then
    d=$(dirname "$(readlink -f "$d")")
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  fi
  die "PostgreSQL server binaries not found (scripts/install-deps.sh installs postgresql)"
}

# as_pg CMD...: run as the postgres user when root (PostgreSQL refuses root).
as_pg() {
  if is_root; then
    (cd / && run_closed runuser -u postgres -- "$@")
  else
    (cd / && run_closed "$@")
  fi
}

pg_client() {
  if [ -x "$PG_BINDIR/$1" ]; then echo "$PG_BINDIR/$1"; else echo "$1"; fi
}

pg_wait_ready() {
  local isready n=300
  isready=$(pg_client pg_isready)
  until "$isready" -q -h 127.0.0.1 -p "$PG_PORT" -d postgres; do
    [ "$n" -gt 0 ] || { log "postgres not ready on port $PG_PORT"; tail_log "$PG_ROOT/postgres.log"; return 1; }
    n=$((n - 1))
    sleep 0.1
  done
}

pg_launch() {
  if ! as_pg "$PG_BINDIR/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/postgres.log" \
    -w -t 60 start </dev/null >/dev/null 2>&1; then
    log "pg_ctl start failed"
    tail_log "$PG_ROOT/postgres.log"
    return 1
  fi
  pg_wait_ready
}

pg_halt() {
  local pid
  if [ -z "$PG_ROOT" ] || [ ! -d "$PG_ROOT/data" ]; then return 0; fi
  [ -f "$PG_ROOT/data/postmaster.pid" ] || return 0
  pid=$(head -n 1 "$PG_ROOT/data/postmaster.pid" 2>/dev/null || true)
  if alive "$pid"; then
    as_pg "$PG_BINDIR/pg_ctl" -D "$PG_ROOT/data" -m fast -w -t 30 stop \
      </dev/null >/dev/null 2>&1 || true
    if alive "$pid"; then
      warn "pg_ctl stop did not stop postgres (pid $pid); killing it"
      kill -QUIT "$pid" 2>/dev/null || true
      wait_gone "$pid" 10 || kill_pid "$pid"
    fi
  fi
  # A postmaster that died leaves its pidfile; start would refuse it later.
  if ! alive "$pid"; then rm -f "$PG_ROOT/data/postmaster.pid"; fi
}

pg_start() {
  local try port pw data sockdir
  PG_BINDIR=$(pg_find_bindir)
  PG_ROOT="$DIR/pg"
  PG_EXTERNAL=0
  mkdir -p "$PG_ROOT"
  if is_root; then
    id postgres >/dev/null 2>&1 || die "no postgres user (install the postgresql package)"
    # DIR is often a mktemp dir (0700 root): the postgres user must get through.
    chmod go+x "$DIR"
    chown postgres:postgres "$PG_ROOT"
    chmod 700 "$PG_ROOT"
  fi
  # The socket path must fit in sun_path (108 bytes); the postgres user must
  # reach PG_ROOT. Otherwise keep PostgreSQL's files in a short /tmp dir.
  sockdir="$PG_ROOT/run/.s.PGSQL.65535.lock"
  if [ "${#sockdir}" -gt 100 ] || { is_root && ! runuser -u postgres -- test -w "$PG_ROOT"; }; then
    rmdir "$PG_ROOT" 2>/dev/null || true
    PG_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/convo-pg.XXXXXX")
    if [ "${#PG_ROOT}" -gt 60 ]; then
      rmdir "$PG_ROOT"
      PG_ROOT=$(mktemp -d /tmp/convo-pg.XXXXXX)
    fi
    PG_EXTERNAL=1
    if is_root; then chown postgres:postgres "$PG_ROOT"; chmod 700 "$PG_ROOT"; fi
    log "PostgreSQL files in $PG_ROOT (removed by stop)"
  fi
  {
    echo "PG_BINDIR='$PG_BINDIR'"
    echo "PG_ROOT='$PG_ROOT'"
    echo "PG_EXTERNAL=$PG_EXTERNAL"
  } >>"$STATE"

  data="$PG_ROOT/data"
  as_pg mkdir -p "$PG_ROOT/run"
  if ! as_pg "$PG_BINDIR/initdb" -D "$data" -U postgres -E UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 --no-sync \
    </dev/null >"$DIR/initdb.log" 2>&1; then
    cat "$DIR/initdb.log" >&2
    die "initdb failed"
  fi

  for try in 1 2 3; do
    port=$(free_port)
    # Appended settings win over the ones before them.
    as_pg tee -a "$data/postgresql.conf" >/dev/null <<EOF

# ---- convo test server (scripts/test-servers.sh), try $try ----
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$PG_ROOT/run'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
log_min_messages = warning
EOF
    PG_PORT=$port
    if pg_launch; then
      break
    fi
    pg_halt
    log "postgres start attempt $try failed"
    [ "$try" -lt 3 ] || return 1
  done
  echo "PG_PORT=$port" >>"$STATE"

  pw=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
  if ! "$(pg_client psql)" -X -q -v ON_ERROR_STOP=1 -h "$PG_ROOT/run" -p "$PG_PORT" \
    -U postgres -d postgres \
    -c "CREATE ROLE convo LOGIN PASSWORD '$pw'" \
    -c "CREATE DATABASE convo OWNER convo" </dev/null >/dev/null; then
    die "could not create the convo role and database"
  fi
  PG_PASSWORD=$pw
  echo "PG_PASSWORD=$pw" >>"$STATE"
  log "postgres on 127.0.0.1:$PG_PORT (data in $data)"
}

# ---------------------------------------------------------------- MongoDB

mongo_start() {
  local server="$ROOT/tests/mongo-server/server.js" d="$DIR/mongo" pid n port
  # A URL left over from sourcing an earlier DIR/env is the stand-in's, not a real server's.
  if [ -n "${CONVO_TEST_MONGO_URL:-}" ] && [ "${CONVO_TEST_MONGO_KIND:-}" != standin ]; then
    MONGO_KIND=real
    MONGO_URL=$CONVO_TEST_MONGO_URL
    MONGO_PORT=""
    echo "MONGO_KIND=real" >>"$STATE"
    log "MongoDB: using CONVO_TEST_MONGO_URL from the environment (real server)"
    return 0
  fi
  if [ ! -f "$server" ]; then
    MONGO_KIND=none
    echo "MONGO_KIND=none" >>"$STATE"
    warn "$server not found: no MongoDB server (CONVO_TEST_MONGO_URL unset)"
    return 0
  fi
  command -v node >/dev/null 2>&1 || die "node not found (scripts/install-deps.sh)"
  if [ -f "$ROOT/tests/mongo-server/package.json" ] && [ ! -d "$ROOT/tests/mongo-server/node_modules" ]; then
    warn "tests/mongo-server has no node_modules: run scripts/install-deps.sh"
  fi
  mkdir -p "$d"
  # One fork, then exec: $! is node's pid (setsid does not fork again, the
  # subshell not being a process-group leader). Its own session keeps it out
  # of a caller's Ctrl-C.
  (
    close_fds
    exec setsid node "$server" --port 0
  ) </dev/null >"$d/server.log" 2>&1 &
  pid=$!
  echo "$pid" >"$d/pid"
  echo "MONGO_KIND=standin" >>"$STATE"
  n=300
  port=""
  while [ -z "$port" ]; do
    port=$(sed -n 's/^listening \([0-9][0-9]*\).*/\1/p' "$d/server.log" 2>/dev/null | head -n 1)
    [ -z "$port" ] || break
    if [ "$n" -le 0 ] || ! alive "$pid"; then
      log "MongoDB stand-in did not say 'listening PORT'"
      tail_log "$d/server.log"
      return 1
    fi
    n=$((n - 1))
    sleep 0.1
  done
  MONGO_KIND=standin
  MONGO_PORT=$port
  MONGO_URL="mongodb://127.0.0.1:$port"
  echo "MONGO_PORT=$port" >>"$STATE"
  log "MongoDB stand-in on 127.0.0.1:$port (pid $pid)"
}

mongo_halt() {
  local pid
  pid=$(cat "$DIR/mongo/pid" 2>/dev/null || true)
  [ -z "$pid" ] || kill_pid "$pid"
  rm -f "$DIR/mongo/pid"
}

# ---------------------------------------------------------------- commands

write_env() {
  {
    echo "# convo test servers — written by scripts/test-servers.sh; source it."
    env_line CONVO_TEST_SERVER_DIR "$DIR"
    env_line CONVO_TEST_SERVERS "$SELF"
    echo "export CONVO_TEST_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
    echo "export CONVO_TEST_REDIS_PORT=$REDIS_PORT"
    if [ "$CLUSTER" = 1 ]; then
      env_line CONVO_TEST_REDIS_CLUSTER_URL "$(cat "$DIR/cluster/url")"
      env_line CONVO_TEST_REDIS_CLUSTER_PORTS "$(tr '\n' ' ' <"$DIR/cluster/ports" | sed 's/ $//')"
    fi
    echo "export CONVO_TEST_POSTGRES_URL=postgres://convo:$PG_PASSWORD@127.0.0.1:$PG_PORT/convo"
    echo "export CONVO_TEST_POSTGRES_PORT=$PG_PORT"
    if [ "$MONGO_KIND" != none ]; then
      env_line CONVO_TEST_MONGO_URL "$MONGO_URL"
    fi
    if [ -n "${MONGO_PORT:-}" ]; then
      echo "export CONVO_TEST_MONGO_PORT=$MONGO_PORT"
    fi
    echo "export CONVO_TEST_MONGO_KIND=$MONGO_KIND"
  } >"$DIR/env.tmp"
  mv "$DIR/env.tmp" "$DIR/env"
}

do_stop() {
  load_state
  mongo_halt
  if [ -n "$REDIS_PORT" ]; then redis_halt nosave; fi
  cluster_halt
  pg_halt
  if [ "$PG_EXTERNAL" = 1 ] && [ -n "$PG_ROOT" ] && [ -d "$PG_ROOT" ]; then
    rm -rf "$PG_ROOT"
  fi
}

on_start_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    log "start failed; stopping what was started"
    do_stop || true
  fi
}

cmd_start() {
  [ -n "${1:-}" ] || usage
  mkdir -p "$1"
  set_dir "$1"
  lock
  if [ -f "$STATE" ]; then
    load_state
    if alive "$(cat "$DIR/redis/redis.pid" 2>/dev/null || true)" ||
      [ -f "$PG_ROOT/data/postmaster.pid" ]; then
      die "servers already started in $DIR (stop them first)"
    fi
  fi
  rm -f "$STATE" "$DIR/env"
  load_state
  trap on_start_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  redis_start
  cluster_start
  pg_start
  mongo_start
  write_env
  trap - EXIT INT TERM
  log "ready: . $DIR/env"
}

cmd_stop() {
  set_dir "${1:-}"
  lock
  if [ ! -f "$STATE" ]; then
    log "nothing started in $DIR"
    return 0
  fi
  do_stop
  rm -f "$DIR/env"
  log "stopped"
}

cmd_restart_redis() {
  set_dir "${1:-}"
  lock
  load_state
  [ -n "$REDIS_PORT" ] || die "no redis started in $DIR"
  redis_halt save        # keep the data: the restarted server loads dump.rdb
  redis_launch "$REDIS_PORT" || die "redis did not restart on port $REDIS_PORT"
  log "redis-server restarted on 127.0.0.1:$REDIS_PORT"
}

cmd_restart_postgres() {
  set_dir "${1:-}"
  lock
  load_state
  if [ -z "$PG_PORT" ] || [ -z "$PG_ROOT" ]; then die "no postgres started in $DIR"; fi
  pg_halt
  pg_launch || die "postgres did not restart on port $PG_PORT"
  log "postgres restarted on 127.0.0.1:$PG_PORT"
}

cmd_status() {
  local rc=0 pid
  set_dir "${1:-}"
  load_state
  [ -f "$STATE" ] || { log "nothing started in $DIR"; return 1; }
  pid=$(cat "$DIR/redis/redis.pid" 2>/dev/null || true)
  if alive "$pid"; then log "redis: up, port $REDIS_PORT, pid $pid"; else log "redis: down"; rc=1; fi
  if [ "$CLUSTER" = 1 ]; then
    "$SCRIPT_DIR/redis-cluster.sh" status "$DIR/cluster" || rc=1
  fi
  pid=$(head -n 1 "$PG_ROOT/data/postmaster.pid" 2>/dev/null || true)
  if alive "$pid"; then log "postgres: up, port $PG_PORT, pid $pid"; else log "postgres: down"; rc=1; fi
  case "$MONGO_KIND" in
    standin)
      pid=$(cat "$DIR/mongo/pid" 2>/dev/null || true)
      if alive "$pid"; then log "mongo stand-in: up, port ${MONGO_PORT:-?}, pid $pid"; else log "mongo stand-in: down"; rc=1; fi ;;
    *) log "mongo: $MONGO_KIND" ;;
  esac
  return "$rc"
}

# logs: the end of each server's log, for a failed test run's output.
cmd_logs() {
  set_dir "${1:-}"
  load_state
  tail_log "$DIR/redis/redis.log"
  if [ "$CLUSTER" = 1 ]; then "$SCRIPT_DIR/redis-cluster.sh" logs "$DIR/cluster" || true; fi
  if [ -n "$PG_ROOT" ]; then tail_log "$PG_ROOT/postgres.log"; fi
  tail_log "$DIR/mongo/server.log"
}

case "${1:-}" in
  logs) cmd_logs "${2:-}" ;;
  start) cmd_start "${2:-}" ;;
  stop) cmd_stop "${2:-}" ;;
  restart-redis) cmd_restart_redis "${2:-}" ;;
  restart-postgres) cmd_restart_postgres "${2:-}" ;;
  status) cmd_status "${2:-}" ;;
  *) usage ;;
esac
