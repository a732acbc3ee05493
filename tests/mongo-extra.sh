#!/bin/sh
# mongo-extra.sh — the MongoDB driver's own checks (tests/mongo.c: URL
# parameters, stored layout, crash points, ttl, races, SIGKILLed writers) on
# CONVO_TEST_MONGO_URL, the stand-in under tests/mongo-server or a real mongod.
# Each run works in a fresh database (mx<time><pid>) and drops it at the end.
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
convo_need_url mongo CONVO_TEST_MONGO_URL
export CONVO_TEST_MONGO_URL
if [ -n "${CONVO_TEST_WRAPPER:-}" ]; then
    # shellcheck disable=SC2086
    exec "$top_builddir/libtool" --mode=execute $CONVO_TEST_WRAPPER "$top_builddir/tests/mongo_extra"
fi
exec "$top_builddir/tests/mongo_extra"
