#!/usr/bin/env bash
# scripts/redis-cluster.sh — a throwaway Redis Cluster on 127.0.0.1, free ports,
# all files in DIR: MASTERS masters with REPLICAS replicas each (default 3 1:
# six redis-server processes, made a cluster by `redis-cli --cluster create`).
#
#   scripts/redis-cluster.sh start DIR [MASTERS [REPLICAS]]   start; wait for cluster_state:ok
#   scripts/redis-cluster.sh stop DIR                         stop every node (safe twice)
#   scripts/redis-cluster.sh status DIR                       what runs (exit 1 if a node is down)
#   scripts/redis-cluster.sh logs DIR                         the end of each node's log
#   scripts/redis-cluster.sh wait DIR                         wait until every live node says ok
#
# start writes DIR/url (redis+cluster://127.0.0.1:P1,127.0.0.1:P2,.../, the
# masters' addresses) and DIR/ports (every node's port, masters first); node I
# keeps its pid file, log and nodes.conf in DIR/node-I. Nodes have
# cluster-node-timeout 1000 ms (CONVO_CLUSTER_NODE_TIMEOUT), so a killed master's
# replica is promoted in ~2 s; no persistence. Fewer than 3 masters (which
# redis-cli --cluster create refuses) are joined by hand: ADDSLOTSRANGE, MEET,
# REPLICATE. Status goes to stderr; stdout stays empty.
set -eu

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$SCRIPT_DIR/$(basename "${BASH_SOURCE[0]}")"
NODE_TIMEOUT=${CONVO_CLUSTER_NODE_TIMEOUT:-1000}

log() { printf 'redis-cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,10p' "$SELF" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# alive PID
# shellcheck source=scripts/proc-common.sh
. "$SCRIPT_DIR/proc-common.sh"

# free_ports N: N distinct TCP ports nothing listens on at 127.0.0.1 (one
# python3 start: it takes a second on a loaded machine).
free_ports() {
  python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1" || die "python3 is needed to find free ports"
}

cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

tail_log() {
  if [ -f "$1" ]; then
    log "---- last lines of $1 ----"
    tail -n 20 "$1" >&2 || true
  fi
}

# A daemon must not inherit a caller's fds (pipes of a test program, locks).
run_closed() {
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      case "$fd" in ''|*[!0-9]*) continue ;; esac
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    exec "$@"
  )
}

node_launch() { # INDEX PORT BUSPORT
  local d="$DIR/node-$1" n=300 pid
  mkdir -p "$d"
  run_closed redis-server --port "$2" --cluster-port "$3" --bind 127.0.0.1 --dir "$d" \
    --cluster-enabled yes --cluster-config-file "$d/nodes.conf" \
    --cluster-node-timeout "$NODE_TIMEOUT" --repl-diskless-sync-delay 0 --save '' --appendonly no --daemonize yes \
    --pidfile "$d/redis.pid" --logfile "$d/redis.log" </dev/null >/dev/null 2>&1 ||
    { tail_log "$d/redis.log"; return 1; }
  until [ "$(cli "$2" ping 2>/dev/null)" = PONG ]; do
    pid=$(cat "$d/redis.pid" 2>/dev/null || true)
    if [ "$n" -le 0 ] || { [ "$n" -lt 280 ] && ! alive "$pid"; }; then
      log "node $1 did not come up on port $2"
      tail_log "$d/redis.log"
      return 1
    fi
    n=$((n - 1))
    sleep 0.1
  done
}

ports() { cat "$DIR/ports" 2>/dev/null || true; }

# node_ok PORT: the node sees the cluster whole, all slots served, every node known.
node_ok() {
  local info total
  total=$(ports | wc -l)
  info=$(cli "$1" cluster info 2>/dev/null | tr -d '\r') || return 1
  printf '%s\n' "$info" | grep -qx 'cluster_state:ok' &&
    printf '%s\n' "$info" | grep -qx 'cluster_slots_ok:16384' &&
    printf '%s\n' "$info" | grep -qx "cluster_known_nodes:$total"
}

# replica_ok PORT: a replica's link to its master is up (initial sync done).
replica_ok() {
  local info
  info=$(cli "$1" info replication 2>/dev/null | tr -d '\r') || return 1
  printf '%s\n' "$info" | grep -qx 'role:master' ||
    printf '%s\n' "$info" | grep -qx 'master_link_status:up'
}

# wait_ok SECONDS: every live node is ok and every live replica in sync.
wait_ok() {
  local n=$(($1 * 10)) p i bad
  while :; do
    bad=""
    i=0
    for p in $(ports); do
      i=$((i + 1))
      alive "$(cat "$DIR/node-$i/redis.pid" 2>/dev/null || true)" || continue
      if ! node_ok "$p" || ! replica_ok "$p"; then bad="$bad $p"; fi
    done
    [ -n "$bad" ] || return 0
    if [ "$n" -le 0 ]; then
      log "not ok after $1 s on port(s)$bad"
      return 1
    fi
    n=$((n - 1))
    sleep 0.1
  done
}

