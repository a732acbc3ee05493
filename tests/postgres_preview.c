/* postgres_preview.c — the thread row's copies of its last message and extra
 * (schema version 20, migrate-20.sql): every listing shape gives what a load
 * gives, whichever writer wrote last (the copies kept, cleared, or left behind
 * by a writer that does not keep them: an import), a page of small threads reads no
 * message or extra row, and the migration from version 19 fills the copies. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const USER_KEY[] = {"user_id", NULL};

static convo_store *open_keyed(const char *url)
{
    convo_store_opts o = CONVO_STORE_OPTS_INIT;
    o.indexed_keys = USER_KEY;
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open_ex(&s, url, &o, &err);
    ck_assert_msg(rc == 0, "open: %d %s", rc, err.message);
    return s;
}

static void append_ok(convo_store *s, const char *thread, const char *const *msgs, size_t n,
                      const char *key, int64_t expected)
{
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = key;
    o.expected_length = expected;
    convo_append_result r;
    convo_error err;
    int rc = convo_append(s, thread, msgs, NULL, n, &o, &r, &err);
    ck_assert_msg(rc == 0, "append %s: %d %s", thread, rc, err.message);
}

static void say(convo_store *s, const char *thread, const char *text)
{
    char msg[2048];
    snprintf(msg, sizeof msg, "{\"role\":\"user\",\"content\":\"%s\"}", text);
    const char *msgs[1] = {msg};
    append_ok(s, thread, msgs, 1, NULL, -1);
}

static void extra_ok(convo_store *s, const char *thread, const char *patch)
{
    convo_error err;
    int rc = convo_save_extra(s, thread, patch, &err);
    ck_assert_msg(rc == 0, "save_extra %s: %d %s", thread, rc, err.message);
}

static void rewrite_ok(convo_store *s, const char *thread, int64_t keep, const char *msg,
                       const char *key)
{
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.idempotency_key = key;
    convo_rewrite_result r;
    convo_error err;
    const char *msgs[1] = {msg};
    int rc = convo_replace_tail(s, thread, keep, msgs, NULL, msg ? 1 : 0, &o, &r, &err);
    ck_assert_msg(rc == 0, "rewrite %s: %d %s", thread, rc, err.message);
}

/* A checkpoint put that appends one message (through @S.append(), which
 * keeps the preview). */
static void put_with_message(convo_store *s, const char *thread, const char *id)
{
    convo_history *h;
    convo_error err;
    ck_assert_int_eq(convo_load(s, thread, NULL, &h, &err), 0);
    int64_t len = convo_history_length(h);
    convo_history_free(h);
    const char *msgs[1] = {"{\"role\":\"assistant\",\"content\":\"from a put\"}"};
    convo_checkpoint_in in = CONVO_CHECKPOINT_IN_INIT;
    in.thread_id = thread;
    in.checkpoint_id = id;
    in.messages = msgs;
    in.nmessages = 1;
    in.expected_length = len;
    in.log_length = len + 1;
    int rc = convo_checkpoint_put(s, &in, &err);
    ck_assert_msg(rc == 0, "put: %d %s", rc, err.message);
}

/* Every row of every page of (where, order) against the thread's load: the
 * same extra, length and last message, byte for byte; the number of rows. */
static size_t check_pages(convo_store *s, const char *where, int order)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.order = order;
    o.limit = 3;
    o.with_extra = 1;
    o.with_last_message = 1;
    char after[1024] = "";
    size_t rows = 0;
    for (;;) {
        o.after = after[0] ? after : NULL;
        convo_thread_page *p;
        convo_error err;
        int rc = convo_thread_list_ex(s, &o, &p, &err);
        ck_assert_msg(rc == 0, "list: %d %s", rc, err.message);
        for (size_t i = 0; i < convo_thread_page_count(p); i++, rows++) {
            const char *id = convo_thread_page_id(p, i);
            convo_history *h;
            ck_assert_int_eq(convo_load(s, id, NULL, &h, &err), 0);
            int64_t n = convo_history_length(h);
            ck_assert_int_eq(convo_thread_page_length(p, i), n);
            ck_assert_msg(strcmp(convo_thread_page_extra(p, i), convo_history_extra(h)) == 0,
                          "%s: extra %s, loaded %s", id, convo_thread_page_extra(p, i),
                          convo_history_extra(h));
            size_t got_len = 0, want_len = 0;
            const char *got = convo_thread_page_last_message(p, i, &got_len);
            const char *want = n > 0 ? convo_history_message(h, (size_t)n - 1, &want_len) : NULL;
            ck_assert_msg(!want == !got, "%s: last message %s, loaded %s", id,
                          got ? got : "none", want ? want : "none");
            ck_assert_msg(!want || (got_len == want_len && memcmp(got, want, got_len) == 0),
                          "%s: last message %.*s, loaded %.*s", id, (int)got_len, got,
                          (int)want_len, want);
            convo_history_free(h);
        }
        const char *next = convo_thread_page_next(p);
        if (next)
            snprintf(after, sizeof after, "%s", next);
        convo_thread_page_free(p);
        if (!next)
            return rows;
    }
}

