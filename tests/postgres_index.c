/* postgres_index.c — the PostgreSQL driver's thread index (schema version 11)
 * beyond the conformance cases: the plan of each statement shape (EXPLAIN),
 * the index entries a page reads (not growing with the threads that do not
 * match), declared keys back-filled, escaped and refused, expired and staged
 * threads never listed, and the migration from version 10. */
#include "postgres.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const USER_ID[] = {"user_id", NULL};

static convo_store *open_keys(const char *url, const char *const *keys)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = keys;
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open_ex(&s, url, &so, &err);
    ck_assert_msg(rc == 0, "open: %d %s", rc, err.message);
    return s;
}

/* One page of the listing: its ids joined by spaces (caller frees). */
static char *page_ids(convo_store *s, const char *where, int order, int reverse, size_t limit)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.order = order;
    o.reverse = reverse;
    o.limit = limit;
    convo_thread_page *p;
    convo_error err;
    int rc = convo_thread_list_ex(s, &o, &p, &err);
    ck_assert_msg(rc == 0, "list %s: %d %s", where ? where : "-", rc, err.message);
    char *out = calloc(1, 1);
    for (size_t i = 0; i < convo_thread_page_count(p); i++) {
        const char *id = convo_thread_page_id(p, i);
        size_t len = strlen(out);
        out = realloc(out, len + strlen(id) + 2);
        sprintf(out + len, "%s%s", len ? " " : "", id);
    }
    convo_thread_page_free(p);
    return out;
}

static void assert_page(convo_store *s, const char *where, int order, int reverse, size_t limit,
                        const char *expected)
{
    char *got = page_ids(s, where, order, reverse, limit);
    ck_assert_msg(strcmp(got, expected) == 0, "where %s order %d reverse %d: got '%s', want '%s'",
                  where ? where : "-", order, reverse, got, expected);
    free(got);
}

/* 2,000 threads t0000..t1999 of 20 users (user_id u0..u19, i % 20), 1 s apart, each with
 * extra {"user_id", "n": i} and one message, written by the schema's own
 * functions (the driver's statements would take longer); then ANALYZE. */
static void fill_2000(PGconn *pg, const char *name)
{
    exec_in_schema(pg, schema_name(name),
                   "DO $$ BEGIN FOR i IN 0..1999 LOOP\n"
                   "  PERFORM @S.save_extra('t' || lpad(i::text, 4, '0'),\n"
                   "      jsonb_build_object('user_id', 'u' || (i % 20), 'n', i), 1000000,\n"
                   "      now() - interval '1 hour' + i * interval '1 s', NULL);\n"
                   "  PERFORM @S.append('t' || lpad(i::text, 4, '0'),\n"
                   "      ARRAY[convert_to('{\"role\":\"user\"}', 'UTF8')], ARRAY['user'],\n"
                   "      now() - interval '1 hour' + i * interval '1 s', NULL, -1, -1, NULL);\n"
                   "END LOOP; END $$;");
    char sql[256];
    snprintf(sql, sizeof sql, "VACUUM ANALYZE \"%s\".threads, \"%s\".thread_extra",
             schema_name(name), schema_name(name));
    free(query1(pg, sql));
}

/* ---------------------------------------------------------------- EXPLAIN */

static char *read_sql(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", POSTGRES_SQL_DIR, file);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char *text = calloc(1, 1 << 16);
    size_t got = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    ck_assert_uint_gt(got, 0);
    return text;
}

/* file with @S, @C, @D, @R and @K (key: a quoted literal, or NULL) put in, as
 * drivers/postgres/index.c does. */
static char *fill_file(const char *file, const char *schema, const char *column,
                       const char *direction, const char *relation, const char *key)
{
    char *text = read_sql(file), quoted[80];
    snprintf(quoted, sizeof quoted, "\"%s\"", schema);
    char *out = calloc(1, strlen(text) * 2 + 1024), *o = out;
    for (const char *p = text; *p; p++) {
        const char *with = NULL;
        if (p[0] == '@')
            with = p[1] == 'S' ? quoted : p[1] == 'C' ? column : p[1] == 'D' ? direction
                 : p[1] == 'R' ? relation : p[1] == 'K' ? key : NULL;
        if (with) {
            o += sprintf(o, "%s", with);
            p++;
        } else {
            *o++ = *p;
        }
    }
    free(text);
    return out;
}

/* The rows of sql (an EXPLAIN) as one text, a line each. */
static char *rows_text(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQresultErrorMessage(r));
    size_t len = 1;
    for (int i = 0; i < PQntuples(r); i++)
        len += strlen(PQgetvalue(r, i, 0)) + 1;
    char *text = calloc(1, len);
    for (int i = 0; i < PQntuples(r); i++)
        strcat(strcat(text, PQgetvalue(r, i, 0)), "\n");
    PQclear(r);
    return text;
}

/* The plan the driver's statement gets once PostgreSQL caches a generic one
 * (after five runs), as EXPLAIN (ANALYZE) text, printed for the log. */
