/* postgres_refs.c — the put with log references (checkpoint_put_refs, schema
 * versions 14 and 15) beyond the conformance suite: one statement, so a failure after
 * the swaps began (injected by a trigger) leaves every table as it was, the
 * appended messages included; the generation condition of a put that appends
 * nothing; a version 13 or 14 schema with checkpoints migrated, then put on;
 * the plans of the latest-checkpoint read and a list page on a thread of
 * 3,000 checkpoints. */
#include "log_refs.h"
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every row of the tables a put touches, as text, one table a line. */
static char *snapshot(PGconn *pg, const char *name)
{
    static const char *const tables[] = {"threads", "messages", "checkpoints",
                                         "checkpoint_blobs"}; /* (v24) writes in checkpoints */
    char *out = strdup("");
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "SELECT coalesce(string_agg(r::text, ' ' ORDER BY r::text COLLATE \"C\"), '')"
                 " FROM \"%s\".%s r",
                 schema_name(name), tables[i]);
        char *rows = query1(pg, sql);
        char *more = malloc(strlen(out) + strlen(rows ? rows : "") + 2);
        ck_assert_ptr_nonnull(more);
        sprintf(more, "%s%s\n", out, rows ? rows : "");
        free(out);
        free(rows);
        out = more;
    }
    return out;
}

static long log_length_of(PGconn *pg, const char *name, const char *id)
{
    char sql[512];
    const char *schema = schema_name(name);
    snprintf(sql, sizeof sql, "SELECT log_length FROM \"%s\".checkpoints"
             " WHERE checkpoint_id = \"%s\".id_pack('%s')", schema, schema, id);
    return query_long(pg, sql);
}

/* The put appends the answer, turns c1's write into a reference and raises
 * c1's log_length in one statement: a trigger failing at the swap, or at
 * the raise after it, undoes all of it. */
START_TEST(test_put_refs_fails_whole)
{
    convo_store *s = open_ok(schema_url("refs", NULL));
    convo_error err;
    PGconn *pg = admin();
    ck_assert_msg(put_items(s, "c1", NULL, &U1, NULL, 1, -1, &err) == 0, "%s", err.message);
    write_answer(s, "c1");
    ck_assert_int_eq(log_length_of(pg, "refs", "c1"), 1);
    exec_in_schema(pg, schema_name("refs"),
                   "CREATE FUNCTION @S.test_boom() RETURNS trigger LANGUAGE plpgsql AS"
                   " $$BEGIN RAISE EXCEPTION 'injected %', TG_TABLE_NAME; END$$");
    static const char *const where[] = {"UPDATE OF writes ON @S.checkpoints",
                                        "UPDATE OF log_length ON @S.checkpoints"};
    const char *both[] = {U1, A1};
    for (size_t i = 0; i < 2; i++) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "CREATE TRIGGER test_boom BEFORE %s FOR EACH ROW EXECUTE FUNCTION @S.test_boom()",
                 where[i]);
        exec_in_schema(pg, schema_name("refs"), sql);
        char *before = snapshot(pg, "refs");
        ck_assert_int_ne(put_items(s, "c2", "c1", both, NULL, 2, -1, &err), 0);
        ck_assert_msg(strstr(err.message, "injected") != NULL, "%s", err.message);
        char *after = snapshot(pg, "refs");
        ck_assert_str_eq(after, before);
        free(after);
        free(before);
        ck_assert_int_eq(write_seq(s, "c1"), -1);
        ck_assert_int_eq(length_of(s, "t"), 1);
        snprintf(sql, sizeof sql, "DROP TRIGGER test_boom ON %s", strstr(where[i], "@S."));
        exec_in_schema(pg, schema_name("refs"), sql);
    }
    /* without the trigger the same put goes through whole */
    ck_assert_msg(put_items(s, "c2", "c1", both, NULL, 2, -1, &err) == 0, "%s", err.message);
    ck_assert_int_eq(write_seq(s, "c1"), 1);
    ck_assert_int_eq(log_length_of(pg, "refs", "c1"), 2);
    ck_assert_int_eq(log_length_of(pg, "refs", "c2"), 2);
    ck_assert_int_eq(length_of(s, "t"), 2);
    convo_close(s);
    PQfinish(pg);
    drop_schema("refs");
}
END_TEST

/* A put that appends nothing still meets the generation condition, also on a
 * thread that does not exist (generation 0): nothing written when it fails. */
START_TEST(test_put_refs_generation_without_messages)
{
    convo_store *s = open_ok(schema_url("refsgen", NULL));
    convo_error err;
    PGconn *pg = admin();
    ck_assert_int_eq(put_items(s, "c1", NULL, &U1, NULL, 1, 1, &err), CONVO_ECONFLICT);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), CONVO_ENOTFOUND);
    ck_assert_msg(put_items(s, "c1", NULL, &U1, NULL, 1, 0, &err) == 0, "%s", err.message);
    char *before = snapshot(pg, "refsgen");
    int64_t known[] = {0};
    ck_assert_int_eq(put_items(s, "c2", "c1", &U1, known, 1, 3, &err), CONVO_ECONFLICT);
    ck_assert_msg(strstr(err.message, "generation 0, expected 3") != NULL, "%s", err.message);
    char *after = snapshot(pg, "refsgen");
    ck_assert_str_eq(after, before);
    free(after);
    free(before);
    ck_assert_msg(put_items(s, "c2", "c1", &U1, known, 1, 0, &err) == 0, "%s", err.message);
    ck_assert_int_eq(log_length_of(pg, "refsgen", "c2"), 1);
    convo_close(s);
    PQfinish(pg);
    drop_schema("refsgen");
}
END_TEST

