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

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build-valgrind}
JOBS=${CONVO_JOBS:-2}
command -v valgrind >/dev/null 2>&1 || {
  echo "check-valgrind: valgrind not found (scripts/install-deps.sh installs it)" >&2
  exit 1
}
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)

section() { printf '\n==== %s ====\n' "$*"; }

SRC=$ROOT
if [ -f "$ROOT/config.status" ]; then
  command -v git >/dev/null 2>&1 && git -C "$ROOT" rev-parse >/dev/null 2>&1 || {
    echo "check-valgrind: $ROOT is configured in place and is not a git checkout;" \
      "run 'make distclean' there first" >&2
    exit 1
  }
  section "copying the sources (the tree is configured in place)"
  SRC=$BUILD/src
  rm -rf "$SRC"
  mkdir -p "$SRC"
  (cd "$ROOT" && git ls-files -z -co --exclude-standard | grep -zv '^tests/mongo-server/node_modules/' |
    xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$SRC"
  [ ! -d "$ROOT/tests/mongo-server/node_modules" ] ||
    ln -sfn "$ROOT/tests/mongo-server/node_modules" "$SRC/tests/mongo-server/node_modules"
fi
OBJ=$BUILD/obj
mkdir -p "$OBJ"

section "configure in $OBJ"
if [ ! -x "$SRC/configure" ] || [ "$SRC/configure.ac" -nt "$SRC/configure" ] ||
  [ "$SRC/Makefile.am" -nt "$SRC/Makefile.in" ]; then
  (cd "$SRC" && autoreconf -fi)
fi
extra=()
if [ -n "${CONVO_CONFIGURE_FLAGS:-}" ]; then
  eval "extra=(${CONVO_CONFIGURE_FLAGS})" # trusted input from the developer
fi
(cd "$OBJ" && "$SRC/configure" -q CFLAGS="-g -O1" ${extra[@]+"${extra[@]}"})
make -C "$OBJ" -j"$JOBS" >/dev/null

section "servers"
SERVERS=$(mktemp -d "${TMPDIR:-/tmp}/convo-valgrind.XXXXXX")
cleanup() {
  "$ROOT/scripts/test-servers.sh" stop "$SERVERS" >/dev/null 2>&1 || true
  rm -rf "$SERVERS"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -z "${CONVO_TEST_REDIS_URL:-}${CONVO_TEST_POSTGRES_URL:-}" ]; then
  "$ROOT/scripts/test-servers.sh" start "$SERVERS"
  # shellcheck disable=SC1091
  . "$SERVERS/env"
fi
export CONVO_REQUIRE_ALL=${CONVO_REQUIRE_ALL:-1}
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

section "make check under: $CONVO_TEST_WRAPPER"
"$ROOT/scripts/test-logs.sh" clean "$OBJ"
rc=0
make -C "$OBJ" -j"$JOBS" check LOG_COMPILER="$SRC/scripts/test-wrapper.sh" || rc=$?
if [ "$rc" -ne 0 ]; then
  section "logs of the failed tests"
  "$ROOT/scripts/test-logs.sh" dump "$OBJ" || true
fi
src=0
"$ROOT/scripts/test-logs.sh" summary "$OBJ" || src=$?
if [ "$rc" -eq 0 ] && [ "$src" -eq 1 ]; then rc=1; fi
[ "$rc" -eq 0 ] && echo "check-valgrind: make check passed under valgrind"
exit "$rc"
