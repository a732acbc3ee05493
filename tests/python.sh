#!/bin/bash
# python.sh — the Python binding's unittest suite (bindings/python/tests) on the
# libconvo just built, against memory:, SQLite and every server named by
# CONVO_TEST_{REDIS,POSTGRES,MONGO}_URL. Run by `make check`; by hand:
#   top_builddir=BUILD top_srcdir=SRC tests/python.sh [TEST...]
# TEST names a module, class or method under bindings/python/tests (all by default).
set -u

top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=$(cd "${top_srcdir:-$(dirname "$0")/..}" && pwd)
export top_builddir top_srcdir

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 not found"
    exit 77
fi
export CONVO_LIBRARY=$top_builddir/.libs/libconvo.so
if [ ! -e "$CONVO_LIBRARY" ]; then
    echo "python.sh: $CONVO_LIBRARY does not exist: build libconvo.la first" >&2
    exit 99
fi
export PYTHONPATH=$top_srcdir/bindings/python${PYTHONPATH:+:$PYTHONPATH}
# no __pycache__ in the source tree (read-only under make distcheck)
export PYTHONDONTWRITEBYTECODE=1

# A --enable-sanitizers build: python3 itself is not instrumented, so the ASan
# runtime must be loaded first; Python's own allocations are not leaks to report.
asan=$(ldd "$CONVO_LIBRARY" 2>/dev/null | awk '/libasan/ { print $3; exit }')
if [ -n "$asan" ]; then
    export LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
    # last wins: python3 and the compilers the tests start are not leak-clean
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

if [ $# -gt 0 ]; then
    # named tests only (e.g. test_store.StoreTests_redis, for tests/redis-cluster.sh)
    (cd "$top_srcdir/bindings/python/tests" && python3 -m unittest -v "$@") 2>&1 | tee "$T/out"
else
    python3 -m unittest discover -s "$top_srcdir/bindings/python/tests" -v 2>&1 | tee "$T/out"
fi
rc=${PIPESTATUS[0]}

# unittest ends with "Ran N tests" and "OK (skipped=S)" or "FAILED (failures=F, errors=E)".
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$T/out" | tail -n 1)
summary=$(grep -E '^(OK|FAILED)( \(.*\))?$' "$T/out" | tail -n 1)
count() { printf '%s' "$summary" | sed -n "s/.*[( ]$1=\([0-9]*\).*/\1/p"; }
if [ -z "$ran" ] || [ -z "$summary" ]; then
    echo "python.sh: unittest printed no summary (python3 exited $rc)"
    echo "0 passed, 1 failed"
    echo "0%: Checks: 1, Failures: 0, Errors: 1"
    echo "FAILED (errors=1)"
    [ "$rc" != 0 ] || rc=1
    exit "$rc"
fi
failures=$(count failures) errors=$(count errors) skipped=$(count skipped)
unexpected=$(count 'unexpected successes')
failed=$((${failures:-0} + ${errors:-0} + ${unexpected:-0}))
checks=$((ran - ${skipped:-0}))
passed=$((checks - failed))
pct=100
[ "$checks" = 0 ] || pct=$((100 * passed / checks))
echo "$passed passed, $failed failed, ${skipped:-0} skipped"
# the line scripts/test-logs.sh summary collects from every suite
echo "$pct%: Checks: $checks, Failures: $((${failures:-0} + ${unexpected:-0})), Errors: ${errors:-0}"
echo "$summary"
exit "$rc"
