/* postgres_expiry.c — threads_by_expiry only in a store a ttl opener opened
 * (schema version 26, migrate-26.sql): an opener with a ttl makes it, one
 * without leaves the store without it (its appends open one index of
 * threads fewer), sweep finds deadlines either way, and the migration from
 * version 25 drops it where no thread has a deadline. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>

/* 1 when schema `name` has threads_by_expiry. */
static long has_expiry(PGconn *pg, const char *name)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_indexes WHERE schemaname = '%s'"
             " AND indexname = 'threads_by_expiry'", schema_name(name));
    return query_long(pg, sql);
}

static long deadlines(PGconn *pg, const char *name)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".threads WHERE expires_at IS NOT NULL",
             schema_name(name));
    return query_long(pg, sql);
}

static uint64_t sweep_ok(convo_store *s)
{
    uint64_t removed = 0;
    convo_error err;
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0);
    return removed;
}

/* A store opened without ttl has no expiry index, and sweep still finds a
 * deadline (reading every row); the first ttl opener makes the index, the
 * next finds it; the ttl opener's appends write deadlines it serves. */
START_TEST(test_ttl_opener_makes_the_index)
{
    const char *name = "exp_open";
    drop_schema(name);
    convo_store *plain = open_ok(schema_url(name, NULL));
    convo_error err;
    ck_assert_int_eq(append1(plain, "a", &err), 0);
    ck_assert_int_eq(append1(plain, "b", &err), 0);
    PGconn *pg = admin();
    ck_assert_int_eq(has_expiry(pg, name), 0);
    ck_assert_uint_eq(sweep_ok(plain), 0);
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE \"%s\".threads SET expires_at = now() - interval '1 h'"
             " WHERE thread_id = 'a'", schema_name(name));
    free(query1(pg, sql));
    ck_assert_uint_eq(sweep_ok(plain), 1); /* without the index */
    ck_assert_int_eq(list_has(plain, "a"), 0);
    ck_assert_int_eq(list_has(plain, "b"), 1);

    convo_store *ttl = open_ok(schema_url(name, "ttl=3600"));
    ck_assert_int_eq(has_expiry(pg, name), 1);
    convo_store *ttl2 = open_ok(schema_url(name, "ttl=60")); /* finds it */
    ck_assert_int_eq(has_expiry(pg, name), 1);
    ck_assert_int_eq(append1(ttl, "c", &err), 0);
    ck_assert_int_eq(deadlines(pg, name), 1);
    snprintf(sql, sizeof sql, "UPDATE \"%s\".threads SET expires_at = now() - interval '1 s'"
             " WHERE thread_id = 'c'", schema_name(name));
    free(query1(pg, sql));
    ck_assert_uint_eq(sweep_ok(plain), 1); /* through the index */
    ck_assert_int_eq(list_has(plain, "c"), 0);
    ck_assert_int_eq(length_of(plain, "b"), 1);
    convo_close(ttl2);
    convo_close(ttl);
    convo_close(plain);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* Version 25 stores are migrated on open: the index goes where no thread
 * has a deadline and stays where one has; threads, deadlines and sweep as
 * before. */
START_TEST(test_migration_from_version_25)
{
    const char *none = "exp_m_none", *some = "exp_m_some";
    schema_at_version(none, 25);
    schema_at_version(some, 25);
    PGconn *pg = admin();
    const char *writes =
        "SELECT @S.append('a', ARRAY[convert_to('{\"role\":\"user\"}', 'UTF8')], ARRAY['user'],"
        " now(), NULL, -1, -1, NULL);\n";
    exec_in_schema(pg, schema_name(none), writes);
    exec_in_schema(pg, schema_name(some), writes);
    exec_in_schema(pg, schema_name(some),
        "SELECT @S.append('d', ARRAY[convert_to('{\"role\":\"user\"}', 'UTF8')], ARRAY['user'],"
        " now(), NULL, -1, -1, interval '-1 s');\n");
    ck_assert_int_eq(has_expiry(pg, none), 1);
    ck_assert_int_eq(has_expiry(pg, some), 1);

    convo_store *a = open_ok(schema_url(none, NULL)), *b = open_ok(schema_url(some, NULL));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT max(version) FROM \"%s\".schema_version", schema_name(none));
    ck_assert_int_eq(query_long(pg, sql), PG_SCHEMA_VERSION);
    ck_assert_int_eq(has_expiry(pg, none), 0);
    ck_assert_int_eq(has_expiry(pg, some), 1);
    ck_assert_int_eq(deadlines(pg, some), 1);
    ck_assert_int_eq(length_of(a, "a"), 1);
    ck_assert_int_eq(length_of(b, "a"), 1);
    ck_assert_uint_eq(sweep_ok(a), 0);
    ck_assert_uint_eq(sweep_ok(b), 1); /* "d", whose deadline has passed */
    ck_assert_int_eq(list_has(b, "d"), 0);
    convo_close(a);
    convo_close(b);
    PQfinish(pg);
    drop_schema(none);
    drop_schema(some);
}
END_TEST

/* When the index cannot be made the ttl opener fails (nothing half open);
 * an opener without ttl does not need it. */
START_TEST(test_ttl_open_fails_without_the_function)
{
    const char *name = "exp_fail";
    drop_schema(name);
    convo_close(open_ok(schema_url(name, NULL)));
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name), "DROP FUNCTION @S.expiry_index();\n");
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, schema_url(name, "ttl=60"), &err);
    ck_assert_int_ne(rc, 0);
    ck_assert_ptr_null(s);
    ck_assert_msg(err.message[0] != 0, "no message");
    ck_assert_int_eq(has_expiry(pg, name), 0);
    convo_store *plain = open_ok(schema_url(name, NULL));
    ck_assert_int_eq(append1(plain, "t", &err), 0);
    convo_close(plain);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

void postgres_add_expiry_tests(Suite *s)
{
    TCase *tc = tcase_create("expiry");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ttl_opener_makes_the_index);
    tcase_add_test(tc, test_migration_from_version_25);
    tcase_add_test(tc, test_ttl_open_fails_without_the_function);
    suite_add_tcase(s, tc);
}
