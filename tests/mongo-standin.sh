#!/bin/sh
# mongo-standin.sh — the MongoDB stand-in's own protocol tests
# (tests/mongo-server/test/, node's test runner; each starts its own server). Among
# them the guard of docs/mongo.md's minimum server: the stand-in refuses, as mongod 4.4
# does, $lookup with pipeline and localField/foreignField and stages or operators newer
# than 4.4. Skips without node or the stand-in's npm packages, or fails under
# CONVO_REQUIRE_ALL=1.
set -u
dir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/mongo-server
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
cd "$dir" && exec node --test --test-reporter=tap test/
