/* postgres_swaps.c — a put's swaps update each row they name once (schema
 * version 35): a write and an input of the parent swapped in one UPDATE of its
 * row, swaps that do not match change nothing, a value over 1,024 bytes swapped
 * in checkpoint_blobs, a put_writes racing the swaps is kept, and a version 34
 * schema migrated with its rows. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e9b1"
#define UUID_B "1f1e9eee-1758-6660-8003-f7e2ee72e9b2"
#define TASK_1 "1f1e9eee-1758-6660-8003-f7e2ee72e9c1"
#define TASK_2 "1f1e9eee-1758-6660-8003-f7e2ee72e9c2"

static char big[1101]; /* a value over 1,024 bytes: in checkpoint_blobs */

/* sql with @S replaced by the quoted schema, run on pg; the first value of its
 * last result as a number (0 when it has none). */
static long run_in(PGconn *pg, const char *schema, const char *sql)
{
    size_t n = strlen(sql) + 1;
    for (const char *p = strstr(sql, "@S"); p; p = strstr(p + 2, "@S"))
        n += strlen(schema) + 2;
    char *q = malloc(n), *o = q;
    ck_assert_ptr_nonnull(q);
    for (const char *p = sql; *p;) {
        if (p[0] == '@' && p[1] == 'S') {
            o += sprintf(o, "\"%s\"", schema);
            p += 2;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    long v = query_long(pg, q);
    free(q);
    return v;
}

/* Checkpoint A of thread "t": channels a (version 1, "in"), b (version 1,
 * "bee") and c (version 1, the big value), and task 1's write (idx 0,
 * "messages", "w0"). */
static void put_a(PGconn *pg, const char *schema)
{
    char sql[4096];
    snprintf(sql, sizeof sql,
             "SELECT 1 FROM @S.checkpoint_put('t', '', '" UUID_A "', NULL, '{}', NULL, NULL, 0,"
             " ARRAY['a', 'b', 'c'], ARRAY['1', '1', '1'], ARRAY['json', 'json', 'json'],"
             " ARRAY['\"in\"'::bytea, '\"bee\"'::bytea, convert_to('%s', 'UTF8')], now(), NULL),"
             " @S.checkpoint_put_writes('t', '', '" UUID_A "', '" TASK_1 "', 'p',"
             " ARRAY[0::int8], ARRAY['messages'], ARRAY['json'], ARRAY['\"w0\"'::bytea], NULL)",
             big);
    ck_assert_int_eq(run_in(pg, schema, sql), 1);
}

/* B (parent A, one message appended) with the swaps of A's write (task 1,
 * idx 0, old value ow), of its input a (old value oa) and of c (the big value
 * when oc is 1, else another), in one transaction; the checkpoint rows
 * it updated. */
static long put_b(const char *schema, const char *ow, const char *oa, int oc)
{
    /* a connection of its own: a backend's counts not yet reported are in
     * pg_stat_get_xact_tuples_updated() too */
    PGconn *pg = admin();
    char *sql = malloc(8192);
    ck_assert_ptr_nonnull(sql);
    snprintf(sql, 8192,
             "BEGIN; SELECT @S.checkpoint_put_refs('t', '', '" UUID_B "', '" UUID_A "', '{}',"
             " NULL, NULL, 1, ARRAY['a', 'b', 'c'], ARRAY['2', '1', '1'],"
             " ARRAY['json', NULL, NULL], ARRAY['\"new\"'::bytea, NULL, NULL],"
             " ARRAY['\\x6d'::bytea], ARRAY['user'], -1, -1, now(), NULL,"
             " ARRAY['" UUID_A "', '" UUID_A "', '" UUID_A "'], ARRAY['" TASK_1 "', NULL, NULL],"
             " ARRAY[0::int8, 0, 0], ARRAY['messages', 'a', 'c'], ARRAY[NULL, '1', '1'],"
             " ARRAY['json', 'json', 'json'],"
             " ARRAY['%s'::bytea, '%s'::bytea, convert_to('%s', 'UTF8')],"
             " ARRAY['ref', 'ref', 'ref'], ARRAY['\\x2a'::bytea, '\\x2b', '\\x2c'],"
             " ARRAY[1::int8, 2, 3]);"
             " SELECT pg_stat_get_xact_tuples_updated('@S.checkpoints'::regclass)",
             ow, oa, oc ? big : "other");
    long updated = run_in(pg, schema, sql);
    free(sql);
    ck_assert_int_eq(run_in(pg, schema, "COMMIT; SELECT 1"), 1);
    PQfinish(pg);
    return updated;
}

/* A reads back with its write's value w (type wt), a = xa (type at) and c of
 * type ct (the big value when ct is "json"). */
static void a_is(convo_store *s, const char *wt, const char *w, const char *at,
                 const char *xa, const char *ct)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 3);
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, NULL, &v), "a");
    ck_assert_str_eq(v.type, at);
    ck_assert_msg(v.len == strlen(xa) && memcmp(v.bytes, xa, v.len) == 0, "a: %.*s",
                  (int)v.len, (const char *)v.bytes);
    ck_assert_str_eq(convo_checkpoint_channel(cp, 1, NULL, &v), "b");
    ck_assert_uint_eq(v.len, 5);
    ck_assert_str_eq(convo_checkpoint_channel(cp, 2, NULL, &v), "c");
    ck_assert_str_eq(v.type, ct);
    ck_assert_uint_eq(v.len, strcmp(ct, "json") == 0 ? sizeof big - 1 : 1);
    ck_assert_uint_ge(convo_checkpoint_write_count(cp), 1);
    int64_t idx = -1;
    ck_assert_str_eq(convo_checkpoint_write(cp, 0, NULL, &idx, NULL, &v), TASK_1);
    ck_assert_int_eq(idx, 0);
    ck_assert_str_eq(v.type, wt);
    ck_assert_msg(v.len == strlen(w) && memcmp(v.bytes, w, v.len) == 0, "write: %.*s",
                  (int)v.len, (const char *)v.bytes);
    convo_checkpoint_free(cp);
}

