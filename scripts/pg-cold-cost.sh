#!/bin/bash
# scripts/pg-cold-cost.sh — the server's instructions for statements run by a new
# backend (a fresh connection: catalogs not yet cached, every statement planned
# for the first time), counted with callgrind: what a fresh process's get_state
# costs PostgreSQL, independent of the machine's load (docs/performance.md,
# "A fresh get_state on PostgreSQL: cold plans").
#
#   PG_COLD_SCHEMA=S scripts/pg-cold-cost.sh DATADIR DATABASE FILE...
#
# DATADIR is a copy of a cluster's data folder that no server runs on (stop the
# server, `cp -a` it, start it again), owned by the user that runs postgres. Each
# FILE holds statements as `postgres --single -j` reads them (each ends with ";"
# at the end of a line); `@file(PATH)` in it is replaced by that .sql file's text
# on one line, comments dropped, `@S` the quoted schema PG_COLD_SCHEMA, `@N` the
# bare one. Every `EXECUTE` at the start of a line runs as
# `EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF, SUMMARY OFF) EXECUTE`: planned and run
# in full, its rows not printed (a single-user backend's printing is not what a
# client's protocol costs). For each FILE a new single-user backend runs it under
# valgrind; printed: FILE, its instructions less those of a backend that runs
# `SELECT 1;` alone, and the count of ERROR lines (0, or the count is not one of
# the statements). PG_COLD_KEEP=DIR keeps the callgrind outputs there.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,/^set/p' "$0" | sed '$d' >&2; exit 2; }
data=$1 db=$2
shift 2
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bindir/postgres" ] || { echo "no PostgreSQL server binaries" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "no valgrind" >&2; exit 1; }
schema=${PG_COLD_SCHEMA:-convo}
work=$(mktemp -d "${TMPDIR:-/tmp}/pg-cold.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
[ "$(id -u)" != 0 ] || chown postgres "$work"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# FILE with @file(PATH) filled in and EXECUTE explained, to stdout
expand() {
  python3 - "$1" "$schema" <<'EOF'
import re, sys
path, schema = sys.argv[1], sys.argv[2]
def flat(m):
    text = open(m.group(1)).read()
    text = text.replace('@S', '"%s"' % schema).replace('@N', schema)
    return ' '.join(re.sub(r'--.*$', '', l) for l in text.split('\n'))
for line in open(path).read().split('\n'):
    line = re.sub(r'@file\(([^)]*)\)', flat, line)
    line = re.sub(r'^EXECUTE', 'EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF, SUMMARY OFF) EXECUTE', line)
    print(line)
EOF
}

# instructions of a new backend running statements file $1 (named $2)
count() {
  local out="$work/cg.$2"
  as_pg valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$bindir/postgres" --single -j -D "$data" "$db" <"$1" >"$work/out.$2" 2>"$work/err.$2"
  [ -z "${PG_COLD_KEEP:-}" ] || cp "$out" "$PG_COLD_KEEP/"
  sed -n 's/^summary: //p' "$out"
}

echo "SELECT 1;" >"$work/base"
chmod 644 "$work/base"
base=$(count "$work/base" base)
echo "a new backend, SELECT 1: $base instructions"
n=0
for f in "$@"; do
  n=$((n + 1))
  expand "$f" >"$work/in.$n"
  chmod 644 "$work/in.$n"
  total=$(count "$work/in.$n" "$n")
  errors=$(cat "$work/out.$n" "$work/err.$n" | grep -c "ERROR:" || true)
  echo "$f: $((total - base)) instructions beyond it, $errors errors"
done
