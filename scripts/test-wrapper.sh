#!/bin/sh
# scripts/test-wrapper.sh — make check's LOG_COMPILER for scripts/check-valgrind.sh:
# runs one test. A test program (a libtool wrapper or a binary) runs under
# $CONVO_TEST_WRAPPER through `libtool --mode=execute`, so the tool sees the real
# binary; a test script runs as is and wraps the programs it starts itself
# (tests/lib.sh, tests/reliability.sh, tests/bad-input.sh honour CONVO_TEST_WRAPPER).
#   make check LOG_COMPILER=scripts/test-wrapper.sh CONVO_TEST_WRAPPER="valgrind ..."
test_path=$1
shift
if [ -n "${CONVO_TEST_WRAPPER:-}" ] && { ! head -c 2 "$test_path" | grep -q '^#!' ||
    grep -q 'temporary wrapper script for' "$test_path"; }; then
    # shellcheck disable=SC2086
    exec "${top_builddir:-.}/libtool" --mode=execute $CONVO_TEST_WRAPPER "$test_path" "$@"
fi
exec "$test_path" "$@"
