#!/usr/bin/env bash
# scripts/redis-pop-cost.sh — server instructions of the Redis driver's quick
# tail rewrite (drivers/redis/rewrite_quick.lua, or SCRIPT) per pop, against
# the common append's MULTI; counted by callgrind in a private redis-server on
# loopback, so the machine's load does not enter (docs/redis.md, "Cost").
#
#   scripts/redis-pop-cost.sh [window|move] [N] [SCRIPT]
#
# N (default 2000) rounds of: MULTI RPUSHX PTTL EXEC (an append), then the
# script popping that message with its expected length, as the driver sends
# it: inside the activity window ('p', layout 7) or moving P:ix:r. Prints the
# inclusive instructions of evalShaCommand and execCommand per call.
set -eu
mode=${1:-window}
n=${2:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
script=${3:-$root/drivers/redis/rewrite_quick.lua}
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
    { echo "redis-pop-cost: needs valgrind (callgrind)" >&2; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/convo-pop-cost.XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" redis-server --port "$port" \
    --bind 127.0.0.1 --save '' --appendonly no >"$dir/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
resp() { # one command in RESP
    printf '*%d\r\n' "$#"
    for a in "$@"; do printf '$%d\r\n%s\r\n' "${#a}" "$a"; done
}
sha=$(redis-cli -p "$port" -x script load <"$script")
t=thread-000001 msgs='P:{thread-000001}:msgs' meta='P:{thread-000001}:meta'
u=1764197000000000 rec=$(printf 'x%.0s' $(seq 200))
redis-cli -p "$port" hset "$meta" v 4 c $((u - 10)) u $u >/dev/null
for _ in $(seq 20); do redis-cli -p "$port" rpush "$msgs" "$rec" >/dev/null; done
redis-cli -p "$port" zadd P:ix:r $u $t >/dev/null
{
    for i in $(seq "$n"); do
        resp MULTI; resp RPUSHX "$msgs" "$rec"; resp PTTL "$msgs"; resp EXEC
        if [ "$mode" = window ]; then
            resp EVALSHA "$sha" 2 "$msgs" "$meta" $((u + 1000)) p - 21 -1
        else # ARGV[2] is "P:ix:r\0ID" (a NUL cannot pass through resp's arguments)
            printf '*10\r\n'
            for a in EVALSHA "$sha" 2 "$msgs" "$meta" $((u + 1000 + i)); do
                printf '$%d\r\n%s\r\n' "${#a}" "$a"
            done
            printf '$%d\r\nP:ix:r\0%s\r\n' $((7 + ${#t})) "$t"
            for a in - 21 -1; do printf '$%d\r\n%s\r\n' "${#a}" "$a"; done
        fi
    done
} >"$dir/in.resp"
redis-cli -p "$port" --pipe <"$dir/in.resp" >"$dir/pipe.log"
len=$(redis-cli -p "$port" llen "$msgs")
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" 2>/dev/null || true
pid=
[ "$len" = 20 ] || { echo "redis-pop-cost: the list holds $len, not 20: a call failed" >&2; exit 1; }
callgrind_annotate --inclusive=yes "$dir/cg.out" 2>/dev/null | awk -v n="$n" -v mode="$mode" '
    /evalShaCommand/ { gsub(",", "", $1); e = $1 }
    /:execCommand/ { gsub(",", "", $1); x = $1 }
    END { printf "%s: pop %.0f, append (EXEC) %.0f server instructions per call\n", mode, e / n, x / n }'
