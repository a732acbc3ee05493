#!/usr/bin/env bash
# scripts/quickstart.sh — build convo and run it on the embedded default,
# SQLite: no server needed.
#
# Installs the build dependencies when missing (scripts/install-deps.sh
# --build-only), builds with SQLite as the only external driver, runs the test
# suites that build has (unit, memory and SQLite conformance, the tool), then
# appends a message to a thread with the convo tool and loads it back.
# It runs no `npm ci`: the Node suite (tests/node.sh) skips unless an earlier
# scripts/test.sh installed the binding's npm packages (README.md says why).
#
# Environment: CONVO_SKIP_DEPS=1 skips the install step; CONVO_CONFIGURE_FLAGS
# adds ./configure arguments; CONVO_JOBS=N sets make -jN (default 2).
set -eu

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
JOBS=${CONVO_JOBS:-2}

section() { printf '\n==== %s ====\n' "$*"; }

if [ "${CONVO_SKIP_DEPS:-0}" != 1 ]; then
  section "dependencies"
  scripts/install-deps.sh --build-only
fi

extra=()
if [ -n "${CONVO_CONFIGURE_FLAGS:-}" ]; then
  eval "extra=(${CONVO_CONFIGURE_FLAGS})"
fi

section "build (SQLite only)"
autoreconf -fi
./configure --with-sqlite --without-redis --without-postgres --without-mongo ${extra[@]+"${extra[@]}"}
make -j"$JOBS"

section "tests (memory and SQLite; the Node suite skips without its npm packages)"
# Logs of suites an earlier build had (redis, postgres...) must not be counted.
scripts/test-logs.sh clean .
# Servers from a sourced scripts/test-servers.sh env are not for this build.
unset CONVO_REQUIRE_ALL
if ! make -j"$JOBS" check; then
  scripts/test-logs.sh dump . || true
  scripts/test-logs.sh summary . || true
  echo "quickstart: make check failed" >&2
  exit 1
fi
scripts/test-logs.sh summary . || true

section "demo: the convo tool on SQLite"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/convo-demo.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
url="sqlite:$TMP/demo.db"
# run CMD...: show the command as one would type it, then run it.
run() {
  local a line='$' q="'\\''"
  for a in "$@"; do
    case "$a" in
      *[!A-Za-z0-9_./:=@%+,-]*|'') line="$line '${a//\'/$q}'" ;;
      *) line="$line $a" ;;
    esac
  done
  printf '%s\n' "$line"
  "$@"
}
run ./tools/convo --url "$url" append demo '{"role":"user","content":"hi"}'
run ./tools/convo --url "$url" load demo
echo
echo "quickstart: done (the demo database was $TMP/demo.db, now removed)"
