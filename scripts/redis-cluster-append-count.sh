#!/usr/bin/env bash
# scripts/redis-cluster-append-count.sh — what an append of a known thread
# costs each master of a Redis Cluster, counted, so the machine's load does not
# enter (docs/performance.md): N threads made as a chat app makes them (a
# save_extra holding the user_id, an append), then K appends to each; around
# those, every master's CONFIG RESETSTAT, then its INFO commandstats and
# total_reads_processed (one read event = one pipeline reaching that master,
# when it arrives in one piece). Once with user_id declared indexed, once
# without declared keys (the bench's two stores). Builds
# scripts/redis-cluster-append-count.c against the tree's libconvo.
#
#   scripts/redis-cluster-append-count.sh [N [K]]   (default 1000 2; needs
#       CONVO_TEST_REDIS_CLUSTER_URL and _PORTS from scripts/test-servers.sh;
#       CONVO_LIBDIR: another build's libconvo.so; CONVO_COUNT_PARAMS: more
#       URL parameters, e.g. '&index_beside=0')
set -eu
n=${1:-1000}
k=${2:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
libdir=${CONVO_LIBDIR:-$root/.libs}
: "${CONVO_TEST_REDIS_CLUSTER_URL:?needs the cluster of scripts/test-servers.sh}"
: "${CONVO_TEST_REDIS_CLUSTER_PORTS:?needs the cluster of scripts/test-servers.sh}"
[ -e "$libdir/libconvo.so" ] || { echo "redis-cluster-append-count: build first" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/convo-append-count.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cc -O2 -o "$dir/harness" "$root/scripts/redis-cluster-append-count.c" -I"$root/include" \
    -L"$libdir" -lconvo
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
masters=
for p in $CONVO_TEST_REDIS_CLUSTER_PORTS; do
    redis-cli -p "$p" role | head -1 | grep -q master && masters="$masters $p"
done
cat >"$dir/hook" <<HOOK
#!/bin/sh
for p in $masters; do
    if [ "\$1" = before ]; then redis-cli -p \$p config resetstat >/dev/null
    else
        { redis-cli -p \$p info commandstats; redis-cli -p \$p info stats; } |
            tr -d '\r' | sed -n "s/^cmdstat_\([a-z]*\):calls=\([0-9]*\).*/\$p \1 \2/p
                s/^total_reads_processed:\([0-9]*\)/\$p reads \1/p" >>"$dir/counts"
    fi
done
HOOK
chmod +x "$dir/hook"
for kind in indexed bare; do
    : >"$dir/counts"
    prefix="cnt$$$kind"
    "$dir/harness" "$CONVO_TEST_REDIS_CLUSTER_URL?prefix=$prefix${CONVO_COUNT_PARAMS:-}" "$kind" \
        "$n" "$k" "$dir/hook"
    appends=$((n * k))
    echo "$kind: $appends appends of known threads (N=$n K=$k), per append:"
    awk -v a="$appends" '$2 != "config" && $2 != "info" { t[$2] += $3; m[$1] = m[$1] sprintf(" %s=%.2f", $2, $3 / a) }
        END { for (p in m) print "  master " p ":" m[p];
              s = ""; for (c in t) if (c != "reads") s = s sprintf(" %s=%.2f", c, t[c] / a);
              print "  all masters:" s; printf "  masters reached (read events) per append: %.2f\n", t["reads"] / a }' \
        "$dir/counts"
    for p in $masters; do
        redis-cli -p "$p" --scan --pattern "$prefix:*" | sed 's/^/UNLINK "/; s/$/"/' |
            redis-cli -p "$p" >/dev/null
    done
done