static char *explain(PGconn *pg, const char *file, const char *schema, const char *column,
                     const char *direction, const char *relation, const char *key,
                     const char *params)
{
    char *sql = fill_file(file, schema, column, direction, relation, key);
    PQclear(PQexec(pg, "DEALLOCATE ALL"));
    PQclear(PQexec(pg, "SET plan_cache_mode = force_generic_plan"));
    char *prepare = malloc(strlen(sql) + 256);
    sprintf(prepare, "PREPARE shape (text, timestamptz, int8, bool, bool, text, bool) AS %s", sql);
    free(query1(pg, prepare));
    free(prepare);
    free(sql);
    char run[1024];
    snprintf(run, sizeof run, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE shape(%s)",
             params);
    char *plan = rows_text(pg, run);
    printf("postgres_index: %s %s %s:\n%s", file, column, direction, plan);
    return plan;
}

static void assert_plan(const char *plan, const char *has, const char *has_not)
{
    ck_assert_msg(strstr(plan, has) != NULL, "no '%s' in the plan:\n%s", has, plan);
    ck_assert_msg(!has_not || strstr(plan, has_not) == NULL, "'%s' in the plan:\n%s", has_not,
                  plan);
}

/* Every shape's plan at 2,000 threads: an ordered index scan that stops at the
 * page (no sort) without a filter and on a declared key; the GIN index for
 * other wheres. */
START_TEST(test_index_plans)
{
    const char *name = "ixplan", *schema = schema_name("ixplan");
    convo_store *s = open_keys(schema_url(name, NULL), USER_ID);
    PGconn *pg = admin();
    fill_2000(pg, name);
    const char *first = "'', 'infinity', 21, true, true, NULL, true";
    /* (v17) the activity order: the first 21 by listed_at, then the index from
     * the cursor to less than one window past them (the threads are 1 s apart:
     * the same 21), sorted by updated_at; (v20) the extras and last messages
     * of the 21 from their rows' copies, not looked up */
    char *plan = explain(pg, "thread_list_recent.sql", schema, "", "", "", "NULL", first);
    assert_plan(plan, "Index Scan Backward using threads_by_listed", NULL);
    assert_plan(plan, "Index Scan using threads_by_listed on threads t (actual rows=21 loops=1)",
                NULL);
    assert_plan(plan, "SubPlan 1\n    ->  Index Scan using thread_extra_pkey on thread_extra x "
                "(never executed)", NULL);
    assert_plan(plan, "SubPlan 2\n    ->  Index Scan using messages_pkey on messages m "
                "(never executed)", NULL);
    free(plan);
    plan = explain(pg, "thread_list_all.sql", schema, "created_at", "ASC", ">", "NULL",
                   "'t0100', '-infinity', 21, false, false, NULL, true");
    assert_plan(plan, "Index Scan using threads_by_created", "Sort");
    free(plan);
    plan = explain(pg, "thread_list_id_all.sql", schema, "thread_id", "ASC", ">", "NULL",
                   "'t1500', NULL, 21, false, false, NULL, true");
    assert_plan(plan, "Index Scan using threads_pkey", "Sort");
    assert_plan(plan, "Index Cond: (thread_id > ", NULL);
    free(plan);
    plan = explain(pg, "thread_list_recent.sql", schema, "", "", "", "'user_id'",
                   "'', 'infinity', 21, false, true, '{\"user_id\":\"u7\"}', true");
    assert_plan(plan, "Index Scan Backward using threads_by_key_1", NULL);
    assert_plan(plan, "Index Scan using threads_by_key_1 on threads t (actual rows=21 loops=1)",
                NULL);
    free(plan);
    plan = explain(pg, "thread_list_match.sql", schema, "updated_at", "DESC", "<", "NULL",
                   "'', 'infinity', 21, true, false, '{\"n\":7}', false");
    assert_plan(plan, "Function Scan on threads_matching", NULL);
    assert_plan(plan, "Index Scan using threads_tid_key", NULL);
    free(plan);
    /* inside @S.threads_matching(), with its settings: the GIN index */
    free(query1(pg, "SET enable_seqscan = off"));
    free(query1(pg, "SET enable_indexscan = off"));
    char sql[512];
    snprintf(sql, sizeof sql, "EXPLAIN SELECT x.tid FROM \"%s\".thread_extra x"
             " WHERE x.extra @> '{\"n\":7}'", schema);
    char *inner = rows_text(pg, sql);
    assert_plan(inner, "Bitmap Index Scan on thread_extra_contains", NULL);
    free(inner);
    snprintf(sql, sizeof sql, "SELECT proconfig::text FROM pg_proc WHERE proname ="
             " 'threads_matching' AND pronamespace = '\"%s\"'::regnamespace", schema);
    inner = query1(pg, sql);
    ck_assert_str_eq(inner, "{enable_seqscan=off,enable_indexscan=off}");
    free(inner);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* ------------------------------------------------------------ index reads */

/* A counter of the statistics views for schema `name`: column col of view
 * (pg_stat_user_indexes by indexrelname, pg_stat_user_tables by relname). */
static long stat_of(PGconn *pg, const char *name, const char *view, const char *col,
                    const char *rel)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT coalesce(%s, 0) FROM %s WHERE schemaname = '%s' AND %s = '%s'",
             col, view, schema_name(name), strcmp(view, "pg_stat_user_tables") ? "indexrelname"
                                                                             : "relname", rel);
    return query_long(pg, sql);
}

typedef struct reads {
    long scans, entries, threads_seq, extra_seq;
} reads;

static reads reads_of(PGconn *pg, const char *name, const char *index)
{
    reads r = {stat_of(pg, name, "pg_stat_user_indexes", "idx_scan", index),
               stat_of(pg, name, "pg_stat_user_indexes", "idx_tup_read", index),
               stat_of(pg, name, "pg_stat_user_tables", "seq_scan", "threads"),
               stat_of(pg, name, "pg_stat_user_tables", "seq_scan", "thread_extra")};
    return r;
}

