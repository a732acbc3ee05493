#!/usr/bin/env bash
# scripts/bench-all.sh — the figures of docs/performance.md: every `convo bench`
# scenario on every driver, one JSON line each, against throwaway servers.
#
#   scripts/bench-all.sh [BUILD_DIR] > results.jsonl
#
# BUILD_DIR is a configured and built tree (default: this tree). Servers come
# from scripts/test-servers.sh unless CONVO_TEST_SERVER_DIR names running ones.
set -eu
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT}
CONVO=$BUILD/tools/convo
[ -x "$CONVO" ] || { echo "bench-all: build first: no $CONVO" >&2; exit 2; }
tmp=$(mktemp -d)
own_servers=0
if [ -z "${CONVO_TEST_SERVER_DIR:-}" ]; then
    "$ROOT/scripts/test-servers.sh" start "$tmp/servers" >&2
    own_servers=1
    CONVO_TEST_SERVER_DIR=$tmp/servers
fi
cleanup() {
    [ "$own_servers" = 1 ] && "$ROOT/scripts/test-servers.sh" stop "$tmp/servers" >&2
    rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck disable=SC1091
. "$CONVO_TEST_SERVER_DIR/env"
tag=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
add() { case $1 in *\?*) echo "$1&$2" ;; *) echo "$1?$2" ;; esac; }

urls=("memory:" "sqlite:$tmp/bench.db")
drivers=$("$CONVO" --version)
case $drivers in *redis*) urls+=("$(add "$CONVO_TEST_REDIS_URL" "prefix=b$tag")") ;; esac
case $drivers in *postgres*) urls+=("$(add "$CONVO_TEST_POSTGRES_URL" "schema=b_$tag")") ;; esac
case $drivers in *mongo*) urls+=("$(add "$CONVO_TEST_MONGO_URL" "database=b$tag")") ;; esac

echo "# $(date -u +%FT%TZ) $(uname -m) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for url in "${urls[@]}"; do
    run() { "$CONVO" --url "$url" bench --json "$@" || echo "{\"failed\":\"$*\"}"; }
    run --scenario append --messages 10000
    run --scenario append --messages 20000 --threads 4
    run --scenario append --messages 5000 --prefill 100000
    run --scenario load --messages 10000
    run --scenario extra --messages 5000
    run --scenario checkpoint --messages 2000
    run --scenario pop --messages 5000 --prefill 100
    run --scenario conversation --turns 1000
done
