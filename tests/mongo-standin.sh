#!/bin/sh
# mongo-standin.sh — the MongoDB stand-in's own protocol tests
# (tests/mongo-server/test/, node's test runner; each starts its own server). Among
# them the guard of docs/mongo.md's minimum server: the stand-in refuses, as mongod 4.4
# does, $lookup with pipeline and localField/foreignField and stages or operators newer
# than 4.4. Then the conformance and checkpoint suites once more, on a stand-in started with
# --partial-indexes=ignore --sparse-indexes=ignore: like servers that speak the protocol
# without partial or sparse indexes and build such an index over every document (a
# driver relying on a partial unique index fails there; see Servers in docs/mongo.md).
# Skips without node or the stand-in's npm packages, or fails under
# CONVO_REQUIRE_ALL=1.
set -u
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
dir=$top_srcdir/tests/mongo-server
why=
command -v node >/dev/null 2>&1 || why="node not found"
[ -n "$why" ] || [ -d "$dir/node_modules" ] || why="$dir/node_modules is missing (npm ci there, or scripts/install-deps.sh)"
if [ -n "$why" ]; then
    if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
        echo "mongo-standin: FAIL: $why, but CONVO_REQUIRE_ALL=1" >&2
        exit 1
    fi
    echo "mongo-standin: skipped: $why" >&2
    exit 77
fi
(cd "$dir" && node --test --test-reporter=tap test/) || exit 1

# the conformance suite on a stand-in without partial or sparse indexes
tmp=$(mktemp -d "${TMPDIR:-/tmp}/convo-standin.XXXXXX") || exit 99
node "$dir/server.js" --port 0 --partial-indexes=ignore --sparse-indexes=ignore \
    >"$tmp/out" 2>"$tmp/err" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
port=
n=0
while [ -z "$port" ] && [ "$n" -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
    port=$(sed -n 's/^listening \([0-9][0-9]*\)$/\1/p' "$tmp/out")
    [ -n "$port" ] || sleep 0.1
    n=$((n + 1))
done
if [ -z "$port" ]; then
    echo "mongo-standin: the stand-in did not start:" >&2
    cat "$tmp/err" >&2
    exit 99
fi
url=mongodb://127.0.0.1:$port/
echo "# conformance and checkpoint suites on a stand-in ignoring partial and sparse index options"
rc=0
convo_conformance "${url}?database=plain$(convo_random)" || rc=1
# shellcheck disable=SC2086
${CONVO_TEST_WRAPPER:+"$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER} \
    "$top_builddir/tests/checkpoints" "${url}?database=plainc$(convo_random)" || rc=1
exit $rc
