#!/bin/bash
# scripts/pg-statement-cost.sh — the server's instructions per run of the
# PostgreSQL driver's append statements and of the bench's raw INSERT, counted
# with callgrind (docs/postgres.md "Costs"). Deterministic: the load of the
# machine does not enter, so it compares what wall-clock benches cannot.
#
#   scripts/pg-statement-cost.sh [FILE.sql:NPARAMS ...]
#
# Default: bench_insert.sql:3 append_one.sql:8 append_plain.sql:5 from
# drivers/postgres. A private PostgreSQL (fsync off, autovacuum off) in a
# temporary folder, a store made by tools/convo (build first) with 2,000
# threads of 3 messages, then the postmaster under valgrind: each statement
# runs 100 and 600 times on a connection of its own, in two modes (burst: one
# thread, 1 ms apart, inside its listed_at window; spread: random threads 2 s
# apart), and the backend's total at 600 less its total at 100, over 500, is
# printed. Needs valgrind, PostgreSQL's server binaries, cc and libpq.
#
# PG_COST_KEEP=DIR keeps each counted backend's callgrind output there
# (NAME-MODE-N), for a per-function difference of the 600 and 100 runs
# (scripts/pg-cost-diff.sh).
#
# PG_COST_SETUP=FILE.sql runs that SQL (@S: the schema) on the store before
# the counts: a layout to try against the one the driver makes.
#
# FILE.sql:6 is an append that names its thread by tid ($1, as a client that
# remembered it would), with body, role, time and second as above and $6 a
# hint, the seq the last run on that thread returned (at the start, the
# thread's last seq): the shapes in scripts/pg-append-shapes/ (docs/postgres.md
# "Costs", an append without the thread row).
#
# Reads too: FILE.sql:0 is a statement without parameters (its values written
# in), run the same way, whatever rows it gives (the two modes then differ in
# nothing). PG_COST_STORE=threads makes the store what `convo bench --scenario
# threads` reads instead: user_id declared as an index key, each thread's
# extra {"user_id": "u000NN" (20 users), "title": ...} and its 3 messages of
# about 200 bytes, and a thread "load20" of 20 such messages (docs/postgres.md
# "Costs", version 20: the page against the load).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
statements=("$@")
[ ${#statements[@]} -gt 0 ] || statements=("$root/drivers/postgres/bench_insert.sql:3"
  "$root/drivers/postgres/append_one.sql:8" "$root/drivers/postgres/append_plain.sql:5")

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bindir/postgres" ] || { echo "no PostgreSQL server binaries" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "no valgrind" >&2; exit 1; }
[ -x "$root/tools/convo" ] || { echo "build tools/convo first" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/pg-cost.XXXXXX")
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" != 0 ] || chown postgres "$dir"
harness=$dir/harness
cc -O2 -o "$harness" "$root/scripts/pg-statement-cost.c" -I"$(pg_config --includedir)" -lpq
port=$((40000 + RANDOM % 20000))
conn="host=$dir port=$port user=postgres dbname=postgres"
running=0
stop() {
  as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 120 stop >/dev/null
  running=0
}
cleanup() {
  [ "$running" = 0 ] || stop || true
  # a server process under valgrind may write its output after the postmaster is gone
  rm -rf "$dir" 2>/dev/null || { sleep 2; rm -rf "$dir"; }
}
trap cleanup EXIT

as_pg "$bindir/initdb" -D "$dir/data" -U postgres -E UTF8 --locale=C >/dev/null 2>&1
cat >>"$dir/data/postgresql.conf" <<EOF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
autovacuum = off
EOF

start() { # start [valgrind args...]
  as_pg "$@" "$bindir/postgres" -D "$dir/data" >>"$dir/server.log" 2>&1 &
  running=1
  for _ in $(seq 1 120); do
    "$bindir/pg_isready" -q -h "$dir" -p "$port" -U postgres && return 0
    sleep 1
  done
  echo "postgres did not start: $dir/server.log" >&2
  exit 1
}

start
keys=()
[ "${PG_COST_STORE:-}" != threads ] || keys=(--index-key user_id)
"$root/tools/convo" --url "postgres:///postgres?host=$dir&port=$port&user=postgres&schema=cost" \
  "${keys[@]}" append thread-0 '{"role":"user","content":"hi"}' >/dev/null
if [ "${PG_COST_STORE:-}" = threads ]; then
  psql -qX "$conn" -v ON_ERROR_STOP=1 >/dev/null <<'EOF'
CREATE FUNCTION pg_temp.msg(n integer) RETURNS bytea LANGUAGE sql AS
$$ SELECT convert_to('{"role":"user","content":"' || repeat('m', 170 + n % 10) || '"}', 'UTF8') $$;
DO $$ BEGIN FOR i IN 1..1999 LOOP
  PERFORM cost.save_extra('thread-' || i, jsonb_build_object('user_id',
      'u' || lpad((i % 20)::text, 5, '0'), 'title', 'conversation ' || i), 1048576,
      timestamptz '2020-01-01' + i * interval '1 s', NULL);
  PERFORM cost.append('thread-' || i, ARRAY[pg_temp.msg(i), pg_temp.msg(i + 1),
      pg_temp.msg(i + 2)], ARRAY['user', 'assistant', 'user'],
      timestamptz '2020-01-01' + i * interval '1 s', NULL, -1, -1, NULL);
END LOOP;
FOR i IN 1..20 LOOP
  PERFORM cost.append('load20', ARRAY[pg_temp.msg(i)], ARRAY['user'],
      timestamptz '2020-01-02' + i * interval '1 s', NULL, -1, -1, NULL);
END LOOP; END $$;
EOF
else
  psql -qX "$conn" -v ON_ERROR_STOP=1 >/dev/null <<'EOF'
DO $$ BEGIN FOR i IN 1..1999 LOOP
  PERFORM cost.append('thread-' || i, ARRAY['\x7b7d'::bytea, '\x7b7d', '\x7b7d'],
      ARRAY['user', 'user', 'user'], timestamptz '2020-01-01' + i * interval '1 s',
      NULL, -1, -1, NULL);
END LOOP; END $$;
EOF
fi
sed 's/@S/cost/g; s/@T/bench_cost/g' "$root/drivers/postgres/bench_create.sql" |
  psql -qX "$conn" -v ON_ERROR_STOP=1 >/dev/null
if [ -n "${PG_COST_SETUP:-}" ]; then
  sed 's/@S/cost/g' "$PG_COST_SETUP" | psql -qX "$conn" -v ON_ERROR_STOP=1 >/dev/null
fi
psql -qX "$conn" -c 'VACUUM ANALYZE' >/dev/null
stop
mkdir "$dir/out"
[ "$(id -u)" != 0 ] || chown postgres "$dir/out"
start valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$dir/out/cg.%p"

# instructions FILE NPARAMS N MODE: the total of one harness backend
instructions() {
  psql -qX "$conn" -c "UPDATE cost.threads SET listed_at = timestamptz '2020-01-01',
      updated_at = timestamptz '2020-01-01' WHERE thread_id = 'thread-0'" >/dev/null
  local backend
  backend=$("$harness" "$conn" cost "$1" "$2" "$3" "$4" "$((RANDOM * 1000))" |
            tail -1)
  local out=$dir/out/cg.$backend
  for _ in $(seq 1 60); do grep -q '^totals:' "$out" 2>/dev/null && break; sleep 1; done
  awk '/^totals:/ {print $2}' "$out"
  [ -z "${PG_COST_KEEP:-}" ] || cp "$out" "$PG_COST_KEEP/$(basename "$1" .sql)-$4-$3"
}

printf '%-28s %12s %12s\n' statement burst spread
for s in "${statements[@]}"; do
  file=${s%:*} nparams=${s##*:}
  line=$(basename "$file")
  for mode in burst spread; do
    a=$(instructions "$file" "$nparams" 100 "$mode")
    b=$(instructions "$file" "$nparams" 600 "$mode")
    line="$line $(( (b - a) / 500 ))"
  done
  # shellcheck disable=SC2086
  printf '%-28s %12s %12s\n' $line
done
