#!/bin/bash
# node.sh — the Node package's tests on the libconvo just built, against memory:, SQLite
# and every server named by CONVO_TEST_{REDIS,POSTGRES,MONGO}_URL. Run by `make check`;
# by hand:  top_builddir=BUILD top_srcdir=SRC tests/node.sh
#  - bindings/node/test/*.test.mjs (node's test runner): the Store calls, ConvoSaver,
#    the LangGraph runtime across process restarts (langgraph.test.mjs) and
#    examples/node/chatbot.mjs (example.test.mjs), examples/node/openai-agents-chat.mjs and
#    ai-sdk-route.mjs (openai-agents/, ai-sdk/example.test.mjs); further test files go there too;
#  - bindings/node/validation/run.sh: ConvoSaver's message channels in the log and
#    LangGraph's checkpoint validation suite (718 cases + its delta-channel cases) per
#    driver.
set -u

top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=$(cd "${top_srcdir:-$(dirname "$0")/..}" && pwd)
pkg=$top_srcdir/bindings/node
export top_builddir top_srcdir

if ! command -v node >/dev/null 2>&1; then
    echo "SKIP: node not found (scripts/install-deps.sh installs it)"
    exit 77
fi
export CONVO_LIBRARY=$top_builddir/.libs/libconvo.so
if [ ! -e "$CONVO_LIBRARY" ]; then
    echo "node.sh: $CONVO_LIBRARY does not exist: build libconvo.la first" >&2
    exit 99
fi
for dir in "$pkg" "$top_srcdir/examples/node"; do
    if [ ! -d "$dir/node_modules" ]; then
        # an unpacked tarball (make distcheck: read-only sources) has no npm packages;
        # under CONVO_REQUIRE_ALL=1 (scripts/test.sh, CI) that is a failure
        echo "node.sh: $dir/node_modules is missing: run scripts/install-deps.sh (npm ci)" >&2
        if [ "${CONVO_REQUIRE_ALL:-0}" != 1 ]; then
            echo "SKIP: the npm packages are not installed"
            exit 77
        fi
        echo "0 passed, 1 failed"
        exit 99
    fi
done

# A --enable-sanitizers build: node is not instrumented, so the ASan runtime is
# loaded first; node's own allocations are not leaks to report.
asan=$(ldd "$CONVO_LIBRARY" 2>/dev/null | awk '/libasan/ { print $3; exit }')
if [ -n "$asan" ]; then
    export LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

(cd "$pkg" && node --test --test-reporter=tap test/*.test.mjs test/*/*.test.mjs) 2>&1 | tee "$T/out"
rc=${PIPESTATUS[0]}

passed=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
failed=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
cancelled=$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
skipped=$(sed -n 's/^# skipped \([0-9]*\)$/\1/p' "$T/out" | tail -n 1)
if [ -z "$passed" ] || [ -z "$failed" ]; then
    echo "node.sh: the test runner printed no summary (node exited $rc)"
    passed=0
    failed=1
    [ "$rc" != 0 ] || rc=1
fi
failed=$((failed + ${cancelled:-0} + ${skipped:-0}))
[ "$failed" = 0 ] || [ "$rc" != 0 ] || rc=1
echo "node.sh: bindings/node/test: $passed passed, $failed failed"

# the validation suites, per driver; run.sh ends with "N passed, N failed"
"$pkg/validation/run.sh" 2>&1 | tee "$T/validation"
vrc=${PIPESTATUS[0]}
vcounts=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$T/validation" | tail -n 1)
if [ -z "$vcounts" ]; then
    echo "node.sh: validation/run.sh printed no summary (it exited $vrc)"
    vcounts="0 1"
fi
set -- $vcounts
passed=$((passed + $1))
failed=$((failed + $2))
if [ "$vrc" != 0 ] || [ "$2" != 0 ]; then rc=1; fi
[ "$failed" = 0 ] || [ "$rc" != 0 ] || rc=1

checks=$((passed + failed))
pct=100
[ "$checks" = 0 ] || pct=$((100 * passed / checks))
echo "$pct%: Checks: $checks, Failures: $failed, Errors: 0"
echo "$passed passed, $failed failed"
exit "$rc"
