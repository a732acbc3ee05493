#!/bin/sh
# conformance-postgres.sh — the conformance suite on the PostgreSQL server named
# by CONVO_TEST_POSTGRES_URL, in a fresh schema; the schema is dropped after a
# passing run (kept after a failure, for a look).
set -eu
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
convo_need_url postgres CONVO_TEST_POSTGRES_URL
schema=t_$(convo_random)
status=0
convo_conformance "$(convo_url_add "$CONVO_TEST_POSTGRES_URL" "schema=$schema")" || status=$?
if [ "$status" = 0 ] && command -v psql >/dev/null 2>&1; then
    psql -q -X "$CONVO_TEST_POSTGRES_URL" -c "DROP SCHEMA IF EXISTS \"$schema\" CASCADE" \
        >/dev/null 2>&1 || true
elif [ "$status" != 0 ]; then
    echo "conformance-postgres: data kept in schema $schema" >&2
fi
exit "$status"