/* What one page of 20 (in a store of its own, closed after it so that its
 * session reports its statistics) read: scans and entries of `index`, and
 * sequential scans of threads and thread_extra. */
static reads one_page(PGconn *pg, const char *name, const char *where, int order,
                      const char *index, const char *expected)
{
    reads before = reads_of(pg, name, index), after;
    convo_store *s = open_ok(schema_url(name, "pool=1"));
    assert_page(s, where, order, 0, 20, expected);
    convo_close(s);
    for (int i = 0; i < 100; i++) {
        after = reads_of(pg, name, index);
        if (after.scans > before.scans)
            break;
        usleep(100 * 1000);
    }
    reads d = {after.scans - before.scans, after.entries - before.entries,
               after.threads_seq - before.threads_seq, after.extra_seq - before.extra_seq};
    printf("postgres_index: where %s order %d: %ld scans of %s, %ld entries; sequential scans:"
           " threads %ld, thread_extra %ld\n", where ? where : "-", order, d.scans, index,
           d.entries, d.threads_seq, d.extra_seq);
    ck_assert_msg(d.scans >= 1, "%s not used", index);
    ck_assert_msg(d.threads_seq == 0 && d.extra_seq == 0, "a sequential scan");
    return d;
}

/* The ids t(first), t(first - step), ... n of them, joined by spaces. */
static char *ids_down(int first, int step, int n)
{
    char *out = calloc(1, (size_t)n * 6 + 1);
    for (int i = 0; i < n; i++)
        sprintf(out + strlen(out), "%st%04d", i ? " " : "", first - i * step);
    return out;
}

/* At 2,000 threads, a page of 20 reads about 20 index entries (21: one more
 * says whether a next page exists), whatever the order, and with a where on
 * the declared key; the GIN index finds the matching threads of any other
 * where. No sequential scan of threads or extras. */
START_TEST(test_index_page_reads_only_the_page)
{
    const char *name = "ixread";
    convo_store *s = open_keys(schema_url(name, NULL), USER_ID);
    convo_close(s);
    PGconn *filler = admin();
    fill_2000(filler, name);
    PQfinish(filler);
    usleep(300 * 1000); /* its statistics reach the views */
    PGconn *pg = admin();
    char *newest = ids_down(1999, 1, 20), *u7 = ids_down(1987, 20, 20);
    reads d = one_page(pg, name, NULL, CONVO_ORDER_RECENT, "threads_by_listed", newest);
    ck_assert_int_le(d.entries, 44); /* 21 twice, and the 1-2 within one window */
    d = one_page(pg, name, NULL, CONVO_ORDER_CREATED, "threads_by_created", newest);
    ck_assert_int_le(d.entries, 42);
    d = one_page(pg, name, NULL, CONVO_ORDER_ID, "threads_pkey",
                 "t0000 t0001 t0002 t0003 t0004 t0005 t0006 t0007 t0008 t0009 t0010 t0011"
                 " t0012 t0013 t0014 t0015 t0016 t0017 t0018 t0019");
    ck_assert_int_le(d.entries, 42);
    d = one_page(pg, name, "{\"user_id\":\"u7\"}", CONVO_ORDER_RECENT, "threads_by_key_1", u7);
    ck_assert_int_le(d.entries, 44); /* of u7's 100 threads, of 2,000 */
    one_page(pg, name, "{\"user_id\":\"u7\"}", CONVO_ORDER_CREATED, "thread_extra_contains", u7);
    one_page(pg, name, "{\"n\":1987}", CONVO_ORDER_RECENT, "thread_extra_contains", "t1987");
    free(newest);
    free(u7);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* ------------------------------------------------------------ declared keys */

/* Keys declared on a store that has threads already: their values are filled
 * in from every extra and indexed; a scalar of the key is found by the key's
 * index (numbers by value), anything else by containment; a key that needs
 * quoting in SQL works; another declaration is refused, naming both. */
START_TEST(test_index_keys_declared_late)
{
    const char *name = "ixlate";
    const char *const odd[] = {"o'k\\x", "user_id", NULL};
    convo_store *s = open_ok(schema_url(name, NULL));
    convo_error err;
    ck_assert_int_eq(convo_save_extra(s, "a", "{\"user_id\":\"u1\"}", &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "b", "{\"user_id\":[\"u1\"],\"o'k\\\\x\":1}", &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "c", "{\"user_id\":\"u2\"}", &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "d", "{\"user_id\":1}", &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "e", "{\"user_id\":\"u1\",\"x\":true}", &err), 0);
    /* this store declared no keys: its first page reads the ones recorded by then */
    convo_store *late = open_keys(schema_url(name, NULL), odd);
    assert_page(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 10, "e a");
    convo_close(s);
    PGconn *pg = admin();
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(thread_id || '=' || coalesce(keyvals::text, '-'),"
             " ' ' ORDER BY thread_id) FROM \"%s\".threads", schema_name(name));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, "a={\"user_id\": \"u1\"} b={\"o'k\\\\x\": 1, \"user_id\": [\"u1\"]} "
                        "c={\"user_id\": \"u2\"} d={\"user_id\": 1} e={\"user_id\": \"u1\"}");
    free(v);
    snprintf(sql, sizeof sql, "SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes"
             " WHERE schemaname = '%s' AND indexname LIKE 'threads_by_key_%%'", schema_name(name));
    v = query1(pg, sql);
    ck_assert_str_eq(v, "threads_by_key_1 threads_by_key_2");
    free(v);
    assert_page(late, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 10, "e a");
    assert_page(late, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 1, 10, "a e");
    assert_page(late, "{\"user_id\":\"u1\",\"x\":true}", CONVO_ORDER_RECENT, 0, 10, "e");
    assert_page(late, "{\"user_id\":[\"u1\"]}", CONVO_ORDER_RECENT, 0, 10, "b");
    assert_page(late, "{\"user_id\":1.0}", CONVO_ORDER_RECENT, 0, 10, "d");
    assert_page(late, "{\"o'k\\\\x\":1}", CONVO_ORDER_RECENT, 0, 10, "b");
    assert_page(late, "{\"user_id\":\"u1\"}", CONVO_ORDER_ID, 1, 10, "e a");
    /* a save_extra moves a thread between the key's values; a fork copies them */
    ck_assert_int_eq(convo_save_extra(late, "c", "{\"user_id\":\"u1\"}", &err), 0);
    ck_assert_int_eq(convo_thread_fork(late, "c", "f", -1, &err), 0);
    assert_page(late, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 10, "f c e a");
    assert_page(late, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, 0, 10, "");
    convo_close(late);
    /* other keys: refused, nothing recorded */
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = USER_ID;
    s = NULL;
    ck_assert_int_eq(convo_open_ex(&s, schema_url(name, NULL), &so, &err), CONVO_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.message, "o'k\\x, user_id") && strstr(err.message, "declares user_id"),
                  "%s", err.message);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".indexed_keys", schema_name(name));
    ck_assert_int_eq(query_long(pg, sql), 2);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* An opener that declares no keys runs no index_keys.sql at open (a saver that
 * lists no threads pays nothing for the index): its first page reads the
 * recorded keys, and a page that could not read them fails and leaves the next
 * one to try again. One that declares keys records or checks them at open. */