static long log_length_of_a(PGconn *pg, const char *schema)
{
    return run_in(pg, schema, "SELECT log_length FROM @S.checkpoints"
                              " WHERE checkpoint_id = @S.id_pack('" UUID_A "')");
}

START_TEST(test_swaps_update_the_row_once)
{
    const char *name = "swp1", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    put_a(pg, schema);
    /* the write, the input and the big value: one update of A's row (v31-34: three) */
    ck_assert_int_eq(put_b(schema, "\"w0\"", "\"in\"", 1), 1);
    a_is(s, "ref", "*", "ref", "+", "ref");
    ck_assert_int_eq(log_length_of_a(pg, schema), 3);
    ck_assert_int_eq(run_in(pg, schema, "SELECT count(*) FROM @S.checkpoint_blobs"
                                        " WHERE type = (SELECT num FROM @S.checkpoint_names"
                                        " WHERE name = 'ref')"), 1);
    /* B copied its parent's a? No: B brings a at version 2; b and c are A's */
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_B, &cp, &err), 0);
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, NULL, &v), "a");
    ck_assert_uint_eq(v.len, 5);
    ck_assert_str_eq(convo_checkpoint_channel(cp, 2, NULL, &v), "c");
    ck_assert_str_eq(v.type, "ref");
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 1);
    convo_checkpoint_free(cp);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

