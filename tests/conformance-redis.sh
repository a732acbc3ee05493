#!/bin/sh
# conformance-redis.sh — the conformance suite on the Redis server named by
# CONVO_TEST_REDIS_URL, under a fresh key prefix; its keys are deleted after a
# passing run (kept after a failure, for a look).
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
convo_need_url redis CONVO_TEST_REDIS_URL
prefix=t$(convo_random)
status=0
convo_conformance "$(convo_url_add "$CONVO_TEST_REDIS_URL" "prefix=$prefix")" || status=$?
if [ "$status" = 0 ] && command -v redis-cli >/dev/null 2>&1; then
    redis-cli -u "$CONVO_TEST_REDIS_URL" --scan --pattern "*$prefix*" 2>/dev/null |
        xargs -r -d "\n" -n 100 redis-cli -u "$CONVO_TEST_REDIS_URL" DEL >/dev/null 2>&1 || true
elif [ "$status" != 0 ]; then
    echo "conformance-redis: keys kept under prefix $prefix" >&2
fi
exit "$status"