START_TEST(test_index_keys_read_by_the_first_page)
{
    const char *name = "ixfirst";
    convo_store *s = open_keys(schema_url(name, NULL), USER_ID);
    convo_error err;
    ck_assert_int_eq(convo_save_extra(s, "a", "{\"user_id\":\"u1\"}", &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "b", "{\"user_id\":\"u2\"}", &err), 0);
    convo_close(s);
    PGconn *pg = admin();
    const char *revoke = "REVOKE EXECUTE ON FUNCTION @S.index_keys(text[]) FROM PUBLIC, CURRENT_USER";
    exec_in_schema(pg, schema_name(name), revoke);
    s = open_ok(schema_url(name, NULL)); /* failed here when the keys were read at open */
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = "{\"user_id\":\"u1\"}";
    convo_thread_page *page = NULL;
    ck_assert_int_ne(convo_thread_list_ex(s, &o, &page, &err), 0);
    ck_assert_ptr_null(page);
    ck_assert_msg(strcmp(err.backend_code, "42501") == 0, "%s %s", err.backend_code, err.message);
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = USER_ID;
    convo_store *declaring = NULL;
    ck_assert_int_ne(convo_open_ex(&declaring, schema_url(name, NULL), &so, &err), 0);
    ck_assert_ptr_null(declaring);
    exec_in_schema(pg, schema_name(name),
                   "GRANT EXECUTE ON FUNCTION @S.index_keys(text[]) TO PUBLIC, CURRENT_USER");
    assert_page(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 10, "a");
    assert_page(s, NULL, CONVO_ORDER_ID, 0, 10, "a b");
    convo_close(s);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

typedef struct declaring {
    const char *url;
    int rc;
    convo_error err;
} declaring;

static void *declare_keys(void *arg)
{
    declaring *d = arg;
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = USER_ID;
    convo_store *s = NULL;
    d->rc = convo_open_ex(&s, d->url, &so, &d->err);
    convo_close(s);
    return NULL;
}

/* The first declaration waits for a writer that holds a thread row and has
 * yet to write the extra (as save_extra does, in that order), instead of
 * taking thread_extra first and then waiting for that row: a deadlock, one of
 * the two undone. The extra the writer committed is filled in. */
START_TEST(test_index_declaration_waits_for_writers)
{
    const char *name = "ixdecl";
    char app[64], more[128];
    snprintf(app, sizeof app, "pgx_decl_%08x", run_id);
    snprintf(more, sizeof more, "application_name=%s", app);
    convo_store *s = open_ok(schema_url(name, NULL));
    convo_error err;
    ck_assert_int_eq(convo_save_extra(s, "t", "{\"user_id\":\"u1\"}", &err), 0);
    convo_close(s);
    PGconn *writer = admin();
    free(query1(writer, "BEGIN"));
    exec_in_schema(writer, schema_name(name),
                   "UPDATE @S.threads SET updated_at = now() WHERE thread_id = 't'");
    declaring d = {schema_url(name, more), -1, {0}};
    pthread_t th;
    pthread_create(&th, NULL, declare_keys, &d);
    wait_for_lock_wait(app);
    exec_in_schema(writer, schema_name(name),
                   "UPDATE @S.thread_extra SET extra = extra || '{\"user_id\": \"u2\"}'");
    free(query1(writer, "COMMIT"));
    pthread_join(th, NULL);
    ck_assert_msg(d.rc == 0, "declaring: %d %s", d.rc, d.err.message);
    s = open_ok(schema_url(name, NULL));
    assert_page(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, 0, 10, "t");
    assert_page(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 10, "");
    convo_close(s);
    PQfinish(writer);
    drop_schema(name);
}
END_TEST

/* Expired and staged (convo import's .convo-import-*) threads are never
 * listed, by any shape; a deleted one is gone from every index. */
START_TEST(test_index_skips_expired_staged_deleted)
{
    const char *name = "ixskip";
    convo_store *s = open_keys(schema_url(name, NULL), USER_ID);
    convo_error err;
    const char *ids[] = {"live", "dead", ".convo-import-0123456789abcdef", "gone"};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(convo_save_extra(s, ids[i], "{\"user_id\":\"u\",\"n\":1}", &err), 0);
        ck_assert_int_eq(append1(s, ids[i], &err), 0);
    }
    ck_assert_int_eq(convo_thread_delete(s, "gone", &err), 0);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name), "UPDATE @S.threads SET expires_at = now() - "
                   "interval '1 s' WHERE thread_id = 'dead'");
    for (int order = CONVO_ORDER_RECENT; order <= CONVO_ORDER_ID; order++)
        for (int reverse = 0; reverse <= 1; reverse++) {
            assert_page(s, NULL, order, reverse, 10, "live");
            assert_page(s, "{\"user_id\":\"u\"}", order, reverse, 10, "live");
            assert_page(s, "{\"n\":1}", order, reverse, 10, "live");
        }
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A cursor's time that PostgreSQL cannot hold (the core accepts any 64-bit
 * value) is CONVO_EINVAL, found by the driver (it would wrap around when
 * moved to PostgreSQL's epoch) or by the server (out of its range). */
START_TEST(test_index_cursor_time_out_of_range)
{
    const char *name = "ixcursor";
    convo_store *s = open_ok(schema_url(name, NULL));
    convo_error err;
    ck_assert_int_eq(append1(s, "t", &err), 0);
    const char *bad[] = {"r0:8000000000000000:t", "c1:8000000000000001:t",
                         "r0:fbd62f96e7620000:t", NULL}; /* the last: about 9,500 years BC */
    for (int i = 0; bad[i]; i++) {
        convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
        o.order = bad[i][0] == 'c' ? CONVO_ORDER_CREATED : CONVO_ORDER_RECENT;
        o.reverse = bad[i][1] == '1';
        o.after = bad[i];
        convo_thread_page *p = NULL;
        ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), CONVO_EINVAL);
        ck_assert_ptr_null(p);
    }
    /* the id order ignores the time; the store still works */
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.order = CONVO_ORDER_ID;
    o.after = "i0:8000000000000000:s";
    convo_thread_page *p;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    ck_assert_uint_eq(convo_thread_page_count(p), 1);
    convo_thread_page_free(p);
    assert_page(s, NULL, CONVO_ORDER_RECENT, 0, 10, "t");
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* ------------------------------------------------------------ migration */

