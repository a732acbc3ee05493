# scripts/check-common.sh — sourced by check-sanitized.sh and check-valgrind.sh:
# an out-of-tree build of the sources, throwaway servers, and `make check` with
# the failed tests' logs and the Check summary at the end.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${CONVO_JOBS:-2}

section() { printf '\n==== %s ====\n' "$*"; }

# check_build NAME BUILDDIR CONFIGURE_ARGS...: sets SRC (the sources: the tree
# itself, or a copy when the tree is configured in place, which automake refuses
# for an out-of-tree build) and OBJ, then configures and builds in OBJ.
check_build() {
  local name=$1 build=$2
  shift 2
  mkdir -p "$build"
  build=$(cd "$build" && pwd)
  SRC=$ROOT
  if [ -f "$ROOT/config.status" ]; then
    if ! { command -v git >/dev/null 2>&1 && git -C "$ROOT" rev-parse >/dev/null 2>&1; }; then
      echo "$name: $ROOT is configured in place and is not a git checkout;" \
        "run 'make distclean' there first" >&2
      exit 1
    fi
    section "copying the sources (the tree is configured in place)"
    SRC=$build/src
    rm -rf "$SRC"
    mkdir -p "$SRC"
    (cd "$ROOT" && git ls-files -z -co --exclude-standard | grep -zv '^tests/mongo-server/node_modules/' |
      xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$SRC"
    # the npm trees of the Mongo stand-in and of tests/node.sh (not in git)
    local npm
    for npm in tests/mongo-server bindings/node examples/node; do
      [ ! -d "$ROOT/$npm/node_modules" ] || ln -sfn "$ROOT/$npm/node_modules" "$SRC/$npm/node_modules"
    done
  fi
  OBJ=$build/obj
  mkdir -p "$OBJ"
  section "configure $* in $OBJ"
  if [ ! -x "$SRC/configure" ] || [ "$SRC/configure.ac" -nt "$SRC/configure" ] ||
    [ "$SRC/Makefile.am" -nt "$SRC/Makefile.in" ]; then
    (cd "$SRC" && autoreconf -fi)
  fi
  local extra=()
  if [ -n "${CONVO_CONFIGURE_FLAGS:-}" ]; then
    eval "extra=(${CONVO_CONFIGURE_FLAGS})" # trusted input from the developer
  fi
  (cd "$OBJ" && "$SRC/configure" -q "$@" CFLAGS="-g -O1" ${extra[@]+"${extra[@]}"})
  make -C "$OBJ" -j"$JOBS" >/dev/null
}

# check_servers NAME: starts throwaway servers unless CONVO_TEST_*_URL name some;
# they are stopped on exit. Every suite must then run (CONVO_REQUIRE_ALL=1).
check_servers() {
  section "servers"
  SERVERS=$(mktemp -d "${TMPDIR:-/tmp}/convo-$1.XXXXXX")
  trap '"$ROOT/scripts/test-servers.sh" stop "$SERVERS" >/dev/null 2>&1 || true; rm -rf "$SERVERS"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  if [ -z "${CONVO_TEST_REDIS_URL:-}${CONVO_TEST_POSTGRES_URL:-}" ]; then
    "$ROOT/scripts/test-servers.sh" start "$SERVERS"
    # shellcheck disable=SC1091
    . "$SERVERS/env"
  fi
  export CONVO_REQUIRE_ALL=${CONVO_REQUIRE_ALL:-1}
}

# check_run NAME WHAT [MAKE_ARGS...]: make check in OBJ (only the suites named
# by CONVO_CHECK_TESTS when set, e.g. "tests/redis-cluster.sh tests/cluster_ha");
# on failure the failed tests' logs; the Check summary last. Exits with the result.
check_run() {
  local name=$1 what=$2 rc=0 src=0
  shift 2
  section "make check ($what)${CONVO_CHECK_TESTS:+: $CONVO_CHECK_TESTS}"
  "$ROOT/scripts/test-logs.sh" clean "$OBJ"
  make -C "$OBJ" -j"$JOBS" check "$@" ${CONVO_CHECK_TESTS:+"TESTS=$CONVO_CHECK_TESTS"} || rc=$?
  if [ "$rc" -ne 0 ]; then
    section "logs of the failed tests"
    "$ROOT/scripts/test-logs.sh" dump "$OBJ" || true
  fi
  "$ROOT/scripts/test-logs.sh" summary "$OBJ" || src=$?
  if [ "$rc" -eq 0 ] && [ "$src" -eq 1 ]; then rc=1; fi
  [ "$rc" -eq 0 ] && echo "$name: make check passed $what"
  exit "$rc"
}
