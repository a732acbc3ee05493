#!/bin/bash
# validation/run.sh — the Node suites that need libconvo's checkpoint put with messages
# (convo_checkpoint_in v2, issue 14), which the library refuses (CONVO_ENOTSUP) until its
# drivers have it: ConvoSaver's message channels in the log (saver.test.mjs) and
# LangGraph's checkpoint validation suite, on memory:, SQLite and every server named by
# CONVO_TEST_*_URL. NOT YET RUN BY make check: tests/node.sh calls it once that lands.
#   CONVO_LIBRARY=.../libconvo.so bindings/node/validation/run.sh
set -u
pkg=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
rc=0

(cd "$pkg" && node --test --test-reporter=tap validation/saver.test.mjs) 2>&1 | tee "$T/out"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
passed=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
failed=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
passed=${passed:-0}
failed=${failed:-1}

# @langchain/langgraph-checkpoint-validation's suite, unmodified, with its opt-in
# delta-channel cases (bindings/node/validation), once per driver. A skipped case
# counts as failed: none may be skipped.
validate() { # NAME URL
    local name=$1 url=$2 json=$T/validate-$1.json vrc counts
    echo "== LangGraph checkpoint validation suite on $name"
    (cd "$pkg" && CONVO_VALIDATE_URL=$url NO_COLOR=1 node node_modules/vitest/vitest.mjs run \
        --globals --reporter=dot --reporter=json --outputFile.json="$json" validation/validation.spec.mjs) 2>&1 |
        tail -n 40
    vrc=${PIPESTATUS[0]}
    counts=$(node -e 'try { const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        console.log(r.numPassedTests, r.numFailedTests + r.numPendingTests + r.numTodoTests); }
        catch (e) { console.log("0 1"); }' "$json")
    set -- $counts
    echo "$name: $1 passed, $2 failed"
    passed=$((passed + $1))
    failed=$((failed + $2))
    if [ "$2" != 0 ] || [ "$1" = 0 ] || [ "$vrc" != 0 ]; then rc=1; fi
}
validate memory memory:
validate sqlite sqlite:
for kind in REDIS POSTGRES MONGO; do
    var=CONVO_TEST_${kind}_URL
    if [ -n "${!var:-}" ]; then
        validate "$(echo "$kind" | tr A-Z a-z)" "${!var}"
    elif [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
        echo "node.sh: $var is not set (CONVO_REQUIRE_ALL=1)"
        failed=$((failed + 1))
        rc=1
    fi
done

echo "$passed passed, $failed failed"
exit "$rc"
