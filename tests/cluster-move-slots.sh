#!/bin/sh
# cluster-move-slots.sh SRC_PORT DST_PORT PATTERN — live resharding by hand, for
# tests/cluster_ha: every slot of the master on SRC_PORT that holds a key matching
# PATTERN moves to the master on DST_PORT while clients go on writing. Per slot:
# all of them IMPORTING on the target and MIGRATING on the source, then the keys
# MIGRATEd one at a time (a client meets ASK for keys already moved or new,
# TRYAGAIN for a script whose keys are split), then SETSLOT NODE on every master.
# Prints "N slots moved ...".
set -eu
src=$1 dst=$2 pattern=$3
cli() { port=$1; shift; redis-cli -p "$port" "$@"; }
# a key as one argument of a command line redis-cli reads on stdin
quote() { sed 's/["\\]/\\&/g; s/^/"/; s/$/"/'; }

src_id=$(cli "$src" cluster myid | tr -d '\r')
dst_id=$(cli "$dst" cluster myid | tr -d '\r')
masters=$(cli "$src" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2] }')
slots=$(cli "$src" --scan --pattern "$pattern" | quote | sed 's/^/CLUSTER KEYSLOT /' |
    cli "$src" | sort -un)
[ -n "$slots" ] || { echo "0 slots moved from port $src to port $dst"; exit 0; }
# each WORDS [MORE]: the command "WORDS SLOT MORE" for every slot, one a line.
# Every command of a phase goes through one redis-cli: a process start costs
# more than the commands on a loaded machine.
each() { for slot in $slots; do printf '%s %s %s\n' "$1" "$slot" "${2:-}"; done; }
check_ok() { # PORT: runs stdin's commands, every reply must be OK
    out=$(cli "$1") || { echo "cluster-move-slots: redis-cli -p $1 failed" >&2; exit 1; }
    bad=$(printf '%s\n' "$out" | grep -v '^OK$' || true)
    [ -z "$bad" ] || { echo "cluster-move-slots: port $1: $bad" >&2; exit 1; }
}
each "CLUSTER SETSLOT" "IMPORTING $src_id" | check_ok "$dst"
each "CLUSTER SETSLOT" "MIGRATING $dst_id" | check_ok "$src"
sleep 0.2 # clients meet the slots in migration with all their keys at home
rounds=0
while :; do
    keys=$(each "CLUSTER GETKEYSINSLOT" 100 | cli "$src")
    [ -n "$keys" ] || break
    rounds=$((rounds + 1))
    if [ "$rounds" -gt 200 ]; then
        echo "cluster-move-slots: keys still on port $src after 200 rounds" >&2
        exit 1
    fi
    # one key per MIGRATE: a thread's keys are split across the nodes for a while
    printf '%s\n' "$keys" | quote | sed "s/^/MIGRATE 127.0.0.1 $dst \"\" 0 5000 KEYS /" |
        cli "$src" | { grep -v -e '^OK$' -e '^NOKEY$' >&2 || true; }
    sleep 0.05
done
# the target first, then the source, then the other masters (as redis-cli does)
each "CLUSTER SETSLOT" "NODE $dst_id" | check_ok "$dst"
each "CLUSTER SETSLOT" "NODE $dst_id" | check_ok "$src"
for port in $masters; do
    [ "$port" = "$src" ] || [ "$port" = "$dst" ] || each "CLUSTER SETSLOT" "NODE $dst_id" | cli "$port" >/dev/null
done
echo "$(printf '%s\n' "$slots" | wc -l) slots moved from port $src to port $dst in $rounds rounds"