static void check_every_shape(convo_store *s, size_t threads, size_t of_u1)
{
    const int orders[] = {CONVO_ORDER_RECENT, CONVO_ORDER_CREATED, CONVO_ORDER_ID};
    for (size_t k = 0; k < 3; k++) {
        ck_assert_uint_eq(check_pages(s, NULL, orders[k]), threads);
        ck_assert_uint_eq(check_pages(s, "{\"user_id\":\"u1\"}", orders[k]), of_u1);
        /* an undeclared key: the GIN shapes */
        ck_assert_uint_eq(check_pages(s, "{\"tag\":\"t\"}", orders[k]), of_u1);
    }
}

/* The threads whose row keeps a current preview, and those keeping the extra. */
static char *kept(PGconn *pg, const char *name, const char *which)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT string_agg(thread_id, ' ' ORDER BY thread_id) FROM \"%s\".threads"
             " WHERE %s", schema_name(name),
             strcmp(which, "preview") == 0 ? "preview_seq = length - 1 AND preview_gen = generation"
                                             " AND preview IS NOT NULL"
                                           : "extra_text IS NOT NULL");
    return query1(pg, sql);
}

static void assert_kept(PGconn *pg, const char *name, const char *which, const char *want)
{
    char *got = kept(pg, name, which);
    ck_assert_msg(got && strcmp(got, want) == 0, "%s kept by %s, want %s", which,
                  got ? got : "none", want);
    free(got);
}

/* Each writer, last, on a thread of user u1 (tag t): the pages show what a
 * load shows, and the row keeps the copies where the writer sets them. */
START_TEST(test_page_rows_agree_with_loads)
{
    const char *name = "preview";
    drop_schema(name);
    convo_store *s = open_keyed(schema_url(name, NULL));
    static const char *const ids[] = {"batch", "big", "bigx", "cond", "fork", "imported",
                                      "keyed", "noextra", "plain", "popped", "put", "redone",
                                      "wiped"};
    const size_t n = sizeof ids / sizeof *ids;
    for (size_t i = 0; i < n; i++)
        if (strcmp(ids[i], "fork") != 0 && strcmp(ids[i], "noextra") != 0) {
            extra_ok(s, ids[i], "{\"user_id\":\"u0\",\"tag\":\"t\"}");
            say(s, ids[i], "first");
            say(s, ids[i], "second");
            extra_ok(s, ids[i], "{\"user_id\":\"u1\"}"); /* moves it to u1's key */
        }
    const char *two[2] = {"{\"role\":\"user\",\"content\":\"b1\"}",
                          "{\"role\":\"assistant\",\"content\":\"b2\"}"};
    append_ok(s, "batch", two, 2, NULL, -1);
    char big[1500];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    say(s, "big", big); /* over 1,024 bytes: no preview */
    char patch[1100];
    snprintf(patch, sizeof patch, "{\"note\":\"%.1000s\"}", big);
    extra_ok(s, "bigx", patch); /* over 768 bytes of text: no copy */
    append_ok(s, "cond", two, 1, NULL, 2);
    append_ok(s, "keyed", two + 1, 1, "k1", -1);
    say(s, "noextra", "alone");
    say(s, "popped", "third");
    rewrite_ok(s, "popped", 2, "{\"role\":\"user\",\"content\":\"instead\"}", NULL);
    rewrite_ok(s, "redone", 1, "{\"role\":\"user\",\"content\":\"again\"}", "r1");
    say(s, "redone", "after"); /* an append after a rewrite keeps it again */
    rewrite_ok(s, "wiped", 0, NULL, NULL);
    put_with_message(s, "put", "c1");
    convo_error err;
    ck_assert_int_eq(convo_thread_fork(s, "plain", "fork", 1, &err), 0);

    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name), /* convo import continuing a thread */
        "SELECT @S.thread_import('imported', 2, ARRAY[convert_to("
        "'{\"role\":\"user\",\"content\":\"imported\"}', 'UTF8')], ARRAY['user'],"
        " ARRAY[now()], 0, NULL)");
    check_every_shape(s, n, n - 1);
    assert_kept(pg, name, "preview", "batch bigx cond keyed noextra plain put redone");
    assert_kept(pg, name, "extra",
                "batch big cond imported keyed noextra plain popped put redone wiped");
    /* the writers that left a copy behind write again: kept once more */
    say(s, "imported", "later");
    say(s, "popped", "later");
    extra_ok(s, "fork", "{\"user_id\":\"u1\",\"tag\":\"t\"}");
    check_every_shape(s, n, n - 1);
    assert_kept(pg, name, "preview",
                "batch bigx cond imported keyed noextra plain popped put redone");
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* idx_scan of an index of the schema (statistics as sent so far). */
static long index_scans(PGconn *pg, const char *name, const char *index)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = '%s'"
             " AND indexrelname = '%s'", schema_name(name), index);
    return query_long(pg, sql);
}