/* A schema at `version` holding a checkpoint whose message channel refers to
 * the log, and its pending write, written by that version's own functions (the
 * value's bytes are those the driver stores today: layout convo/items is the
 * core's, not the schema's), is migrated on open: the next put turns that
 * write into a reference through checkpoint_put_refs. */
static void migrate_and_put(const char *name, int version)
{
    PGconn *pg = admin();
    convo_store *s = open_ok(schema_url("refsrc", NULL));
    convo_error err;
    ck_assert_msg(put_items(s, "c1", NULL, &U1, NULL, 1, -1, &err) == 0, "%s", err.message);
    convo_close(s);
    char sql[1024];
    /* (v29) the value is in the checkpoint's row */
    snprintf(sql, sizeof sql, "SELECT encode(u.value, 'hex') FROM \"%s\".checkpoints c,"
             " \"%s\".channel_vals(c.channel_set, c.versions, c.vals) u"
             " WHERE u.value IS NOT NULL", schema_name("refsrc"), schema_name("refsrc"));
    char *items = query1(pg, sql);
    ck_assert_ptr_nonnull(items);
    drop_schema("refsrc");
    schema_at_version(name, version);
    snprintf(sql, sizeof sql,
             "SELECT @S.append('t', ARRAY[convert_to('%s', 'UTF8')], ARRAY['user'], now(),"
             " NULL, 0, -1, NULL);"
             "SELECT @S.checkpoint_put('t', '', 'c1', NULL, '{}', NULL, NULL, 1,"
             " ARRAY['messages'], ARRAY['c1'], ARRAY['convo/items'],"
             " ARRAY[decode('%s', 'hex')], now(), NULL)",
             U1, items);
    free(items);
    exec_in_schema(pg, schema_name(name), sql);
    s = open_ok(schema_url(name, NULL));
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema_name(name));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    /* version 15's function (35's since): the swaps in a loop (a write's in
     * its checkpoint's row since v24), each row they name updated once (v35) */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
             " WHERE n.nspname = '%s' AND p.proname = 'checkpoint_put_refs'"
             " AND p.prosrc LIKE '%%FOR i IN 1 .. n LOOP%%'"
             " AND p.prosrc LIKE '%%SET writes = w, vals = vs%%'",
             schema_name(name));
    ck_assert_int_eq(query_long(pg, sql), 1);
    write_answer(s, "c1");
    const char *both[] = {U1, A1};
    ck_assert_msg(put_items(s, "c2", "c1", both, NULL, 2, 0, &err) == 0, "%s", err.message);
    ck_assert_int_eq(write_seq(s, "c1"), 1);
    ck_assert_int_eq(log_length_of(pg, name, "c1"), 2);
    ck_assert_int_eq(length_of(s, "t"), 2);
    convo_close(s);
    PQfinish(pg);
    drop_schema(name);
}

START_TEST(test_migration_from_version_13)
{
    migrate_and_put("v13", 13);
}
END_TEST

/* The text of drivers/postgres/FILE, malloc'd. */
char *statement_text(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", POSTGRES_SQL_DIR, file);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char *text = calloc(1, 1 << 16);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_gt(fread(text, 1, (1 << 16) - 1, f), 0);
    fclose(f);
    return text;
}

/* The latest checkpoint of a thread with thousands is read as one index entry
 * (a backward scan of checkpoints_by_ns_put under the thread), and a page of a
 * list as its own entries, in the generic plans the driver's prepared
 * statements get: the statements before read and sorted every checkpoint of
 * the thread, so each get and page grew with the conversation
 * (docs/postgres.md). */
