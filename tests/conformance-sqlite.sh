#!/bin/sh
# conformance-sqlite.sh — the conformance suite on a fresh SQLite file in a
# temporary folder, removed afterwards.
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/convo-sqlite.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
convo_conformance "sqlite:$dir/conformance.db"
