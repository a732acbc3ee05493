#!/usr/bin/env bash
# scripts/test.sh — the whole test suite against real servers (what CI runs).
#
# Installs what is missing (scripts/install-deps.sh), builds convo with every
# driver, starts throwaway Redis, PostgreSQL and MongoDB (stand-in) servers
# (scripts/test-servers.sh), runs `make check` with CONVO_REQUIRE_ALL=1 so no
# driver's suite may skip, stops the servers, and ends with the Check summary
# line of every suite. Exits non-zero on any failure.
#
# Environment:
#   CONVO_SKIP_DEPS=1          do not run scripts/install-deps.sh
#   CONVO_CONFIGURE_FLAGS=...  more ./configure arguments, shell-quoted, e.g.
#                              "--enable-sanitizers" or "CFLAGS='-O0 -g'"
#   CONVO_JOBS=N               make -jN (default 2)
#   CONVO_TEST_MONGO_URL=...   use this real MongoDB instead of the stand-in
set -eu

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
JOBS=${CONVO_JOBS:-2}

section() { printf '\n==== %s ====\n' "$*"; }

if [ "${CONVO_SKIP_DEPS:-0}" != 1 ]; then
  section "dependencies"
  scripts/install-deps.sh
fi

extra=()
if [ -n "${CONVO_CONFIGURE_FLAGS:-}" ]; then
  # Trusted input from the developer or CI; eval keeps their quoting.
  eval "extra=(${CONVO_CONFIGURE_FLAGS})"
fi

section "build"
autoreconf -fi
./configure --with-sqlite --with-redis --with-postgres --with-mongo ${extra[@]+"${extra[@]}"}
make -j"$JOBS"

section "servers"
SERVERS=$(mktemp -d "${TMPDIR:-/tmp}/convo-test.XXXXXX")
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  scripts/test-servers.sh stop "$SERVERS" >/dev/null 2>&1 || true
  rm -rf "$SERVERS"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
scripts/test-servers.sh start "$SERVERS"
# shellcheck disable=SC1091
. "$SERVERS/env"
export CONVO_REQUIRE_ALL=1

section "make check"
# Logs of tests an earlier build had must not be counted.
scripts/test-logs.sh clean .
rc=0
make -j"$JOBS" check || rc=$?

if [ "$rc" -ne 0 ]; then
  section "logs of make check (failed: exit $rc)"
  scripts/test-logs.sh dump . || true
  section "server logs"
  scripts/test-servers.sh logs "$SERVERS" 2>&1 || true
fi

section "stopping servers"
scripts/test-servers.sh stop "$SERVERS" 2>&1

# Last lines of the output: each suite's Check summary.
src=0
scripts/test-logs.sh summary . || src=$?
if [ "$rc" -eq 0 ] && [ "$src" -eq 1 ]; then rc=1; fi
exit "$rc"
