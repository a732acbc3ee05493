/* postgres_repeats.c — a checkpoint's versions without the repeats (schema
 * version 37): a version equal to the channel's before is one byte, read back
 * whole by get, list, prune and delete; a row without repeats or with a
 * version over 254 bytes keeps the older forms; a third form that does not
 * check against itself is CONVO_ECORRUPT; a version 36 schema migrated. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e9d1"
#define UUID_B "1f1e9eee-1758-6660-8003-f7e2ee72e9d2"
#define UUID_C "1f1e9eee-1758-6660-8003-f7e2ee72e9d3"

static char long_version[256]; /* 255 bytes: no third form */

/* Checkpoint id of thread "t" (parent or NULL): channels a, b, c, d at
 * versions v[0..3], values "A", "B", "C", "D" when with_values. */
static void put4(convo_store *s, const char *id, const char *parent, const char *const v[4],
                 int with_values)
{
    convo_blob x[4] = {{"json", "\"A\"", 3}, {"json", "\"B\"", 3}, {"json", "\"C\"", 3},
                       {"json", "\"D\"", 3}};
    convo_channel_in ch[4];
    const char *names[4] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        ch[i] = (convo_channel_in){names[i], v[i], with_values ? &x[i] : NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{}";
    cp.channels = ch;
    cp.nchannels = 4;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

/* Checkpoint id reads back with versions v and values A, B, C, D. */
static void reads_back(const convo_checkpoint *cp, const char *const v[4])
{
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 4);
    for (size_t i = 0; i < 4; i++) {
        const char *ver = NULL;
        convo_blob x;
        const char *ch = convo_checkpoint_channel(cp, i, &ver, &x);
        ck_assert_int_eq(ch[0], 'a' + (int)i);
        ck_assert_str_eq(ver, v[i]);
        ck_assert_msg(x.type && x.len == 3 && ((const char *)x.bytes)[1] == 'A' + (int)i,
                      "%s: no value", ch);
    }
}

/* A listing of each one channel (list opts v5 only_channel:
 * checkpoint_list_channel.sql) reads the same versions and values: thread t's
 * checkpoints newest first with versions vs[k] (n of them). */
static void only_reads_back(convo_store *s, const char *const (*vs)[4], size_t n)
{
    const char *names[4] = {"a", "b", "c", "d"};
    for (size_t i = 0; i < 4; i++) {
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        o.only_channel = names[i];
        convo_checkpoint_set *set = NULL;
        convo_error err;
        ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
        ck_assert_uint_eq(convo_checkpoint_set_count(set), n);
        for (size_t k = 0; k < n; k++) {
            const convo_checkpoint *cp = convo_checkpoint_set_get(set, k);
            const char *ver = NULL;
            convo_blob x;
            ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 1);
            ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &ver, &x), names[i]);
            ck_assert_str_eq(ver, vs[k][i]);
            ck_assert_msg(x.type && x.len == 3 && ((const char *)x.bytes)[1] == 'A' + (int)i,
                          "%s: no value", names[i]);
        }
        convo_checkpoint_set_free(set);
    }
}

static void get_reads_back(convo_store *s, const char *id, const char *const v[4])
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    reads_back(cp, v);
    convo_checkpoint_free(cp);
}

/* The first byte of checkpoint id's stored versions, and their length. */
static long form_of(PGconn *pg, const char *schema, const char *id, long *len)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT octet_length(versions) FROM \"%s\".checkpoints"
             " WHERE checkpoint_id = \"%s\".id_pack('%s')", schema, schema, id);
    *len = query_long(pg, sql);
    snprintf(sql, sizeof sql, "SELECT get_byte(versions, 0) FROM \"%s\".checkpoints"
             " WHERE checkpoint_id = \"%s\".id_pack('%s')", schema, schema, id);
    return query_long(pg, sql);
}

