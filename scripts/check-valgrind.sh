#!/usr/bin/env bash
# scripts/check-valgrind.sh — `make check` with every test program, and the
# tool and test programs the test scripts start, run under valgrind (memcheck:
# invalid accesses, uninitialised values, definite and indirect leaks), against
# throwaway Redis, PostgreSQL and MongoDB servers (scripts/test-servers.sh).
#
#   scripts/check-valgrind.sh [BUILDDIR]     default BUILDDIR: build-valgrind
#
# One switch does it: CONVO_TEST_WRAPPER holds the valgrind command line. The
# test scripts put it in front of the programs they start (through
# `libtool --mode=execute`), and scripts/test-wrapper.sh (make check's
# LOG_COMPILER) does the same for test programs listed in TESTS. The fuzz test
# skips itself under a wrapper (it brings its own sanitizers). Slow: expect
# 10-40 times the normal run. Same environment as scripts/check-sanitized.sh,
# plus CONVO_VALGRIND to replace the valgrind command line.
set -eu

# shellcheck source=scripts/check-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/check-common.sh"
command -v valgrind >/dev/null 2>&1 || {
  echo "check-valgrind: valgrind not found (scripts/install-deps.sh installs it)" >&2
  exit 1
}
check_build check-valgrind "${1:-$ROOT/build-valgrind}"
check_servers valgrind
# libpq's SCRAM handshake under valgrind takes seconds; eight at once pass the
# driver's 10 s connect timeout.
if [ -n "${CONVO_TEST_POSTGRES_URL:-}" ]; then
  case $CONVO_TEST_POSTGRES_URL in
    *connect_timeout=*) ;;
    *\?*) CONVO_TEST_POSTGRES_URL="$CONVO_TEST_POSTGRES_URL&connect_timeout=120" ;;
    *) CONVO_TEST_POSTGRES_URL="$CONVO_TEST_POSTGRES_URL?connect_timeout=120" ;;
  esac
  export CONVO_TEST_POSTGRES_URL
fi
# -q: silent unless there is an error, so tests that want one line on stderr still
# see one; errors (leaks included) make the program exit 99.
export CONVO_TEST_WRAPPER=${CONVO_VALGRIND:-valgrind -q --error-exitcode=99 --leak-check=full \
--errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
--track-origins=yes --trace-children=no --child-silent-after-fork=no}
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-30}

check_run check-valgrind "under valgrind" LOG_COMPILER="$SRC/scripts/test-wrapper.sh"
