#!/bin/sh
# scripts/test-wrapper.sh — make check's LOG_COMPILER: runs one test and ends its
# log with the test's wall time ("wall time: N s"), which scripts/test-logs.sh
# summary prints for every suite. Under scripts/check-valgrind.sh, a test program
# (a libtool wrapper or a binary) runs under $CONVO_TEST_WRAPPER through
# `libtool --mode=execute`, so the tool sees the real binary; a test script runs as
# is and wraps the programs it starts itself (tests/lib.sh, tests/reliability.sh,
# tests/bad-input.sh honour CONVO_TEST_WRAPPER).
#   make check LOG_COMPILER=scripts/test-wrapper.sh CONVO_TEST_WRAPPER="valgrind ..."
test_path=$1
shift
start=$(date +%s)
if [ -n "${CONVO_TEST_WRAPPER:-}" ] && { ! head -c 2 "$test_path" | grep -q '^#!' ||
    grep -q 'temporary wrapper script for' "$test_path"; }; then
    # shellcheck disable=SC2086
    "${top_builddir:-.}/libtool" --mode=execute $CONVO_TEST_WRAPPER "$test_path" "$@"
else
    "$test_path" "$@"
fi
rc=$?
echo "wall time: $(($(date +%s) - start)) s"
exit "$rc"