START_TEST(test_repeats_stored_once)
{
    const char *name = "rep1", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    /* b and c repeat a: 1 + 4 lengths + "7" and "x-9" once each */
    const char *v1[4] = {"7", "7", "7", "x-9"};
    put4(s, UUID_A, NULL, v1, 1);
    long len = 0;
    ck_assert_int_eq(form_of(pg, schema, UUID_A, &len), 2);
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT 5 + octet_length(\"%s\".ver_pack('7'))"
             " + octet_length(\"%s\".ver_pack('x-9'))", schema, schema);
    ck_assert_int_eq(len, query_long(pg, sql));
    get_reads_back(s, UUID_A, v1);
    /* B lists A's versions without values: found in its parent's row */
    put4(s, UUID_B, UUID_A, v1, 0);
    get_reads_back(s, UUID_B, v1);
    /* repeats apart (a, c) and none: the older form, byte for byte as v36 */
    const char *v2[4] = {"7", "8", "7", "8"};
    put4(s, UUID_C, UUID_B, v2, 1);
    ck_assert_int_eq(form_of(pg, schema, UUID_C, &len), 1);
    get_reads_back(s, UUID_C, v2);
    /* a list and a prune read them whole too */
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 3);
    reads_back(convo_checkpoint_set_get(set, 1), v1);
    reads_back(convo_checkpoint_set_get(set, 2), v1);
    convo_checkpoint_set_free(set);
    const char *const newest_first[3][4] = {{"7", "8", "7", "8"}, {"7", "7", "7", "x-9"},
                                            {"7", "7", "7", "x-9"}};
    only_reads_back(s, newest_first, 3);
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 2, &err), 0);
    get_reads_back(s, UUID_B, v1);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

START_TEST(test_long_version_keeps_the_older_form)
{
    const char *name = "rep2", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    const char *v[4] = {long_version, long_version, "1", "1"};
    put4(s, UUID_A, NULL, v, 1);
    long len = 0;
    ck_assert_int_eq(form_of(pg, schema, UUID_A, &len), 1);
    get_reads_back(s, UUID_A, v);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A third form whose first channel is marked "as before", or whose lengths do
 * not fill it, is CONVO_ECORRUPT for get, list and a child's put alike. */
START_TEST(test_corrupt_third_form)
{
    const char *name = "rep3", *schema = schema_name(name);
    const char *breaks[] = {"set_byte(versions, 1, 255)", "versions || '\\x00'::bytea",
                            "substring(versions FROM 1 FOR octet_length(versions) - 1)"};
    for (int k = 0; k < 3; k++) {
        convo_store *s = open_ok(schema_url(name, NULL));
        const char *v[4] = {"7", "7", "8", "8"};
        put4(s, UUID_A, NULL, v, 1);
        PGconn *pg = admin();
        char sql[512];
        snprintf(sql, sizeof sql, "UPDATE \"%s\".checkpoints SET versions = %s", schema,
                 breaks[k]);
        PQclear(PQexec(pg, sql));
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err), CONVO_ECORRUPT);
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        convo_checkpoint_set *set = NULL;
        ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), CONVO_ECORRUPT);
        /* one channel's listing checks the row's lengths too */
        for (char c = 'a'; c <= 'd'; c++) {
            const char only[2] = {c, 0};
            o.only_channel = only;
            ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), CONVO_ECORRUPT);
            ck_assert_ptr_null(set);
        }
        convo_checkpoint_set_free(set);
        PQfinish(pg);
        convo_close(s);
        drop_schema(name);
    }
}
END_TEST

START_TEST(test_migration_from_version_36)
{
    const char *name = "rep4", *schema = schema_name(name);
    schema_at_version(name, 36);
    PGconn *pg = admin();
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM (SELECT \"%s\".checkpoint_put('t', '', '" UUID_A "', NULL,"
             " '{}', NULL, NULL, 0, ARRAY['a', 'b', 'c', 'd'], ARRAY['7', '7', '7', 'x-9'],"
             " ARRAY['json', 'json', 'json', 'json'], ARRAY['\"A\"'::bytea, '\"B\"', '\"C\"',"
             " '\"D\"'], now(), NULL)) x", schema);
    ck_assert_int_eq(query_long(pg, sql), 1);
    long len = 0;
    ck_assert_int_eq(form_of(pg, schema, UUID_A, &len), 1);
    convo_store *s = open_ok(schema_url(name, NULL));
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    const char *v1[4] = {"7", "7", "7", "x-9"};
    get_reads_back(s, UUID_A, v1);
    put4(s, UUID_B, UUID_A, v1, 0);
    ck_assert_int_eq(form_of(pg, schema, UUID_B, &len), 2);
    get_reads_back(s, UUID_B, v1);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_repeats_tests(Suite *s)
{
    memset(long_version, 'v', sizeof long_version - 1);
    TCase *tc = tcase_create("repeats");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_repeats_stored_once);
    tcase_add_test(tc, test_long_version_keeps_the_older_form);
    tcase_add_test(tc, test_corrupt_third_form);
    tcase_add_test(tc, test_migration_from_version_36);
    suite_add_tcase(s, tc);
}