static long lookups_now(PGconn *pg, const char *name)
{
    PQclear(PQexec(pg, "SELECT pg_stat_clear_snapshot()"));
    return index_scans(pg, name, "messages_pkey") + index_scans(pg, name, "thread_extra_pkey");
}

/* A page of 20 in each order (activity on the key, creation, id) and one
 * load, from a store of its own whose statistics are sent when its session
 * ends: the lookups into messages_pkey and thread_extra_pkey they made (the
 * load's 2 show that the statistics arrived). */
static long lookups_of_pages(PGconn *pg, const char *name)
{
    long before = lookups_now(pg, name);
    convo_store *s = open_keyed(schema_url(name, "pool=1"));
    const int orders[] = {CONVO_ORDER_RECENT, CONVO_ORDER_CREATED, CONVO_ORDER_ID};
    convo_error err;
    for (size_t k = 0; k < 3; k++) {
        convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
        o.where_json = k == 0 ? "{\"user_id\":\"u1\"}" : NULL;
        o.order = orders[k];
        o.limit = 20;
        o.with_extra = 1;
        o.with_last_message = 1;
        convo_thread_page *p;
        ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
        ck_assert_uint_eq(convo_thread_page_count(p), 20);
        convo_thread_page_free(p);
    }
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "t00", NULL, &h, &err), 0);
    convo_history_free(h);
    convo_close(s);
    long after = before;
    for (int i = 0; i < 100 && after < before + 2; i++) {
        usleep(100 * 1000);
        after = lookups_now(pg, name);
    }
    return after - before;
}

/* Pages of threads whose rows keep both copies look up no message and no
 * extra; with the copies gone (NULL: a writer that does not keep them), each
 * row of each page looks both up. */
START_TEST(test_page_reads_only_thread_rows)
{
    const char *name = "preview_reads";
    drop_schema(name);
    convo_store *s = open_keyed(schema_url(name, NULL));
    for (int i = 0; i < 30; i++) {
        char id[16];
        snprintf(id, sizeof id, "t%02d", i);
        extra_ok(s, id, "{\"user_id\":\"u1\"}");
        say(s, id, "hello");
        say(s, id, "again");
    }
    convo_close(s);
    PGconn *pg = admin();
    ck_assert_int_eq(lookups_of_pages(pg, name), 2);
    exec_in_schema(pg, schema_name(name),
                   "UPDATE @S.threads SET preview = NULL, extra_text = NULL");
    ck_assert_int_ge(lookups_of_pages(pg, name), 2 + 3 * 20 * 2);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* A version 19 schema with threads (messages small and large, extras small
 * and large, none) is migrated on open: the copies filled where they fit,
 * and every page as a load shows it. */
START_TEST(test_migration_from_version_19)
{
    const char *name = "pv19";
    schema_at_version(name, 19);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name),
        "SELECT @S.index_keys(ARRAY['user_id']);\n"
        "DO $$ BEGIN FOR i IN 0..5 LOOP\n"
        "  IF i <> 5 THEN PERFORM @S.save_extra('v' || i, jsonb_build_object('user_id',\n"
        "      'u' || (i % 2), 'tag', 't', 'note', repeat('n', CASE WHEN i = 3 THEN 900\n"
        "      ELSE 1 END)), 1000000, timestamptz '2026-01-01' + i * interval '1 s', NULL);\n"
        "  END IF;\n"
        "  IF i <> 4 THEN PERFORM @S.append('v' || i, ARRAY[convert_to(format(\n"
        "      '{\"role\":\"user\",\"content\":\"%s\"}', repeat('m', CASE WHEN i = 1\n"
        "      THEN 2000 ELSE i END)), 'UTF8')], ARRAY['user'],\n"
        "      timestamptz '2026-01-01 00:01' + i * interval '1 s', NULL, -1, -1, NULL);\n"
        "  END IF;\n"
        "END LOOP; END $$;\n");
    convo_store *s = open_keyed(schema_url(name, NULL));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT max(version) FROM \"%s\".schema_version",
             schema_name(name));
    ck_assert_int_eq(query_long(pg, sql), PG_SCHEMA_VERSION);
    assert_kept(pg, name, "preview", "v0 v2 v3 v5");
    assert_kept(pg, name, "extra", "v0 v1 v2 v4 v5");
    ck_assert_uint_eq(check_pages(s, NULL, CONVO_ORDER_RECENT), 6);
    ck_assert_uint_eq(check_pages(s, NULL, CONVO_ORDER_ID), 6);
    ck_assert_uint_eq(check_pages(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT), 2);
    ck_assert_uint_eq(check_pages(s, "{\"tag\":\"t\"}", CONVO_ORDER_CREATED), 5);
    convo_close(s);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

void postgres_add_preview_tests(Suite *s)
{
    TCase *tc = tcase_create("preview");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_page_rows_agree_with_loads);
    tcase_add_test(tc, test_page_reads_only_thread_rows);
    tcase_add_test(tc, test_migration_from_version_19);
    suite_add_tcase(s, tc);
}