START_TEST(test_latest_reads_one_checkpoint)
{
    const char *name = "latest", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put_checkpoint(s, "t", "c0");
    put_checkpoint(s, "u", "c0");
    PGconn *pg = admin();
    exec_in_schema(pg, schema,
                   "INSERT INTO @S.checkpoints (tid, put_seq, log_length, created_at, checkpoint_ns,"
                   " checkpoint_id, parent_id, body_type, metadata, channel_set, versions, body)"
                   " SELECT c.tid, c.put_seq + 2 * g, 0, c.created_at, '', @S.id_pack('c' || g),"
                   " NULL, c.body_type, c.metadata, c.channel_set, c.versions, c.body"
                   " FROM @S.checkpoints c, generate_series(1, 3000) g;"
                   " ANALYZE @S.checkpoints");
    char *latest = statement_text("checkpoint_latest.sql");
    char *prepare = malloc(strlen(latest) + 64);
    ck_assert_ptr_nonnull(prepare);
    sprintf(prepare, "PREPARE latest (text, text) AS %s", latest);
    exec_in_schema(pg, schema, "SET plan_cache_mode = force_generic_plan");
    exec_in_schema(pg, schema, prepare);
    PGresult *r = PQexec(pg, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
                             "EXECUTE latest('t', '')");
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
    static char plan[65536]; /* the listing's plan with its segments part (v42) */
    plan[0] = '\0';
    for (int i = 0; i < PQntuples(r); i++)
        snprintf(plan + strlen(plan), sizeof plan - strlen(plan), "%s\n", PQgetvalue(r, i, 0));
    PQclear(r);
    printf("postgres_refs: checkpoint_latest.sql at 3,001 checkpoints:\n%s", plan);
    ck_assert_msg(strstr(plan, "Index Scan Backward using checkpoints_by_ns_put on checkpoints k "
                               "(actual rows=1 loops=1)") != NULL, "not one index entry:\n%s", plan);
    ck_assert_msg(strstr(plan, "put_seq DESC") == NULL, "a sort by put_seq:\n%s", plan);
    /* a page of a list (thread, namespace, before, limit 10): ten index entries */
    char *list = statement_text("checkpoint_list.sql");
    char *prepare_list = malloc(strlen(list) + 128);
    ck_assert_ptr_nonnull(prepare_list);
    sprintf(prepare_list, "PREPARE page (text, text, text, text, int8, text, text, text) AS %s", list);
    exec_in_schema(pg, schema, prepare_list);
    r = PQexec(pg, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
                   "EXECUTE page('t', '', 'c2000', NULL, 10, 't', '', NULL)");
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
    plan[0] = '\0';
    for (int i = 0; i < PQntuples(r); i++)
        snprintf(plan + strlen(plan), sizeof plan - strlen(plan), "%s\n", PQgetvalue(r, i, 0));
    PQclear(r);
    printf("postgres_refs: checkpoint_list.sql, a page of 10 before c2000:\n%s", plan);
    ck_assert_msg(strstr(plan, "Index Scan Backward using checkpoints_by_ns_put on checkpoints k "
                               "(actual rows=10 loops=1)") != NULL, "not ten index entries:\n%s", plan);
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = "t";
    lo.checkpoint_ns = "";
    lo.before = "c2000";
    lo.limit = 3;
    convo_checkpoint_set *page = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &lo, &page, &err) == 0, "list: %s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(page), 3);
    ck_assert_str_eq(convo_checkpoint_id(convo_checkpoint_set_get(page, 0)), "c1999");
    ck_assert_str_eq(convo_checkpoint_id(convo_checkpoint_set_get(page, 2)), "c1997");
    convo_checkpoint_set_free(page);
    free(prepare_list);
    free(list);
    convo_checkpoint *cp = NULL;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", NULL, &cp, &err) == 0, "get: %s", err.message);
    ck_assert_str_eq(convo_checkpoint_id(cp), "c3000");
    convo_checkpoint_free(cp);
    free(prepare);
    free(latest);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* (v18) The put that turns c1's write into a reference raises c1's
 * log_length in place: log_length is in no index, so the update is HOT (no
 * index entry written). With checkpoints_by_log (v9-v17) none was. (v24) The
 * write itself, and its swap with the raise, are HOT updates of c1's row. */
START_TEST(test_raise_is_hot)
{
    const char *name = "hot", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    convo_error err;
    ck_assert_msg(put_items(s, "c1", NULL, &U1, NULL, 1, -1, &err) == 0, "%s", err.message);
    write_answer(s, "c1");
    const char *both[] = {U1, A1};
    ck_assert_msg(put_items(s, "c2", "c1", both, NULL, 2, -1, &err) == 0, "%s", err.message);
    convo_close(s); /* its session ends: its counts reach the statistics */
    PGconn *pg = admin();
    ck_assert_int_eq(log_length_of(pg, name, "c1"), 2);
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT n_tup_upd * 1000 + n_tup_hot_upd FROM pg_stat_user_tables"
             " WHERE schemaname = '%s' AND relname = 'checkpoints'", schema);
    long counts = 0;
    for (int i = 0; i < 100 && (counts = query_long(pg, sql)) == 0; i++)
        usleep(50000);
    /* (v24) c1's write is an update of its row too: two updates, both HOT */
    ck_assert_msg(counts == 2002, "updates * 1000 + HOT updates: %ld", counts);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* Version 15 replaced version 14's checkpoint_put_refs (same signature). */
START_TEST(test_migration_from_version_14)
{
    migrate_and_put("v14", 14);
}
END_TEST

void postgres_add_refs_tests(Suite *s)
{
    TCase *tc = tcase_create("refs");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_put_refs_fails_whole);
    tcase_add_test(tc, test_put_refs_generation_without_messages);
    tcase_add_test(tc, test_migration_from_version_13);
    tcase_add_test(tc, test_migration_from_version_14);
    tcase_add_test(tc, test_latest_reads_one_checkpoint);
    tcase_add_test(tc, test_raise_is_hot);
    suite_add_tcase(s, tc);
}