START_TEST(test_swaps_that_miss_change_nothing)
{
    const char *name = "swp2", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    put_a(pg, schema);
    /* none matches its old value: A's row is not updated at all */
    ck_assert_int_eq(put_b(schema, "\"w9\"", "\"i9\"", 0), 0);
    a_is(s, "json", "\"w0\"", "json", "\"in\"", "json");
    ck_assert_int_eq(log_length_of_a(pg, schema), 0);
    /* only the write matches: it alone changes, in one update */
    run_in(pg, schema, "DELETE FROM @S.checkpoints WHERE checkpoint_id = @S.id_pack('" UUID_B
                       "'); SELECT 1");
    ck_assert_int_eq(put_b(schema, "\"w0\"", "\"i9\"", 0), 1);
    a_is(s, "ref", "*", "json", "\"in\"", "json");
    ck_assert_int_eq(log_length_of_a(pg, schema), 1);
    /* only the big value: swapped in checkpoint_blobs, A's log_length raised */
    run_in(pg, schema, "DELETE FROM @S.checkpoints WHERE checkpoint_id = @S.id_pack('" UUID_B
                       "'); SELECT 1");
    ck_assert_int_eq(put_b(schema, "\"w9\"", "\"i9\"", 1), 1);
    a_is(s, "ref", "*", "json", "\"in\"", "ref");
    ck_assert_int_eq(log_length_of_a(pg, schema), 3);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

START_TEST(test_a_racing_write_is_kept)
{
    const char *name = "swp3", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    put_a(pg, schema);
    /* task 2 writes to A in an open transaction: the swaps wait for its row lock */
    PGconn *writer = admin();
    ck_assert_int_eq(run_in(writer, schema,
                            "BEGIN; SELECT 1 FROM @S.checkpoint_put_writes('t', '', '" UUID_A
                            "', '" TASK_2 "', 'p', ARRAY[0::int8], ARRAY['messages'],"
                            " ARRAY['json'], ARRAY['\"w2\"'::bytea], NULL)"), 1);
    PGconn *swapper = admin();
    PQclear(PQexec(swapper, "SET application_name = 'convo_swapper'"));
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT \"%s\".checkpoint_put_refs('t', '', '" UUID_B "', '" UUID_A "', '{}',"
             " NULL, NULL, 1, ARRAY['a'], ARRAY['2'], ARRAY['json'], ARRAY['\"new\"'::bytea],"
             " ARRAY['\\x6d'::bytea], ARRAY['user'], -1, -1, now(), NULL,"
             " ARRAY['" UUID_A "'], ARRAY['" TASK_1 "'], ARRAY[0::int8], ARRAY['messages'],"
             " ARRAY[NULL]::text[], ARRAY['json'], ARRAY['\"w0\"'::bytea], ARRAY['ref'],"
             " ARRAY['\\x2a'::bytea], ARRAY[1::int8])", schema);
    ck_assert_int_eq(PQsendQuery(swapper, sql), 1);
    wait_for_lock_wait("convo_swapper");
    ck_assert_int_eq(run_in(writer, schema, "COMMIT; SELECT 1"), 1);
    PGresult *r;
    while ((r = PQgetResult(swapper)) != NULL) {
        ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
        PQclear(r);
    }
    /* both: task 1's write swapped, task 2's kept */
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 2);
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_write(cp, 0, NULL, NULL, NULL, &v), TASK_1);
    ck_assert_str_eq(v.type, "ref");
    ck_assert_str_eq(convo_checkpoint_write(cp, 1, NULL, NULL, NULL, &v), TASK_2);
    ck_assert_str_eq(v.type, "json");
    ck_assert_uint_eq(v.len, 4);
    convo_checkpoint_free(cp);
    PQfinish(swapper);
    PQfinish(writer);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

START_TEST(test_migration_from_version_34)
{
    const char *name = "swp4", *schema = schema_name(name);
    schema_at_version(name, 34);
    PGconn *pg = admin();
    put_a(pg, schema);
    convo_store *s = open_ok(schema_url(name, NULL));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    /* the row version 34 stored is read, and swapped by the new function */
    a_is(s, "json", "\"w0\"", "json", "\"in\"", "json");
    ck_assert_int_eq(put_b(schema, "\"w0\"", "\"in\"", 1), 1);
    a_is(s, "ref", "*", "ref", "+", "ref");
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_swaps_tests(Suite *s)
{
    memset(big, 'x', sizeof big - 1);
    big[0] = '"';
    big[sizeof big - 2] = '"';
    TCase *tc = tcase_create("swaps");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_swaps_update_the_row_once);
    tcase_add_test(tc, test_swaps_that_miss_change_nothing);
    tcase_add_test(tc, test_a_racing_write_is_kept);
    tcase_add_test(tc, test_migration_from_version_34);
    suite_add_tcase(s, tc);
}
