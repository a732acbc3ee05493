#!/bin/bash
# validation/run.sh — ConvoSaver's message channels in the log (saver.test.mjs) and
# LangGraph's checkpoint validation suite (unmodified, 718 cases, plus its opt-in
# delta-channel cases), on memory: (its calls on the main thread, then on the pool), SQLite
# and every server named by CONVO_TEST_*_URL.
# Run by tests/node.sh (make check); by hand:
#   CONVO_LIBRARY=.../libconvo.so top_builddir=BUILD bindings/node/validation/run.sh
# The last line is "N passed, N failed" (a skipped case counts as failed).
set -u
pkg=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
rc=0

(cd "$pkg" && node --test --test-reporter=tap validation/saver.test.mjs) 2>&1 | tee "$T/out"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
passed=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
failed=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
cancelled=$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
skipped=$(sed -n 's/^# skipped \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
passed=${passed:-0}
failed=$((${failed:-1} + ${cancelled:-0} + ${skipped:-0}))
[ "$failed" = 0 ] || rc=1
echo "saver.test.mjs: $passed passed, $failed failed"

# @langchain/langgraph-checkpoint-validation's suite, unmodified, with its opt-in
# delta-channel cases (bindings/node/validation), once per driver. A skipped case
# counts as failed: none may be skipped.
validate() { # NAME URL [SYNC: the saver's option, 0 or 1; default: its default for the URL]
    local name=$1 url=$2 json=$T/validate-$1.json vrc counts
    echo "== LangGraph checkpoint validation suite on $name"
    (cd "$pkg" && CONVO_VALIDATE_URL=$url CONVO_VALIDATE_SYNC=${3:-} NO_COLOR=1 node node_modules/vitest/vitest.mjs run \
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
# CONVO_TEST_DRIVERS="redis ..." keeps only the drivers named (as test/support.mjs)
wanted() {
    [ -z "${CONVO_TEST_DRIVERS:-}" ] && return 0
    case " $(echo "$CONVO_TEST_DRIVERS" | tr ',' ' ') " in *" $1 "*) return 0 ;; esac
    return 1
}
# memory: twice: its calls on the main thread (the saver's default there) and on the pool
if wanted memory; then validate memory memory:; validate memory-pool memory: 0; fi
if wanted sqlite; then validate sqlite sqlite:; fi
for kind in REDIS POSTGRES MONGO; do
    var=CONVO_TEST_${kind}_URL
    name=$(echo "$kind" | tr A-Z a-z)
    wanted "$name" || continue
    if [ -n "${!var:-}" ]; then
        validate "$name" "${!var}"
    elif [ "${CONVO_REQUIRE_ALL:-0}" = 1 ] || [ -n "${CONVO_TEST_DRIVERS:-}" ]; then
        echo "run.sh: $var is not set (CONVO_REQUIRE_ALL=1 or CONVO_TEST_DRIVERS names $name)"
        failed=$((failed + 1))
        rc=1
    fi
done

echo "$passed passed, $failed failed"
exit "$rc"
