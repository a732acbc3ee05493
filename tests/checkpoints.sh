#!/bin/sh
# checkpoints.sh — the checkpoint suite (tests/checkpoints) on every driver built:
# memory, SQLite, and the Redis, PostgreSQL and MongoDB servers named by
# CONVO_TEST_*_URL, each in a fresh namespace. A missing server skips that
# driver, or fails under CONVO_REQUIRE_ALL=1. Ends with "N passed, N failed".
set -u
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
prog=$top_builddir/tests/checkpoints
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {
    echo "== checkpoints on $1"
    # shellcheck disable=SC2086
    if ${CONVO_TEST_WRAPPER:+"$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER} "$prog" "$2"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}

network() { # DRIVER VARIABLE PARAM
    eval "base=\${$2:-}"
    if [ -z "$base" ]; then
        if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
            echo "checkpoints: $2 is not set but CONVO_REQUIRE_ALL=1" >&2
            failed=$((failed + 1))
        fi
        return
    fi
    run "$1" "$(convo_url_add "$base" "$3$(convo_random)")"
}

drivers=$("$top_builddir/tools/convo" --version 2>/dev/null)
run memory memory:
case $drivers in *sqlite*) run sqlite "sqlite:$tmp/c.db" ;; esac
case $drivers in *redis*) network redis CONVO_TEST_REDIS_URL prefix=c ;; esac
case $drivers in *postgres*) network postgres CONVO_TEST_POSTGRES_URL schema=c_ ;; esac
case $drivers in *mongo*) network mongo CONVO_TEST_MONGO_URL database=c ;; esac
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
