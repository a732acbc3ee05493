#!/bin/sh
# reliability.sh — tests/crash (writers SIGKILLed mid-append, a fresh namespace's
# first open interrupted, concurrent processes) on a SQLite file and on every
# server named by CONVO_TEST_{REDIS,POSTGRES,MONGO}_URL, each in a fresh namespace.
#
# A server whose URL is not set is skipped, or fails under CONVO_REQUIRE_ALL=1.
# A driver this build lacks is skipped (make check leaves out its conformance
# suite too). CONVO_TEST_WRAPPER runs tests/crash under a tool (valgrind).
set -u
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
CRASH=$top_builddir/tests/crash
passed=0 failed=0 skipped=0

crash() {
    if [ -n "${CONVO_TEST_WRAPPER:-}" ]; then
        # shellcheck disable=SC2086
        "$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER "$CRASH" "$@"
    else
        "$CRASH" "$@"
    fi
}

drivers=$("$CRASH" --drivers) || { echo "reliability: FAIL: $CRASH --drivers"; exit 1; }
built() { printf '%s\n' "$drivers" | grep -qx "$1"; }

# run NAME URL: runs the crash program; returns its status.
run() {
    echo "---- reliability: $1"
    status=0
    crash "$2" || status=$?
    case $status in
        0) passed=$((passed + 1)) ;;
        77) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)); echo "reliability: FAIL: $1 (exit $status)" ;;
    esac
    return "$status"
}

# server DRIVER VARIABLE: 0 when the driver is built and $VARIABLE is set.
server() {
    eval "value=\${$2:-}"
    if ! built "$1"; then
        echo "---- reliability: $1: skipped: this build has no $1 driver"
        skipped=$((skipped + 1))
        return 1
    fi
    [ -n "$value" ] && return 0
    if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
        echo "reliability: FAIL: $1: $2 is not set, but CONVO_REQUIRE_ALL=1 (start servers with scripts/test-servers.sh)"
        failed=$((failed + 1))
    else
        echo "---- reliability: $1: skipped: set $2 to a $1 test server's URL"
        skipped=$((skipped + 1))
    fi
    return 1
}

dir=$(mktemp -d "${TMPDIR:-/tmp}/convo-reliability.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

run memory "memory:"
if built sqlite; then
    run sqlite "sqlite:$dir/crash.db"
else
    echo "---- reliability: sqlite: skipped: this build has no sqlite driver"
    skipped=$((skipped + 1))
fi

token=$(convo_random)
if server redis CONVO_TEST_REDIS_URL; then
    prefix=r$token
    # the program derives fresh prefixes prefix_o0, prefix_o1, ... from this one
    if run redis "$(convo_url_add "$CONVO_TEST_REDIS_URL" "prefix=$prefix")" &&
        command -v redis-cli >/dev/null 2>&1; then
        redis-cli -u "$CONVO_TEST_REDIS_URL" --scan --pattern "*$prefix*" 2>/dev/null |
            xargs -r -n 100 redis-cli -u "$CONVO_TEST_REDIS_URL" DEL >/dev/null 2>&1 || true
    fi
fi
if server postgres CONVO_TEST_POSTGRES_URL; then
    schema=r_$token
    if run postgres "$(convo_url_add "$CONVO_TEST_POSTGRES_URL" "schema=$schema")" &&
        command -v psql >/dev/null 2>&1; then
        for s in "$schema" "${schema}_o0" "${schema}_o1" "${schema}_o2" "${schema}_o3" \
            "${schema}_o4" "${schema}_o5" "${schema}_o6" "${schema}_o7"; do
            psql -q -X "$CONVO_TEST_POSTGRES_URL" -c "DROP SCHEMA IF EXISTS \"$s\" CASCADE" \
                >/dev/null 2>&1 || true
        done
    fi
fi
if server mongo CONVO_TEST_MONGO_URL; then
    run mongo "$(convo_url_add "$CONVO_TEST_MONGO_URL" "database=r$token")" || true
fi

echo "$passed passed, $failed failed ($skipped skipped)"
[ "$failed" = 0 ] || exit 1
[ "$passed" -gt 1 ] || exit 77
exit 0
