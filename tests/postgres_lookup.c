/* postgres_lookup.c — a put's look-up of a version its parent does not list
 * is bounded (schema version 38): the rows of checkpoints a put reads are
 * counted (pg_stat_xact_user_tables, in the put's own transaction), not timed.
 * A put without a parent into a namespace where every row lists a version
 * without a value, a put whose parent lists no channel, a version nobody
 * stored and a linear put each read a bounded number of rows however many the
 * namespace holds; LangGraph's '__copy__' still finds its sibling's values;
 * the look-up stops at the first row listing the version and reads at most 64
 * rows (docs/postgres.md, schema 38); a version 37 schema migrated. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_P "1f1e9eee-1758-6660-8003-f7e2ee72e9f0"
#define UUID_Q "1f1e9eee-1758-6660-8003-f7e2ee72e9f1"
#define UUID_R "1f1e9eee-1758-6660-8003-f7e2ee72e9f2"
#define ROWS 300 /* rows put before the counted put */

/* ROWS checkpoints of thread "t" in a chain, each listing m at a new version
 * with a value, z at version "zz" without one (the cost script's
 * '__convo_body__') and, when with_far, f at "far" with value "F". */
static void fill(PGconn *pg, const char *schema, int with_far)
{
    char sql[2048];
    snprintf(sql, sizeof sql,
             "DO $$ DECLARE prev text; id text; BEGIN FOR i IN 1 .. %d LOOP"
             " id := gen_random_uuid()::text;"
             " PERFORM @S.checkpoint_put('t', '', id, prev, '{}', NULL, NULL, 0,"
             " ARRAY['m', 'z'%s], ARRAY['m' || i, 'zz'%s], ARRAY['json', NULL%s],"
             " ARRAY['1'::bytea, NULL%s], now(), NULL);"
             " prev := id; END LOOP; END $$",
             ROWS, with_far ? ", 'f'" : "", with_far ? ", 'far'" : "",
             with_far ? ", 'json'" : "", with_far ? ", '\"F\"'" : "");
    exec_in_schema(pg, schema, sql);
}

/* The rows of schema's checkpoints table read by call (a SELECT of
 * checkpoint_put), counted in its own transaction, which is rolled back: the
 * transaction's counters after it less before it (they may hold an earlier
 * transaction's counts not yet flushed). */
static long rows_read_by(PGconn *pg, const char *schema, const char *call)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)"
             " FROM pg_stat_xact_user_tables WHERE schemaname = '%s'"
             " AND relname = 'checkpoints'", schema);
    exec_in_schema(pg, schema, "BEGIN");
    long before = query_long(pg, sql);
    exec_in_schema(pg, schema, call);
    long n = query_long(pg, sql) - before;
    exec_in_schema(pg, schema, "ROLLBACK");
    return n;
}

/* The value (json) of channel ch in checkpoint id of thread "t", or NULL. */
static char *value_of(convo_store *s, const char *id, const char *ch)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    char *out = NULL;
    for (size_t i = 0; i < convo_checkpoint_channel_count(cp); i++) {
        convo_blob v;
        if (strcmp(convo_checkpoint_channel(cp, i, NULL, &v), ch) == 0 && v.type)
            out = strndup(v.bytes, v.len);
    }
    convo_checkpoint_free(cp);
    return out;
}

/* A put without a parent listing z at "zz" (every row lists it, none with a
 * value) and y at a version nobody stored: schema 37 decoded every row of the
 * namespace for z and read every row for y. */
