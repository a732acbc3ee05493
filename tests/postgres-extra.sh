#!/bin/sh
# tests/postgres-extra.sh — runs tests/postgres_extra, the PostgreSQL driver's
# own checks, against $CONVO_TEST_POSTGRES_URL (or the one in
# $CONVO_TEST_SERVER_DIR/env). Without a URL the program skips (77), or fails
# under CONVO_REQUIRE_ALL=1.
#
# The restart case restarts PostgreSQL. Suites running beside this one share
# the servers of $CONVO_TEST_SERVER_DIR, so that case gets private servers of
# its own (scripts/test-servers.sh in a temporary folder).
set -eu
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${top_builddir:-$(cd "$(dirname "$0")/.." && pwd)}
program=$builddir/tests/postgres_extra

if [ -z "${CONVO_TEST_POSTGRES_URL:-}" ] && [ -n "${CONVO_TEST_SERVER_DIR:-}" ] &&
   [ -f "$CONVO_TEST_SERVER_DIR/env" ]; then
  # shellcheck disable=SC1091
  . "$CONVO_TEST_SERVER_DIR/env"
fi
[ -z "${CONVO_TEST_POSTGRES_URL:-}" ] || export CONVO_TEST_POSTGRES_URL

run() {
  if [ -n "${CONVO_TEST_WRAPPER:-}" ]; then
    # shellcheck disable=SC2086
    "$builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER "$program"
  else
    "$program"
  fi
}

if [ -z "${CONVO_TEST_POSTGRES_URL:-}" ] || [ -z "${CONVO_TEST_SERVER_DIR:-}" ]; then
  run # no URL: skip or fail; no server folder: the restart case says it skipped
  exit $?
fi

status=0
CK_EXCLUDE_TAGS=restart run || status=$?

private=$(mktemp -d "${TMPDIR:-/tmp}/convo-pgx.XXXXXX")
cleanup() {
  "$srcdir/scripts/test-servers.sh" stop "$private" >/dev/null 2>&1 || true
  rm -rf "$private"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# A MongoDB URL of "real" kind keeps the script from starting the stand-in.
if CONVO_TEST_MONGO_URL=mongodb://127.0.0.1:1 CONVO_TEST_MONGO_KIND=real \
   "$srcdir/scripts/test-servers.sh" start "$private" 2>"$private.log"; then
  rm -f "$private.log"
  (
    # shellcheck disable=SC1091
    . "$private/env"
    CK_RUN_CASE=restart run
  ) || status=$?
else
  cat "$private.log" >&2
  rm -f "$private.log"
  echo "postgres-extra: could not start private servers for the restart case" >&2
  status=1
fi
exit "$status"
