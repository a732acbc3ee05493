#!/bin/sh
# dump.sh — export / import / copy (tests/dump) along a chain of every driver
# built: sqlite -> redis -> postgres -> mongo -> memory -> sqlite, each store in
# a fresh namespace. A missing server is left out of the chain, or fails under
# CONVO_REQUIRE_ALL=1. CONVO_DUMP_BIG=N sets the size of the bounded-memory copy.
set -u
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
drivers=$("$top_builddir/tools/convo" --version 2>/dev/null)
missing=0
chain=""
add() { chain="$chain $1"; }

network() { # VARIABLE PARAM
    eval "base=\${$1:-}"
    if [ -z "$base" ]; then
        echo "dump: $1 is not set: left out of the chain" >&2
        missing=1
        return
    fi
    add "$(convo_url_add "$base" "$2$(convo_random)")"
}

case $drivers in *sqlite*) add "sqlite:$tmp/a.db" ;; esac
case $drivers in *redis*) network CONVO_TEST_REDIS_URL prefix=d ;; esac
case $drivers in *postgres*) network CONVO_TEST_POSTGRES_URL schema=d_ ;; esac
case $drivers in *mongo*) network CONVO_TEST_MONGO_URL database=d ;; esac
add memory:
case $drivers in *sqlite*) add "sqlite:$tmp/b.db" ;; *) add memory: ;; esac
if [ "$missing" = 1 ] && [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
    echo "dump: FAIL: a test server is missing but CONVO_REQUIRE_ALL=1" >&2
    exit 1
fi
echo "== dump chain:$chain" | sed 's/:[^:@/]*@/:***@/g'
# shellcheck disable=SC2086
exec ${CONVO_TEST_WRAPPER:+"$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER} "$top_builddir/tests/dump" $chain
