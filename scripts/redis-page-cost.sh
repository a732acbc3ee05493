#!/usr/bin/env bash
# scripts/redis-page-cost.sh — instructions of the Redis driver's thread-index
# page (one user's 20 newest threads with extra and last message) against a
# 20-message load, on the server and in the client; counted by callgrind, so
# the machine's load does not enter (docs/performance.md). Builds
# scripts/redis-page-cost.c against the tree's libconvo (build first); a
# private redis-server on loopback under callgrind, its counters zeroed
# around N pages, then N loads; the client's with --toggle-collect.
#
#   scripts/redis-page-cost.sh [N]     (CONVO_LIBDIR: another build's libconvo.so;
#                                       CONVO_PAGE_COST_PARAMS: more URL parameters,
#                                       e.g. '&page_guess=0')
set -eu
n=${1:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
libdir=${CONVO_LIBDIR:-$root/.libs}
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null &&
    command -v callgrind_control >/dev/null ||
    { echo "redis-page-cost: needs valgrind (callgrind)" >&2; exit 77; }
[ -e "$libdir/libconvo.so" ] || { echo "redis-page-cost: build first (no $libdir/libconvo.so)" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/convo-page-cost.XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
cc -O2 -o "$dir/harness" "$root/scripts/redis-page-cost.c" -I"$root/include" -L"$libdir" -lconvo
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$dir/server.%p" redis-server --port "$port" \
    --bind 127.0.0.1 --save '' --appendonly no >"$dir/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
url="redis://127.0.0.1:$port?prefix=cost${CONVO_PAGE_COST_PARAMS:-}"
"$dir/harness" "$url" seed
per() { # inclusive instructions of function $2 in callgrind file $1, per call of the harness
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
        awk -v n="$n" -v f="$2" '$0 ~ f && !x { gsub(",", "", $1); x = $1 } END { printf "%.0f", x / n }'
}
i=0
for what in pages loads; do
    i=$((i + 1))
    callgrind_control -z "$pid" >/dev/null 2>&1
    "$dir/harness" "$url" "$what" "$n"
    callgrind_control -d "$what" "$pid" >/dev/null 2>&1
    server=$(per "$dir/server.$pid.$i" readQueryFromClient)
    fn=$([ "$what" = pages ] && echo convo_thread_list_ex || echo convo_load)
    valgrind --tool=callgrind --callgrind-out-file="$dir/client.$what" --toggle-collect="$fn" \
        "$dir/harness" "$url" "$what" "$n" >/dev/null 2>&1
    client=$(per "$dir/client.$what" "$fn")
    echo "$what: server $server, client $client instructions each"
done
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" 2>/dev/null || true
pid=
