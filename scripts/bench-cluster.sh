#!/usr/bin/env bash
# scripts/bench-cluster.sh [BUILDDIR] — does a Redis Cluster scale appends? In one
# run: a 1-master and a 3-master cluster (no replicas, scripts/redis-cluster.sh),
# and on each, in turn for ROUNDS rounds:
#   convo bench --scenario append --threads 6 --messages N   (threads bench-RUN-append-I
#                                                            hash over every master)
#   redis-benchmark [--cluster] -t set -c 6 -n N              (Redis alone, for comparison)
# Prints one JSON line per run and, last, the median ops/s of each and the ratio
# 3 masters / 1 master. BUILDDIR holds tools/convo (default: this tree).
#   CONVO_BENCH_ROUNDS=3 CONVO_BENCH_MESSAGES=20000 CONVO_BENCH_THREADS=6
# Any failure (a cluster that does not start, convo bench failing) ends it with non-zero.
set -eu
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-$ROOT}" && pwd)
CONVO=$BUILD/tools/convo
ROUNDS=${CONVO_BENCH_ROUNDS:-3}
N=${CONVO_BENCH_MESSAGES:-20000}
T=${CONVO_BENCH_THREADS:-6}
[ -x "$CONVO" ] || { echo "bench-cluster: no $CONVO: build first" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/convo-bench-cluster.XXXXXX")
cleanup() {
  "$ROOT/scripts/redis-cluster.sh" stop "$TMP/one" 2>/dev/null || true
  "$ROOT/scripts/redis-cluster.sh" stop "$TMP/three" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$ROOT/scripts/redis-cluster.sh" start "$TMP/one" 1 0
"$ROOT/scripts/redis-cluster.sh" start "$TMP/three" 3 0

# json_field NAME: the number NAME in the JSON line on stdin
json_field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

for round in $(seq 1 "$ROUNDS"); do
  for c in one three; do
    masters=1
    [ "$c" = one ] || masters=3
    port=$(head -n 1 "$TMP/$c/ports")
    line=$("$CONVO" --url "$(cat "$TMP/$c/url")?prefix=b$round" bench --scenario append \
      --threads "$T" --messages "$N" --json)
    ops=$(printf '%s\n' "$line" | json_field ops_per_sec)
    [ -n "$ops" ] || { echo "bench-cluster: no ops_per_sec in: $line" >&2; exit 1; }
    echo "{\"tool\":\"convo bench\",\"masters\":$masters,\"round\":$round,\"result\":$line}"
    echo "$ops" >>"$TMP/convo-$c"
    # redis-benchmark --cluster refuses a 1-node cluster; that node serves every key anyway
    cluster_flag=--cluster
    [ "$masters" -gt 1 ] || cluster_flag=""
    # shellcheck disable=SC2086
    ops=$(redis-benchmark $cluster_flag -h 127.0.0.1 -p "$port" -t set -c "$T" -n "$N" -q 2>/dev/null |
      tr '\r' '\n' | sed -n 's/^SET: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1)
    echo "{\"tool\":\"redis-benchmark\",\"masters\":$masters,\"round\":$round,\"clients\":$T,\"requests\":$N,\"ops_per_sec\":${ops:-0}}"
    echo "${ops:-0}" >>"$TMP/raw-$c"
  done
done

summary() { # NAME FILE_PREFIX
  local one three ratio
  [ -s "$TMP/$2-one" ] || return 0
  one=$(median <"$TMP/$2-one")
  three=$(median <"$TMP/$2-three")
  ratio=$(awk -v a="$three" -v b="$one" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  echo "{\"summary\":\"$1\",\"clients\":$T,\"one_master_ops_per_sec\":$one,\"three_masters_ops_per_sec\":$three,\"ratio\":$ratio}"
}
summary "convo bench append" convo
summary "redis-benchmark set" raw
echo "(load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