/* What a version 10 store held, written by its own functions: "a" (two
 * messages, an extra, two checkpoints), "b" (an extra only), "dead" (expired). */
static const char v10_data[] =
    "SELECT @S.append('a', ARRAY[convert_to('{\"role\":\"user\",\"n\":0}', 'UTF8'),\n"
    "    convert_to('{\"role\":\"assistant\",\"n\":1}', 'UTF8')], ARRAY['user', 'assistant'],\n"
    "    '2026-01-02 03:04:05+00', 'k1', -1, -1, NULL);\n"
    "SELECT @S.save_extra('a', '{\"k\": 1, \"s\": \"x\"}', 100000, NULL);\n"
    "SELECT @S.checkpoint_put('a', '', 'c1', NULL, '{}', NULL, NULL, 1, '{}', '{}', '{}', '{}',\n"
    "    '2026-01-02 03:04:07+00', NULL);\n"
    "SELECT @S.checkpoint_put('a', '', 'c2', NULL, '{}', NULL, NULL, 2, '{}', '{}', '{}', '{}',\n"
    "    '2026-01-02 03:04:09+00', NULL);\n"
    "SELECT @S.save_extra('b', '{\"k\": 2}', 100000, NULL);\n"
    "SELECT @S.append('dead', ARRAY[convert_to('{\"role\":\"user\"}', 'UTF8')], ARRAY['user'],\n"
    "    now(), NULL, -1, -1, interval '1 hour');\n"
    "UPDATE @S.threads SET expires_at = now() - interval '1 s' WHERE thread_id = 'dead';\n"
    /* as a store whose puts never moved updated_at (versions 2 and 3) */
    "UPDATE @S.threads SET created_at = '2026-01-02 03:04:05+00',\n"
    "    updated_at = '2026-01-02 03:04:05+00' WHERE thread_id = 'a';\n";

static int64_t micros_of(PGconn *pg, const char *timestamp)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT (extract(epoch FROM timestamptz '%s') * 1000000)::int8",
             timestamp);
    return (int64_t)query_long(pg, sql);
}

/* A version 10 schema with data is migrated on open: created_at kept,
 * updated_at raised to the last checkpoint where it was older, the indexes
 * built, and the keys the opener declares filled in from the extras. */
