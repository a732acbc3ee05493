#!/bin/sh
# sqlite-extra.sh — the SQLite driver's own checks (tests/sqlite.c: ttl and
# sweep, schema migration 1 -> 2, what delete and prune leave, -wal/-shm modes)
# in a temporary folder, each of its .sql files on its own (tests/sqlite-sql.c),
# layout 10's record of pending writes on its own (tests/sqlite-pending.c),
# the thread index (tests/sqlite-index.c: page cost, migrations 4 -> 5 -> 6, ttl,
# the open entry),
# the put with log references (tests/sqlite-refs.c: one transaction),
# list opts v5 only_channel in the driver's statements (tests/sqlite-list-only.c),
# the wait hooks around busy waits and the WAL switch (tests/sqlite-wait.c),
# the checkpoint suite (tests/checkpoints) with and without ttl, then
# `convo sweep` through the tool.
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/convo-sqlite-extra.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
run() {
    if [ -n "${CONVO_TEST_WRAPPER:-}" ]; then
        # shellcheck disable=SC2086
        "$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER "$@"
    else
        "$@"
    fi
}
run "$top_builddir/tests/sqlite_extra" "$dir"
run "$top_builddir/tests/sqlite_sql" "$top_srcdir/drivers/sqlite" "$dir"
run "$top_builddir/tests/sqlite_pending"
run "$top_builddir/tests/sqlite_index" "$top_srcdir/drivers/sqlite" "$dir"
run "$top_builddir/tests/sqlite_refs" "$dir"
run "$top_builddir/tests/sqlite_list_only" "$dir"
run "$top_builddir/tests/sqlite_layout7" "$top_srcdir/drivers/sqlite" "$dir"
run "$top_builddir/tests/sqlite_layout8" "$dir"
run "$top_builddir/tests/sqlite_layout9" "$dir"
run "$top_builddir/tests/sqlite_layout10" "$dir"
run "$top_builddir/tests/sqlite_layout11" "$dir"
run "$top_builddir/tests/sqlite_layout12" "$dir"
run "$top_builddir/tests/sqlite_layout13" "$dir"
run "$top_builddir/tests/sqlite_wait" "$dir"
run "$top_builddir/tests/sqlite_layout14" "$dir"
run "$top_builddir/tests/sqlite_layout15" "$dir"
run "$top_builddir/tests/sqlite_layout16" "$dir"
run "$top_builddir/tests/sqlite_segments" "$dir"
run "$top_builddir/tests/checkpoints" "sqlite:$dir/checkpoints.db"
run "$top_builddir/tests/checkpoints" "sqlite:$dir/checkpoints-ttl.db?ttl=3600"
# the thread index of what the checkpoint suites wrote, checked against the tables
for f in checkpoints.db checkpoints-ttl.db; do
    run "$top_builddir/tests/sqlite_index" --check "$dir/$f"
done

# the tool: two threads written with ttl=1, swept by a store without ttl
convo="$top_builddir/tools/convo"
db="$dir/tool.db"
run "$convo" --url "sqlite:$db?ttl=1" append a '{"role":"user"}' >/dev/null
run "$convo" --url "sqlite:$db?ttl=1" append b '{"role":"user"}' >/dev/null
run "$convo" --url "sqlite:$db" append c '{"role":"user"}' >/dev/null
sleep 2.1
status=0
run "$convo" --url "sqlite:$db" load a >/dev/null 2>&1 || status=$?
if [ "$status" != 3 ]; then
    echo "sqlite-extra: FAIL: load of an expired thread exited $status, want 3" >&2
    exit 1
fi
out=$(run "$convo" --url "sqlite:$db" sweep)
if [ "$out" != 2 ]; then
    echo "sqlite-extra: FAIL: convo sweep printed [$out], want [2]" >&2
    exit 1
fi
out=$(run "$convo" --url "sqlite:$db" threads)
if [ "$out" != c ]; then
    echo "sqlite-extra: FAIL: threads after sweep: [$out], want [c]" >&2
    exit 1
fi
echo "sqlite-extra: convo sweep removed 2 expired threads and kept the permanent one"
