#!/bin/sh
# conformance-sqlite.sh — the conformance suite on a fresh SQLite file in a
# temporary folder, removed afterwards; then the file's thread index is checked
# against its tables (tests/sqlite-index.c --check).
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/convo-sqlite.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
convo_conformance "sqlite:$dir/conformance.db"
"$top_builddir/tests/sqlite_index" --check "$dir/conformance.db"
