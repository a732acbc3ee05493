/* postgres_fill.c — the B-trees filled in put and append order packed full
 * (schema version 40): checkpoints_pkey, checkpoints_by_ns_put and
 * messages_pkey at fillfactor 100, in a new store and in one migrated from
 * version 39; a thread's appends leave the messages index's leaves full. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e9c1"

/* The three indexes' reloptions, "name:options;" in name order. */
static char *fill_options(PGconn *pg, const char *schema)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT string_agg(c.relname || ':' || coalesce(array_to_string(c.reloptions, ','),"
             " ''), ';' ORDER BY c.relname) FROM pg_class c JOIN pg_namespace n"
             " ON n.oid = c.relnamespace WHERE n.nspname = '%s' AND c.relname IN"
             " ('checkpoints_pkey', 'checkpoints_by_ns_put', 'messages_pkey')",
             schema);
    return query1(pg, sql);
}

#define ALL_FULL                                                                   \
    "checkpoints_by_ns_put:fillfactor=100;checkpoints_pkey:fillfactor=100;"        \
    "messages_pkey:fillfactor=100"

START_TEST(test_new_store)
{
    const char *name = "fill1", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    char *o = fill_options(pg, schema);
    ck_assert_str_eq(o, ALL_FULL);
    free(o);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A version 39 schema with a checkpoint and a message: migrated, both read
 * back, the indexes at 100 (at 39 they have no options). */
START_TEST(test_migration_from_version_39)
{
    const char *name = "fill2", *schema = schema_name(name);
    schema_at_version(name, 39);
    PGconn *pg = admin();
    exec_in_schema(pg, schema,
                   "SELECT @S.checkpoint_put('t', '', '" UUID_A "', NULL, '{}', NULL, NULL, 0,"
                   " ARRAY['messages'], ARRAY['1'], ARRAY['json'], ARRAY['\\x31'::bytea],"
                   " now(), NULL)");
    char *o = fill_options(pg, schema);
    ck_assert_str_eq(o, "checkpoints_by_ns_put:;checkpoints_pkey:;messages_pkey:");
    free(o);
    convo_store *s = open_ok(schema_url(name, NULL));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    o = fill_options(pg, schema);
    ck_assert_str_eq(o, ALL_FULL);
    free(o);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err) == 0, "%s", err.message);
    ck_assert_ptr_nonnull(cp);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(append1(s, "t", &err), 0);
    ck_assert_int_eq(length_of(s, "t"), 1);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* 12,000 messages of one thread: each leaf of messages_pkey holds 291 keys
 * when full and 262 at the default fillfactor (90), so 42 leaves against 46;
 * with the metapage and the root, at most 45 pages only when the leaves are
 * packed full (a count of pages, not a time). */
START_TEST(test_appends_fill_the_leaves)
{
    const char *name = "fill3", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    enum { BATCH = 500, TOTAL = 12000 };
    const char **batch = malloc(BATCH * sizeof *batch);
    ck_assert_ptr_nonnull(batch);
    for (int i = 0; i < BATCH; i++)
        batch[i] = "{\"role\":\"user\",\"content\":\"x\"}";
    convo_error err;
    for (int done = 0; done < TOTAL; done += BATCH)
        ck_assert_msg(convo_append(s, "t", batch, NULL, BATCH, NULL, NULL, &err) == 0, "%s",
                      err.message);
    free(batch);
    ck_assert_int_eq(length_of(s, "t"), TOTAL);
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT pg_relation_size('\"%s\".messages_pkey') / 8192", schema);
    long pages = query_long(pg, sql);
    ck_assert_msg(pages <= 45, "messages_pkey: %ld pages for %d keys", pages, (int)TOTAL);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_fill_tests(Suite *s)
{
    TCase *tc = tcase_create("fill");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_new_store);
    tcase_add_test(tc, test_migration_from_version_39);
    tcase_add_test(tc, test_appends_fill_the_leaves);
    suite_add_tcase(s, tc);
}
