#!/bin/sh
# redis-extra.sh — the Redis driver's own checks (tests/redis.c and its
# tests/redis_*.c: key scheme, TTL expiry, restarts, timeouts, lost scripts)
# on CONVO_TEST_REDIS_URL. The restart and pause cases use a private
# redis-server the program starts, so suites sharing the test server are
# never disturbed.
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
if [ -z "${CONVO_TEST_REDIS_URL:-}" ]; then
    if [ "${CONVO_REQUIRE_ALL:-0}" = 1 ]; then
        echo "redis-extra: FAIL: CONVO_TEST_REDIS_URL is not set, but CONVO_REQUIRE_ALL=1" >&2
        exit 1
    fi
    echo "redis-extra: skipped: set CONVO_TEST_REDIS_URL to a Redis test server's URL" >&2
    exit 77
fi
export CONVO_TEST_REDIS_URL
wrap() {
    # shellcheck disable=SC2086
    ${CONVO_TEST_WRAPPER:+"$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER} "$@"
}
status=0
wrap "$top_builddir/tests/redis_extra" || status=1
# put order, layout migrations and the tail rewrite (tests/redis-layout.c and its
# tests/redis_layout_*.c), in a fresh prefix
wrap "$top_builddir/tests/redis_layout" "$CONVO_TEST_REDIS_URL" "convo-layout-$(convo_random)" ||
    status=1
# the thread index: pages read only what matches, ttl, delete, repairs, layout 3 migrated
wrap "$top_builddir/tests/redis_index" "$CONVO_TEST_REDIS_URL" "convo-index-$(convo_random)" ||
    status=1
wrap "$top_builddir/tests/redis_window" "$CONVO_TEST_REDIS_URL" "convo-window-$(convo_random)" ||
    status=1
wrap "$top_builddir/tests/redis_guess" "$CONVO_TEST_REDIS_URL" "convo-guess-$(convo_random)" ||
    status=1
# how a page reads its replies (a private redis-server of its own)
wrap "$top_builddir/tests/redis_layout8" "$CONVO_TEST_REDIS_URL" "convo-layout8-$(convo_random)" ||
    status=1
wrap "$top_builddir/tests/redis_page_read" || status=1
exit $status
