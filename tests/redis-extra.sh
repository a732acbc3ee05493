#!/bin/sh
# redis-extra.sh — the Redis driver's own checks (tests/redis.c: key scheme,
# TTL expiry, restarts, timeouts, lost scripts) on CONVO_TEST_REDIS_URL. The
# restart and pause cases use a private redis-server the program starts, so
# suites sharing the test server are never disturbed.
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
convo_need_url redis CONVO_TEST_REDIS_URL
export CONVO_TEST_REDIS_URL
if [ -n "${CONVO_TEST_WRAPPER:-}" ]; then
    # shellcheck disable=SC2086
    exec "$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER "$top_builddir/tests/redis_extra"
fi
exec "$top_builddir/tests/redis_extra"
