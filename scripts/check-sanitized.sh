#!/usr/bin/env bash
# scripts/check-sanitized.sh — the whole of `make check` built with
# AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer
# (./configure --enable-sanitizers), in a build folder of its own, against
# throwaway Redis, PostgreSQL and MongoDB servers (scripts/test-servers.sh).
# Any sanitizer report fails the test it happened in.
#
#   scripts/check-sanitized.sh [BUILDDIR]     default BUILDDIR: build-sanitized
#
# The build is out of tree. When the source tree itself is configured (after
# scripts/test.sh), automake refuses that, so the sources are copied
# (git ls-files) into BUILDDIR/src first. Environment: CONVO_JOBS (make -j,
# default 2), CONVO_CONFIGURE_FLAGS (more configure arguments), and
# CONVO_TEST_*_URL to use servers of your own instead of starting them.
set -eu

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build-sanitized}
JOBS=${CONVO_JOBS:-2}
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)

section() { printf '\n==== %s ====\n' "$*"; }

# The sources to configure from: the tree itself, or a copy of it.
SRC=$ROOT
if [ -f "$ROOT/config.status" ]; then
  command -v git >/dev/null 2>&1 && git -C "$ROOT" rev-parse >/dev/null 2>&1 || {
    echo "check-sanitized: $ROOT is configured in place and is not a git checkout;" \
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

section "configure --enable-sanitizers in $OBJ"
if [ ! -x "$SRC/configure" ] || [ "$SRC/configure.ac" -nt "$SRC/configure" ] ||
  [ "$SRC/Makefile.am" -nt "$SRC/Makefile.in" ]; then
  (cd "$SRC" && autoreconf -fi)
fi
extra=()
if [ -n "${CONVO_CONFIGURE_FLAGS:-}" ]; then
  eval "extra=(${CONVO_CONFIGURE_FLAGS})" # trusted input from the developer
fi
(cd "$OBJ" && "$SRC/configure" -q --enable-sanitizers CFLAGS="-g -O1" ${extra[@]+"${extra[@]}"})
make -C "$OBJ" -j"$JOBS" >/dev/null

section "servers"
SERVERS=$(mktemp -d "${TMPDIR:-/tmp}/convo-sanitized.XXXXXX")
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
# Every report is fatal; leaks are reported when each (forked) test process exits.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Instrumented code runs 2-3 times slower: give Check's per-test timeouts room.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}

section "make check (sanitized)"
"$ROOT/scripts/test-logs.sh" clean "$OBJ"
rc=0
make -C "$OBJ" -j"$JOBS" check || rc=$?
if [ "$rc" -ne 0 ]; then
  section "logs of the failed tests"
  "$ROOT/scripts/test-logs.sh" dump "$OBJ" || true
fi
src=0
"$ROOT/scripts/test-logs.sh" summary "$OBJ" || src=$?
if [ "$rc" -eq 0 ] && [ "$src" -eq 1 ]; then rc=1; fi
[ "$rc" -eq 0 ] && echo "check-sanitized: make check passed under ASan, LSan and UBSan"
exit "$rc"