START_TEST(test_migration_from_version_10)
{
    const char *name = "ixv10";
    schema_at_version(name, 10);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name), v10_data);
    const char *const k[] = {"k", NULL};
    convo_store *s = open_keys(schema_url(name, NULL), k);
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT max(version) FROM \"%s\".schema_version", schema_name(name));
    ck_assert_int_eq(query_long(pg, sql), PG_SCHEMA_VERSION);
    assert_page(s, NULL, CONVO_ORDER_RECENT, 0, 10, "b a");
    assert_page(s, NULL, CONVO_ORDER_ID, 0, 10, "a b");
    assert_page(s, "{\"k\":1}", CONVO_ORDER_RECENT, 0, 10, "a");
    assert_page(s, "{\"k\":2}", CONVO_ORDER_CREATED, 0, 10, "b");
    assert_page(s, "{\"s\":\"x\"}", CONVO_ORDER_RECENT, 0, 10, "a");
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.order = CONVO_ORDER_ID;
    o.limit = 1;
    o.with_last_message = 1;
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    ck_assert_str_eq(convo_thread_page_id(p, 0), "a");
    ck_assert_int_eq(convo_thread_page_created_at(p, 0), micros_of(pg, "2026-01-02 03:04:05+00"));
    ck_assert_int_eq(convo_thread_page_updated_at(p, 0), micros_of(pg, "2026-01-02 03:04:09+00"));
    ck_assert_int_eq(convo_thread_page_length(p, 0), 2);
    ck_assert_str_eq(convo_thread_page_last_message(p, 0, NULL), "{\"role\":\"assistant\",\"n\":1}");
    convo_thread_page_free(p);
    snprintf(sql, sizeof sql, "SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes"
             " WHERE schemaname = '%s' AND indexname IN ('threads_by_updated',"
             " 'threads_by_created', 'thread_extra_contains', 'threads_by_key_1',"
             " 'threads_by_listed')", schema_name(name));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, "thread_extra_contains threads_by_created threads_by_key_1 "
                        "threads_by_listed");
    free(v);
    /* (v17) the key's index orders by listed_at */
    snprintf(sql, sizeof sql, "SELECT indexdef FROM pg_indexes WHERE schemaname = '%s'"
             " AND indexname = 'threads_by_key_1'", schema_name(name));
    v = query1(pg, sql);
    ck_assert_msg(strstr(v, "((keyvals -> 'k'::text)), listed_at, thread_id)") != NULL,
                  "%s", v);
    free(v);
    /* a write after the migration moves the thread to the front */
    ck_assert_int_eq(append1(s, "a", &err), 0);
    assert_page(s, NULL, CONVO_ORDER_RECENT, 0, 10, "a b");
    convo_close(s);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* ------------------------------------------------------- the listed_at window */

/* Every page of a walk in the given order (limit 3 a page), ids joined by
 * spaces, following convo_thread_page_next. */
static char *walk_ids(convo_store *s, const char *where, int reverse)
{
    char *out = calloc(1, 1), *after = NULL;
    for (;;) {
        convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
        o.where_json = where;
        o.reverse = reverse;
        o.limit = 3;
        o.after = after;
        convo_thread_page *p;
        convo_error err;
        int rc = convo_thread_list_ex(s, &o, &p, &err);
        ck_assert_msg(rc == 0, "list: %d %s", rc, err.message);
        for (size_t i = 0; i < convo_thread_page_count(p); i++) {
            const char *id = convo_thread_page_id(p, i);
            size_t len = strlen(out);
            out = realloc(out, len + strlen(id) + 2);
            sprintf(out + len, "%s%s", len ? " " : "", id);
        }
        free(after);
        after = convo_thread_page_next(p) ? strdup(convo_thread_page_next(p)) : NULL;
        convo_thread_page_free(p);
        if (!after)
            return out;
    }
}

/* The ids in exact activity order, read from the table: newest first, or
 * oldest first with reverse; only user's when user is not NULL. */
static char *exact_ids(PGconn *pg, const char *name, const char *user, int reverse)
{
    char sql[512];
    const char *dir = reverse ? "ASC" : "DESC";
    snprintf(sql, sizeof sql, "SELECT string_agg(thread_id, ' ' ORDER BY updated_at %s,"
             " thread_id %s) FROM \"%s\".threads WHERE %s%s%s", dir, dir, schema_name(name),
             user ? "keyvals ->> 'user_id' = '" : "true", user ? user : "", user ? "'" : "");
    return query1(pg, sql);
}

/* (v17) The indexes order threads by listed_at, which trails updated_at by
 * less than one window (1 s): 60 threads of two users whose times lie within
 * about 3 s, each listed_at up to 0.99 s behind its updated_at (as writes
 * inside the window leave them), four of them at one same time. Walked 3 a
 * page, both ways, with and without the key, every walk is the exact order of
 * (updated_at, thread_id); a statement that ordered by listed_at, or read
 * less than one window past its first rows, loses or misplaces threads. */
