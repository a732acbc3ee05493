#!/usr/bin/env bash
# scripts/sqlite-wal-cost.sh — the SQLite WAL's part in `convo bench --scenario
# threads`' appends with the index against without (docs/performance.md, Issue
# 25's last figures): the bench's writes replayed by scripts/sqlite-wal-cost.c
# with each commit's WAL frames, each checkpoint and each restart of the log
# counted against the call (save_extra or append) and the store (the one that
# declares user_id, the one that does not) that paid it. The counts do not
# depend on the machine's load; the times beside them do.
#
#   scripts/sqlite-wal-cost.sh [THREADS [USERS [auto|none|restart]]]   (default 10000 100 auto;
#       none: no checkpoint at all, the log only grows: THREADS x ~60 KB of disk,
#       and the frames a thread wrote are printed per table and index;
#       restart: auto, and the call that checkpointed the whole log starts it over;
#       CONVO_LIBDIR: another build's libconvo.so)
set -eu
threads=${1:-10000}
users=${2:-100}
mode=${3:-auto}
root=$(cd "$(dirname "$0")/.." && pwd)
libdir=${CONVO_LIBDIR:-$root/.libs}
[ -e "$libdir/libconvo.so" ] || { echo "sqlite-wal-cost: build first (no $libdir/libconvo.so)" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/convo-wal-cost.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cc -O2 -rdynamic -o "$dir/harness" "$root/scripts/sqlite-wal-cost.c" -I"$root/include" \
    -L"$libdir" -lconvo -lsqlite3 -ldl
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$dir/harness" "$dir" "$threads" "$users" "$mode"
