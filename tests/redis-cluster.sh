#!/bin/sh
# redis-cluster.sh — the driver-independent suites on the Redis Cluster named by
# CONVO_TEST_REDIS_CLUSTER_URL (scripts/test-servers.sh starts one: 3 masters,
# 3 replicas), each in a fresh key prefix: conformance (tests/conformance),
# checkpoints (tests/checkpoints), export/import/copy (tests/dump, sqlite ->
# cluster -> memory -> sqlite), crash safety (tests/crash), the Python
# binding's Redis classes (tests/python.sh) and the Node package's tests on the
# redis driver (tests/node.sh). Keys of a passing suite are deleted.
#
# A missing URL (or a build without the redis driver) skips (77), or fails under
# CONVO_REQUIRE_ALL=1; every other failure counts.
set -u
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
CONVO=$top_builddir/tools/convo
passed=0 failed=0

case $("$CONVO" --version 2>/dev/null) in
    *redis*) ;;
    *)
        [ "${CONVO_REQUIRE_ALL:-0}" != 1 ] || { echo "redis-cluster: FAIL: $CONVO has no redis driver (CONVO_REQUIRE_ALL=1)"; exit 1; }
        echo "redis-cluster: skipped: this build has no redis driver"; exit 77 ;;
esac
convo_need_url redis-cluster CONVO_TEST_REDIS_CLUSTER_URL
base=$CONVO_TEST_REDIS_CLUSTER_URL
token=$(convo_random)

wrap() {
    # shellcheck disable=SC2086
    ${CONVO_TEST_WRAPPER:+"$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER} "$@"
}

# forget PREFIX: delete the keys holding PREFIX on every node that serves slots
# (one key per command: keys of different slots cannot share a DEL).
forget() {
    [ -n "$1" ] || return 0
    command -v redis-cli >/dev/null 2>&1 || return 0
    for port in ${CONVO_TEST_REDIS_CLUSTER_PORTS:-}; do
        redis-cli -p "$port" --scan --pattern "*$1*" 2>/dev/null |
            sed 's/["\\]/\\&/g; s/^/UNLINK "/; s/$/"/' |
            redis-cli -p "$port" >/dev/null 2>&1 || true
    done
}

# run NAME PREFIX COMMAND...: one suite; its keys are deleted when it passed.
run() {
    name=$1 pfx=$2
    shift 2
    echo "==== redis-cluster: $name"
    if "$@"; then
        passed=$((passed + 1))
        forget "$pfx"
    else
        failed=$((failed + 1))
        echo "redis-cluster: FAIL: $name (keys kept under prefix $pfx)"
    fi
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/convo-cluster.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

run conformance "k$token" convo_conformance "$(convo_url_add "$base" "prefix=k$token")"
run checkpoints "c$token" wrap "$top_builddir/tests/checkpoints" "$(convo_url_add "$base" "prefix=c$token")"
# a put with messages that conflicts writes nothing; layouts 1 and 2 are migrated; the tail
# rewrite: checkpoints, values, deadline, forks racing it, its cost (tests/redis-layout.c)
run layout "l$token" wrap "$top_builddir/tests/redis_layout" "$base" "l$token"
# the thread index on the cluster: shards, the client's index writes, repairs (tests/redis-index.c)
run index "x$token" wrap "$top_builddir/tests/redis_index" "$base" "x$token"
first=memory: last=memory:
case $("$CONVO" --version 2>/dev/null) in *sqlite*) first=sqlite:$tmp/a.db last=sqlite:$tmp/b.db ;; esac
run dump "d$token" wrap "$top_builddir/tests/dump" "$first" \
    "$(convo_url_add "$base" "prefix=d$token")" memory: "$last"
# tests/crash derives the fresh prefixes r<token>_o0, _o1, ... from this one
run crash "r$token" wrap "$top_builddir/tests/crash" "$(convo_url_add "$base" "prefix=r$token")"
# the Python classes of the redis driver, on the cluster (each class empties its
# own prefix=convo_py_PID_... at the end)
run python "" env CONVO_TEST_REDIS_URL="$base" "$top_srcdir/tests/python.sh" \
    test_store.StoreTests_redis test_asyncio.CheckpointerTests_redis test_rewrite.RewriteTests_redis
# the Node package's tests, their redis driver on the cluster (memory:, SQLite
# and the other servers left out); every store's prefix starts n<token>
run node "n$token" env top_builddir="$top_builddir" CONVO_TEST_REDIS_URL="$base" CONVO_TEST_DRIVERS=redis \
    CONVO_TEST_PREFIX="n$token" "$top_srcdir/tests/node.sh"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