START_TEST(test_activity_pages_exact_within_window)
{
    const char *name = "ixwin";
    convo_store *s = open_keys(schema_url(name, NULL), USER_ID);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name),
        "DO $$ BEGIN FOR i IN 0..59 LOOP\n"
        "  PERFORM @S.save_extra('w' || lpad(i::text, 2, '0'),\n"
        "      jsonb_build_object('user_id', 'u' || (i % 2)), 1000000, now(), NULL);\n"
        "END LOOP; END $$;\n"
        "UPDATE @S.threads t SET updated_at = v.u, listed_at = v.u - v.lag\n"
        "  FROM (SELECT thread_id, timestamptz '2026-01-01 00:00:00+00'\n"
        "               + (hashtext(thread_id) & 2047) * interval '1.5 ms' AS u,\n"
        "               (hashtext(thread_id || 'lag') & 1023) * interval '0.967 ms' AS lag\n"
        "          FROM @S.threads) v WHERE v.thread_id = t.thread_id;\n"
        "UPDATE @S.threads t SET updated_at = timestamptz '2026-01-01 00:00:01.5+00',\n"
        "    listed_at = timestamptz '2026-01-01 00:00:01.5+00' - CASE t.thread_id\n"
        "    WHEN 'w10' THEN interval '0.9 s' WHEN 'w11' THEN interval '0 s'\n"
        "    WHEN 'w13' THEN interval '0.5 s' ELSE interval '0.2 s' END\n"
        " WHERE t.thread_id IN ('w10', 'w11', 'w13', 'w16');\n");
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".threads WHERE listed_at < updated_at"
             " AND updated_at < listed_at + interval '1 s'", schema_name(name));
    ck_assert_int_ge(query_long(pg, sql), 55); /* the window is used, and kept */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".threads WHERE NOT (listed_at <="
             " updated_at AND updated_at < listed_at + interval '1 s')", schema_name(name));
    ck_assert_int_eq(query_long(pg, sql), 0);
    const char *users[] = {NULL, "u0", "u1"};
    for (int u = 0; u < 3; u++)
        for (int reverse = 0; reverse <= 1; reverse++) {
            char where[64];
            snprintf(where, sizeof where, "{\"user_id\":\"%s\"}", users[u] ? users[u] : "");
            char *want = exact_ids(pg, name, users[u], reverse);
            char *got = walk_ids(s, users[u] ? where : NULL, reverse);
            ck_assert_msg(strcmp(got, want) == 0, "user %s reverse %d:\n got  %s\n want %s",
                          users[u] ? users[u] : "-", reverse, got, want);
            free(got);
            free(want);
        }
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* Whether thread t's listed_at is its updated_at (1), that time's whole
 * second (2: an append's), within the window behind it (0), or neither (-1:
 * the order would lose it). */
static int listed_state(PGconn *pg, const char *name, const char *t)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT CASE WHEN listed_at = updated_at THEN 1"
             " WHEN listed_at = date_trunc('second', updated_at) THEN 2"
             " WHEN listed_at < updated_at AND updated_at < listed_at + interval '1 s' THEN 0"
             " ELSE -1 END FROM \"%s\".threads WHERE thread_id = '%s'", schema_name(name), t);
    return (int)query_long(pg, sql);
}

/* An append moved t's listed_at to its time's second (exactly its time
 * when that falls on a whole second). */
static int append_listed(PGconn *pg, const char *name, const char *t)
{
    int state = listed_state(pg, name, t);
    return state == 1 || state == 2;
}

/* Puts thread t's times an hour back (listed_at = updated_at), as a thread
 * last written long ago. */
static void age(PGconn *pg, const char *name, const char *t)
{
    char sql[512];
    snprintf(sql, sizeof sql, "UPDATE \"%s\".threads SET updated_at = now() - interval '1 h',"
             " listed_at = now() - interval '1 h' WHERE thread_id = '%s'", schema_name(name), t);
    free(query1(pg, sql));
}

/* (v17) Every writer that sets updated_at keeps listed_at within the window:
 * after each kind of write to a thread last written an hour ago, listed_at
 * is the write's time (the thread moves to the front of the order), or for
 * the append statements that time's whole second; a second append right
 * after leaves listed_at within the window. */