# join_by_hand MASTERS REPLICAS: what redis-cli --cluster create does, for 1 or 2 masters.
join_by_hand() {
  local m=$1 r=$2 all first i j lo hi id
  mapfile -t all < <(ports)
  first=${all[0]}
  for ((i = 0; i < m; i++)); do
    lo=$((16384 * i / m))
    hi=$((16384 * (i + 1) / m - 1))
    cli "${all[$i]}" cluster addslotsrange "$lo" "$hi" >/dev/null
  done
  for ((i = 1; i < ${#all[@]}; i++)); do
    # the bus port is not PORT + 10000 (it might not exist): given, as CLUSTER MEET allows
    cli "${all[$i]}" cluster meet 127.0.0.1 "$first" "$(head -n 1 "$DIR/busports")" >/dev/null
  done
  for ((i = 0; i < m; i++)); do
    id=$(cli "${all[$i]}" cluster myid | tr -d '\r')
    for ((j = 0; j < r; j++)); do
      local rp=${all[$((m + i * r + j))]} n=100 out
      # REPLICATE needs the master known to the replica first
      until out=$(cli "$rp" cluster replicate "$id" 2>&1) && [ "$out" = OK ]; do
        [ "$n" -gt 0 ] || die "node $rp could not replicate $id: $out"
        n=$((n - 1))
        sleep 0.1
      done
    done
  done
}

set_dir() {
  [ -n "${1:-}" ] || usage
  [ -d "$1" ] || die "$1 is not a directory"
  DIR=$(cd "$1" && pwd)
}

cmd_start() {
  local m=${2:-3} r=${3:-1} total i port bus addrs="" url="" rc free
  [ -n "${1:-}" ] || usage
  case "$m$r" in *[!0-9]*) usage ;; esac
  [ "$m" -ge 1 ] || usage
  command -v redis-server >/dev/null 2>&1 || die "redis-server not found (scripts/install-deps.sh)"
  command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found (scripts/install-deps.sh)"
  mkdir -p "$1"
  set_dir "$1"
  [ ! -s "$DIR/ports" ] || die "a cluster was started in $DIR already (stop it first)"
  total=$((m * (1 + r)))
  : >"$DIR/ports"
  : >"$DIR/busports"
  trap 'rc=$?; if [ "$rc" != 0 ]; then log "start failed; stopping the nodes"; cmd_stop "$DIR"; fi' EXIT
  read -r -a free <<<"$(free_ports $((2 * total)))"
  for ((i = 1; i <= total; i++)); do
    port=${free[$((2 * i - 2))]}
    bus=${free[$((2 * i - 1))]}
    node_launch "$i" "$port" "$bus" || die "node $i did not start"
    echo "$port" >>"$DIR/ports"
    echo "$bus" >>"$DIR/busports"
    addrs="$addrs 127.0.0.1:$port"
    if [ "$i" -le "$m" ]; then url="$url${url:+,}127.0.0.1:$port"; fi
  done
  if [ "$m" -ge 3 ]; then
    # redis-cli makes the first M nodes masters and the rest their replicas
    # shellcheck disable=SC2086
    redis-cli --cluster create $addrs --cluster-replicas "$r" --cluster-yes \
      >"$DIR/create.log" 2>&1 || { cat "$DIR/create.log" >&2; die "redis-cli --cluster create failed"; }
  else
    join_by_hand "$m" "$r"
  fi
  wait_ok 60 || die "the cluster did not reach cluster_state:ok"
  echo "redis+cluster://$url/" >"$DIR/url"
  trap - EXIT
  log "cluster of $m master(s) x $r replica(s) on ports $(ports | tr '\n' ' ')"
}

cmd_stop() {
  local i=0 p pid
  set_dir "${1:-}"
  for p in $(ports); do
    i=$((i + 1))
    pid=$(cat "$DIR/node-$i/redis.pid" 2>/dev/null || true)
    if alive "$pid"; then
      cli "$p" shutdown nosave >/dev/null 2>&1 || true
      local n=100
      while alive "$pid" && [ "$n" -gt 0 ]; do n=$((n - 1)); sleep 0.1; done
      if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    rm -f "$DIR/node-$i/redis.pid"
  done
  : >"$DIR/ports"
  rm -f "$DIR/url"
}

cmd_status() {
  local i=0 p pid rc=0
  set_dir "${1:-}"
  for p in $(ports); do
    i=$((i + 1))
    pid=$(cat "$DIR/node-$i/redis.pid" 2>/dev/null || true)
    if alive "$pid" && node_ok "$p"; then
      log "node $i: up, port $p, $(cli "$p" role 2>/dev/null | head -n 1)"
    else
      log "node $i: down or not ok, port $p"
      rc=1
    fi
  done
  [ "$i" -gt 0 ] || { log "no cluster in $DIR"; rc=1; }
  return "$rc"
}

cmd_logs() {
  local d
  set_dir "${1:-}"
  for d in "$DIR"/node-*; do
    [ -d "$d" ] && tail_log "$d/redis.log"
  done
  [ ! -f "$DIR/create.log" ] || tail_log "$DIR/create.log"
}

case "${1:-}" in
  start) cmd_start "${2:-}" "${3:-3}" "${4:-1}" ;;
  stop) cmd_stop "${2:-}" ;;
  status) cmd_status "${2:-}" ;;
  logs) cmd_logs "${2:-}" ;;
  wait) set_dir "${2:-}"; wait_ok 60 ;;
  *) usage ;;
esac
