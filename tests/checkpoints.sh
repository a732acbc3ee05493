#!/bin/sh
# checkpoints.sh — the checkpoint suite (tests/checkpoints) on every driver built:
# memory, SQLite, and the Redis, PostgreSQL and MongoDB servers named by
# CONVO_TEST_*_URL, each in a fresh namespace; then on each driver but memory
# tests/checkpoint_diff, 4,000 seeded random operations (400 on MongoDB) whose
# every read must equal memory:'s (on SQLite reopening now and then with seal=0), in a
# namespace of its own. A missing server skips that driver, or fails under
# CONVO_REQUIRE_ALL=1. Ends with "N passed, N failed".
set -u
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
prog=$top_builddir/tests/checkpoints
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # WHAT PROGRAM ARGS...
    echo "== $1"
    shift
    # shellcheck disable=SC2086
    if ${CONVO_TEST_WRAPPER:+"$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER} "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}

run() {
    check "checkpoints on $1" "$prog" "$2"
}

# DRIVER URL ALT_URL|- OPS: the random run against memory:, seed 1 (CONVO_DIFF_SEED)
differ() {
    check "checkpoint_diff on $1" "$top_builddir/tests/checkpoint_diff" "$2" "$3" "$4" \
        "${CONVO_DIFF_SEED:-1}"
}

network() { # DRIVER VARIABLE PARAM DIFF_OPS
    eval "base=\${$2:-}"
    if [ -z "$base" ]; then
        if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
            echo "checkpoints: $2 is not set but CONVO_REQUIRE_ALL=1" >&2
            failed=$((failed + 1))
        fi
        return
    fi
    run "$1" "$(convo_url_add "$base" "$3$(convo_random)")"
    differ "$1" "$(convo_url_add "$base" "${3}d$(convo_random)")" - "$4"
}

drivers=$("$top_builddir/tools/convo" --version 2>/dev/null)
run memory memory:
case $drivers in *sqlite*)
    run sqlite "sqlite:$tmp/c.db"
    differ sqlite "sqlite:$tmp/d.db" "sqlite:$tmp/d.db?seal=0" 4000
    ;;
esac
# (the MongoDB stand-in takes some 45 ms an operation: 400 of them)
case $drivers in *redis*) network redis CONVO_TEST_REDIS_URL prefix=c 4000 ;; esac
case $drivers in *postgres*) network postgres CONVO_TEST_POSTGRES_URL schema=c_ 4000 ;; esac
case $drivers in *mongo*) network mongo CONVO_TEST_MONGO_URL database=c 400 ;; esac
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