START_TEST(test_parentless_put_reads_a_bounded_number_of_rows)
{
    const char *name = "lk1", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    fill(pg, schema, 0);
    long n = rows_read_by(pg, schema,
                          "SELECT @S.checkpoint_put('t', '', '" UUID_P "', NULL, '{}', NULL,"
                          " NULL, 0, ARRAY['m', 'z', 'y'], ARRAY['new', 'zz', 'never'],"
                          " ARRAY['json', NULL, NULL], ARRAY['1'::bytea, NULL, NULL], now(),"
                          " NULL)");
    ck_assert_msg(n <= 64 + 8, "a parentless put read %ld rows of %d", n, ROWS);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A put whose parent (the newest row) lists no channel: nothing is put after
 * the parent, so nothing is searched; schema 37 took the parent's position
 * from its channels and, finding none, searched the whole namespace. */
START_TEST(test_parent_without_channels_searches_nothing)
{
    const char *name = "lk2", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    fill(pg, schema, 0);
    exec_in_schema(pg, schema,
                   "SELECT @S.checkpoint_put('t', '', '" UUID_P "', NULL, '{}', NULL, NULL, 0,"
                   " NULL, NULL, NULL, NULL, now(), NULL)");
    long n = rows_read_by(pg, schema,
                          "SELECT @S.checkpoint_put('t', '', '" UUID_Q "', '" UUID_P "', '{}',"
                          " NULL, NULL, 0, ARRAY['z'], ARRAY['zz'], ARRAY[NULL]::text[],"
                          " ARRAY[NULL]::bytea[], now(), NULL)");
    ck_assert_msg(n <= 4, "a put after a parent without channels read %ld rows", n);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A run's put (its parent the newest row, one version new, the others the
 * parent's) reads the parent and nothing else of the namespace, and copies
 * the parent's value. */
START_TEST(test_linear_put_reads_the_parent)
{
    const char *name = "lk3", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    fill(pg, schema, 1);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", NULL, &cp, &err), 0);
    char call[1024];
    snprintf(call, sizeof call,
             "SELECT @S.checkpoint_put('t', '', '" UUID_P "', '%s', '{}', NULL, NULL, 0,"
             " ARRAY['m', 'z', 'f'], ARRAY['new', 'zz', 'far'],"
             " ARRAY['json', NULL, NULL], ARRAY['1'::bytea, NULL, NULL], now(), NULL)",
             convo_checkpoint_id(cp));
    long n = rows_read_by(pg, schema, call);
    ck_assert_msg(n <= 4, "a linear put read %ld rows", n);
    exec_in_schema(pg, schema, call);
    char *v = value_of(s, UUID_P, "f");
    ck_assert_str_eq(v, "\"F\"");
    free(v);
    convo_checkpoint_free(cp);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* Checkpoint number i of thread "t" (parent number parent, or none when < 0)
 * listing channel g at version ver, with value val or none (NULL ver: no
 * channel). */
static void put_g(convo_store *s, int i, int parent, const char *ver, const char *val)
{
    char id[40], pid[40];
    snprintf(id, sizeof id, "1f1e9eee-1758-6660-8003-%012d", i);
    snprintf(pid, sizeof pid, "1f1e9eee-1758-6660-8003-%012d", parent);
    convo_blob x = {"json", val, val ? strlen(val) : 0};
    convo_channel_in ch = {"g", ver, val ? &x : NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.parent_id = parent >= 0 ? pid : NULL;
    cp.metadata_json = "{}";
    cp.channels = ver ? &ch : NULL;
    cp.nchannels = ver ? 1 : 0;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %d: %s", i, err.message);
}

static char *value_of_g(convo_store *s, int i)
{
    char id[40];
    snprintf(id, sizeof id, "1f1e9eee-1758-6660-8003-%012d", i);
    return value_of(s, id, "g");
}

/* After a parent, the rows put after it are searched oldest first (a copy's
 * sibling is the parent's child), without one newest first; either way the
 * first row listing the version answers, with its value or without one, and
 * at most 64 rows are read: a version held only by a row further away reads
 * back without a value (schema 38; 37 read every row). */
START_TEST(test_lookup_stops_at_the_first_row_and_after_64)
{
    const char *name = "lk4";
    convo_store *s = open_ok(schema_url(name, NULL));
    put_g(s, 0, -1, NULL, NULL);        /* P, without channels */
    put_g(s, 1, 0, "v1", "\"one\"");    /* P's child holds v1 */
    put_g(s, 2, 0, "v2", NULL);         /* lists v2, nobody holds it */
    put_g(s, 3, 0, "v2", "\"two\"");    /* brings v2 after 2 */
    put_g(s, 4, 0, "v1", NULL);         /* a copy of 1: its value */
    char *v = value_of_g(s, 4);
    ck_assert_str_eq(v, "\"one\"");
    free(v);
    put_g(s, 5, 0, "v2", NULL); /* 2 answers first: no value */
    ck_assert_ptr_null(value_of_g(s, 5));
    put_g(s, 6, -1, "v2", NULL); /* no parent: 5 answers first (none) */
    ck_assert_ptr_null(value_of_g(s, 6));
    put_g(s, 7, -1, "v1", NULL); /* no parent: 4 answers ("one") */
    v = value_of_g(s, 7);
    ck_assert_str_eq(v, "\"one\"");
    free(v);
    /* 70 rows after 8 without g, then 79 holding v9 */
    put_g(s, 8, 7, NULL, NULL);
    for (int i = 9; i < 79; i++)
        put_g(s, i, i - 1, NULL, NULL);
    put_g(s, 79, 78, "v9", "\"nine\"");
    put_g(s, 80, 8, "v9", NULL); /* 79 is the 71st row after 8 */
    ck_assert_ptr_null(value_of_g(s, 80));
    put_g(s, 81, 20, "v9", NULL); /* 79 is the 59th after 20 */
    v = value_of_g(s, 81);
    ck_assert_str_eq(v, "\"nine\"");
    free(v);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A version 37 schema with its rows: migrated on open, the rows read back,
 * and a parentless put then reads a bounded number of rows. */
START_TEST(test_migration_from_version_37)
{
    const char *name = "lk5", *schema = schema_name(name);
    schema_at_version(name, 37);
    PGconn *pg = admin();
    fill(pg, schema, 1);
    convo_store *s = open_ok(schema_url(name, NULL));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    long n = rows_read_by(pg, schema,
                          "SELECT @S.checkpoint_put('t', '', '" UUID_R "', NULL, '{}', NULL,"
                          " NULL, 0, ARRAY['z', 'f'], ARRAY['zz', 'far'],"
                          " ARRAY[NULL, NULL]::text[], ARRAY[NULL, NULL]::bytea[], now(), NULL)");
    ck_assert_msg(n <= 8, "read %ld rows", n);
    exec_in_schema(pg, schema,
                   "SELECT @S.checkpoint_put('t', '', '" UUID_R "', NULL, '{}', NULL,"
                   " NULL, 0, ARRAY['z', 'f'], ARRAY['zz', 'far'],"
                   " ARRAY[NULL, NULL]::text[], ARRAY[NULL, NULL]::bytea[], now(), NULL)");
    v = value_of(s, UUID_R, "f");
    ck_assert_str_eq(v, "\"F\"");
    free(v);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_lookup_tests(Suite *s)
{
    TCase *tc = tcase_create("lookup");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_parentless_put_reads_a_bounded_number_of_rows);
    tcase_add_test(tc, test_parent_without_channels_searches_nothing);
    tcase_add_test(tc, test_linear_put_reads_the_parent);
    tcase_add_test(tc, test_lookup_stops_at_the_first_row_and_after_64);
    tcase_add_test(tc, test_migration_from_version_37);
    suite_add_tcase(s, tc);
}
