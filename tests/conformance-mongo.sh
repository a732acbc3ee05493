#!/bin/sh
# conformance-mongo.sh — the conformance suite on the MongoDB server (or the
# wire-protocol stand-in) named by CONVO_TEST_MONGO_URL, in a fresh database.
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
convo_need_url mongo CONVO_TEST_MONGO_URL
convo_conformance "$(convo_url_add "$CONVO_TEST_MONGO_URL" "database=t$(convo_random)")"