START_TEST(test_writers_keep_the_listed_window)
{
    const char *name = "ixwriters";
    convo_store *s = open_keys(schema_url(name, NULL), USER_ID);
    PGconn *pg = admin();
    convo_error err;
    const char *m[] = {"{\"role\":\"user\"}", "{\"role\":\"assistant\"}"};
    ck_assert_int_eq(append1(s, "t", &err), 0);
    age(pg, name, "t");
    ck_assert_int_eq(append1(s, "t", &err), 0); /* append_plain.sql */
    ck_assert(append_listed(pg, name, "t"));
    ck_assert_int_eq(append1(s, "t", &err), 0);
    ck_assert_int_ne(listed_state(pg, name, "t"), -1);
    age(pg, name, "t");
    ck_assert_int_eq(convo_append(s, "t", m, NULL, 2, NULL, NULL, &err), 0); /* append_many */
    ck_assert(append_listed(pg, name, "t"));
    age(pg, name, "t");
    convo_append_opts cond = CONVO_APPEND_OPTS_INIT;
    cond.expected_length = 5; /* append_one.sql */
    ck_assert_int_eq(convo_append(s, "t", m, NULL, 1, &cond, NULL, &err), 0);
    ck_assert(append_listed(pg, name, "t"));
    age(pg, name, "t");
    convo_append_opts ao = CONVO_APPEND_OPTS_INIT;
    ao.idempotency_key = "k1"; /* @S.append(), thread_claim */
    ck_assert_int_eq(convo_append(s, "t", m, NULL, 1, &ao, NULL, &err), 0);
    ck_assert_int_eq(listed_state(pg, name, "t"), 1);
    age(pg, name, "t");
    ck_assert_int_eq(convo_save_extra(s, "t", "{\"user_id\":\"u1\"}", &err), 0);
    ck_assert_int_eq(listed_state(pg, name, "t"), 1);
    age(pg, name, "t");
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = "c1";
    cp.metadata_json = "{}";
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), 0);
    ck_assert_int_eq(listed_state(pg, name, "t"), 1);
    age(pg, name, "t");
    convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT; /* replace_tail_fast.sql */
    ck_assert_int_eq(convo_replace_tail(s, "t", 3, m, NULL, 1, &ro, NULL, &err), 0);
    ck_assert_int_eq(listed_state(pg, name, "t"), 1);
    age(pg, name, "t");
    ro.idempotency_key = "k2"; /* @S.replace_tail() */
    ck_assert_int_eq(convo_replace_tail(s, "t", 3, m, NULL, 1, &ro, NULL, &err), 0);
    ck_assert_int_eq(listed_state(pg, name, "t"), 1);
    ck_assert_int_eq(convo_thread_fork(s, "t", "f", -1, &err), 0); /* thread_fork */
    ck_assert_int_eq(listed_state(pg, name, "f"), 1);
    age(pg, name, "t");
    char sql[512]; /* @S.thread_import() of one more message */
    snprintf(sql, sizeof sql, "SELECT \"%s\".thread_import('t', length,"
             " ARRAY[convert_to('{\"role\":\"user\"}', 'UTF8')], ARRAY['user'], ARRAY[now()],"
             " generation, NULL)::text FROM \"%s\".threads WHERE thread_id = 't'",
             schema_name(name), schema_name(name));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, "false");
    free(v);
    ck_assert_int_eq(listed_state(pg, name, "t"), 1);
    /* and the listing has them newest first */
    assert_page(s, NULL, CONVO_ORDER_RECENT, 0, 10, "t f");
    assert_page(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 10, "t f");
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A version 16 schema whose keys were declared (threads_by_key_1 on
 * updated_at) is migrated on open: listed_at = updated_at for every thread,
 * threads_by_updated replaced by threads_by_listed, the key's index rebuilt
 * on listed_at, the listing as before; the next append is a HOT update. */
START_TEST(test_migration_from_version_16)
{
    const char *name = "ixv16";
    schema_at_version(name, 16);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name),
        "SELECT @S.index_keys(ARRAY['user_id']);\n"
        "DO $$ BEGIN FOR i IN 0..29 LOOP\n"
        "  PERFORM @S.save_extra('v' || lpad(i::text, 2, '0'),\n"
        "      jsonb_build_object('user_id', 'u' || (i % 3)), 1000000,\n"
        "      timestamptz '2026-01-01 00:00:00+00' + i * interval '0.1 s', NULL);\n"
        "END LOOP; END $$;\n");
    convo_store *s = open_keys(schema_url(name, NULL), USER_ID);
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT max(version) FROM \"%s\".schema_version", schema_name(name));
    ck_assert_int_eq(query_long(pg, sql), PG_SCHEMA_VERSION);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".threads WHERE listed_at = updated_at",
             schema_name(name));
    ck_assert_int_eq(query_long(pg, sql), 30);
    snprintf(sql, sizeof sql, "SELECT string_agg(indexname || ':' || (indexdef LIKE"
             " '%%listed_at, thread_id)')::text, ' ' ORDER BY indexname) FROM pg_indexes"
             " WHERE schemaname = '%s' AND indexname LIKE 'threads_by_%%'", schema_name(name));
    char *v = query1(pg, sql);
    /* (v26) no threads_by_expiry: no thread has a deadline */
    ck_assert_str_eq(v, "threads_by_created:false threads_by_key_1:true threads_by_listed:true");
    free(v);
    assert_page(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 4, "v28 v25 v22 v19");
    assert_page(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 1, 4, "v01 v04 v07 v10");
    assert_page(s, NULL, CONVO_ORDER_RECENT, 0, 3, "v29 v28 v27");
    convo_error err;
    ck_assert_int_eq(append1(s, "v04", &err), 0); /* creates nothing: v04 exists */
    ck_assert_int_eq(append1(s, "v04", &err), 0);
    ck_assert_int_eq(append1(s, "v04", &err), 0); /* two of the three in one second */
    assert_page(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 2, "v04 v28");
    convo_close(s); /* the session's statistics are sent when it ends */
    snprintf(sql, sizeof sql, "SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname"
             " = '%s' AND relname = 'threads'", schema_name(name));
    long hot = 0;
    for (int i = 0; i < 100 && (hot = query_long(pg, sql)) < 1; i++)
        usleep(100 * 1000);
    ck_assert_int_ge(hot, 1); /* an append within the second of the one before */
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

void postgres_add_index_tests(Suite *s)
{
    TCase *tc = tcase_create("index");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_index_plans);
    tcase_add_test(tc, test_index_page_reads_only_the_page);
    tcase_add_test(tc, test_index_keys_declared_late);
    tcase_add_test(tc, test_index_keys_read_by_the_first_page);
    tcase_add_test(tc, test_index_declaration_waits_for_writers);
    tcase_add_test(tc, test_index_skips_expired_staged_deleted);
    tcase_add_test(tc, test_index_cursor_time_out_of_range);
    tcase_add_test(tc, test_migration_from_version_10);
    tcase_add_test(tc, test_activity_pages_exact_within_window);
    tcase_add_test(tc, test_writers_keep_the_listed_window);
    tcase_add_test(tc, test_migration_from_version_16);
    suite_add_tcase(s, tc);
}
