/* redis-layout8.c — the Redis driver's layout 8 on one server (docs/redis.md,
 * "Layouts"): a thread's c, u and p live in its extra hash, which a page reads
 * whole. Stores written by this version are taken back to layout 7 by hand
 * (c, u and p in meta, P:store's v = 7) and opened again: the open moves them,
 * and the threads load, list and page as before.
 *
 *   tests/redis_layout8 redis://HOST:PORT PREFIX    (one server; 77 on a cluster) */
#include "redis_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Layout 7's place of a thread's times: c, u and p moved from the extra hash
 * into meta (a field the extra hash lacks stays absent). */
static void to_layout7(const char *prefix, const char *id)
{
    static const char *const f[] = {"c", "u", "p"};
    for (int i = 0; i < 3; i++) {
        redisReply *x = cmd("HGET %s:{%s}:extra %s", prefix, id, f[i]);
        if (x->type == REDIS_REPLY_STRING)
            freeReplyObject(cmd("HSET %s:{%s}:meta %s %s", prefix, id, f[i], x->str));
        freeReplyObject(x);
        freeReplyObject(cmd("HDEL %s:{%s}:extra %s", prefix, id, f[i]));
    }
}

typedef struct row {
    char id[16];
    long long created, updated, length;
    char extra[128], last[128];
} row;

/* The page of filter (NULL: every thread), newest first, into rows[]. */
static size_t page(convo_store *s, const char *filter, row *rows, size_t max)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = filter;
    o.limit = max;
    o.with_extra = 1;
    o.with_last_message = 1;
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    size_t n = convo_thread_page_count(p);
    for (size_t i = 0; i < n && i < max; i++) {
        size_t len;
        const char *x = convo_thread_page_extra(p, i), *m;
        snprintf(rows[i].id, sizeof rows[i].id, "%s", convo_thread_page_id(p, i));
        rows[i].created = convo_thread_page_created_at(p, i);
        rows[i].updated = convo_thread_page_updated_at(p, i);
        rows[i].length = convo_thread_page_length(p, i);
        snprintf(rows[i].extra, sizeof rows[i].extra, "%s", x ? x : "");
        m = convo_thread_page_last_message(p, i, &len);
        snprintf(rows[i].last, sizeof rows[i].last, "%.*s", m ? (int)len : 0, m ? m : "");
    }
    convo_thread_page_free(p);
    return n;
}

static void same_rows(const row *a, const row *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(a[i].id, b[i].id);
        ck_assert_int_eq(a[i].created, b[i].created);
        ck_assert_int_eq(a[i].updated, b[i].updated);
        ck_assert_int_eq(a[i].length, b[i].length);
        ck_assert_str_eq(a[i].extra, b[i].extra);
        ck_assert_str_eq(a[i].last, b[i].last);
    }
}

/* Layout 7 -> 8: every thread's c, u and p leave meta for the extra hash;
 * loads, pages (filtered and not) and the extra are as before; a c the extra
 * hash holds already (written by layout 8 since) keeps its value there. */
START_TEST(test_layout7_migrated)
{
    char prefix[256];
    convo_store *s = open_store("from7", NULL, user_keys, prefix, sizeof prefix);
    convo_error err;
    const char *two[] = {MSG, "{\"role\":\"assistant\",\"content\":\"yes\"}"};
    ck_assert_int_eq(convo_save_extra(s, "a", "{\"user_id\":\"u1\",\"title\":\"x\"}", &err), 0);
    ck_assert_int_eq(convo_append(s, "a", two, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "b", "{\"user_id\":\"u1\"}", &err), 0);
    ck_assert_int_eq(convo_append(s, "b", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_append(s, "plain", two, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "quiet", "{\"user_id\":\"u2\"}", &err), 0);
    row before[8], after[8], mine[4], mine_after[4];
    size_t n = page(s, NULL, before, 8), nmine = page(s, "{\"user_id\":\"u1\"}", mine, 4);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(nmine, 2);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "a", NULL, &h, &err), 0);
    char extra[128];
    snprintf(extra, sizeof extra, "%s", convo_history_extra(h));
    convo_history_free(h);
    convo_close(s);

    const char *ids[] = {"a", "b", "plain", "quiet"};
    for (int i = 0; i < 4; i++)
        to_layout7(prefix, ids[i]);
    /* b: a p in meta (layout 7's quick rewrite), later than its u within the
     * window; plain: its c also in the extra hash already, which wins */
    long long bu = num("HGET %s:{b}:meta u", prefix);
    freeReplyObject(cmd("HSET %s:{b}:meta p %lld", prefix, bu + 1000));
    long long pc = num("HGET %s:{plain}:meta c", prefix);
    freeReplyObject(cmd("HSET %s:{plain}:meta c %lld", prefix, pc - 7));
    freeReplyObject(cmd("HSET %s:{plain}:extra c %lld", prefix, pc));
    freeReplyObject(cmd("HSET %s:store v 7", prefix));

    s = open_store("from7", NULL, NULL, prefix, sizeof prefix);
    ck_assert_int_eq(num("HGET %s:store v", prefix), 8);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(num("HEXISTS %s:{%s}:meta c", prefix, ids[i]), 0);
        ck_assert_int_eq(num("HEXISTS %s:{%s}:meta u", prefix, ids[i]), 0);
        ck_assert_int_eq(num("HEXISTS %s:{%s}:meta p", prefix, ids[i]), 0);
        ck_assert_int_eq(num("HEXISTS %s:{%s}:extra c", prefix, ids[i]), 1);
        ck_assert_int_eq(num("HEXISTS %s:{%s}:meta v", prefix, ids[i]), 1);
    }
    ck_assert_int_eq(num("HGET %s:{b}:extra p", prefix), bu + 1000);
    ck_assert_int_eq(num("HGET %s:{plain}:extra c", prefix), pc);
    ck_assert_int_eq(page(s, NULL, after, 8), n);
    for (size_t i = 0; i < n; i++) /* b lists at its p now: the one change */
        if (strcmp(before[i].id, "b") == 0)
            before[i].updated = bu + 1000;
    ck_assert_int_eq(page(s, "{\"user_id\":\"u1\"}", mine_after, 4), nmine);
    for (size_t i = 0; i < nmine; i++)
        if (strcmp(mine[i].id, "b") == 0)
            mine[i].updated = bu + 1000;
    /* the order may change with b's p: compare by id */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (strcmp(before[i].id, after[j].id) == 0)
                same_rows(&before[i], &after[j], 1);
    for (size_t i = 0; i < nmine; i++)
        for (size_t j = 0; j < nmine; j++)
            if (strcmp(mine[i].id, mine_after[j].id) == 0)
                same_rows(&mine[i], &mine_after[j], 1);
    ck_assert_int_eq(convo_load(s, "a", NULL, &h, &err), 0);
    ck_assert_str_eq(convo_history_extra(h), extra);
    ck_assert_int_eq(convo_history_length(h), 2);
    convo_history_free(h);
    /* writes after the migration keep the times where they are */
    ck_assert_int_eq(convo_append(s, "a", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "quiet", "{\"title\":\"y\"}", &err), 0);
    ck_assert_int_eq(num("HEXISTS %s:{a}:meta u", prefix), 0);
    ck_assert_int_eq(num("HEXISTS %s:{quiet}:meta u", prefix), 0);
    ck_assert_int_eq(page(s, "{\"user_id\":\"u2\"}", after, 8), 1);
    ck_assert_str_eq(after[0].extra, "{\"user_id\":\"u2\",\"title\":\"y\"}");
    convo_close(s);
}
END_TEST

/* Layout 6 walks to 8 as well (7 took no walk from 6: its p was absent). */
START_TEST(test_layout6_migrated)
{
    char prefix[256];
    convo_store *s = open_store("from6", NULL, NULL, prefix, sizeof prefix);
    convo_error err;
    ck_assert_int_eq(convo_append(s, "a", &MSG, NULL, 1, NULL, NULL, &err), 0);
    row before[2], after[2];
    ck_assert_int_eq(page(s, NULL, before, 2), 1);
    convo_close(s);
    to_layout7(prefix, "a");
    freeReplyObject(cmd("HSET %s:store v 6", prefix));
    s = open_store("from6", NULL, NULL, prefix, sizeof prefix);
    ck_assert_int_eq(num("HGET %s:store v", prefix), 8);
    ck_assert_int_eq(num("HEXISTS %s:{a}:meta c", prefix), 0);
    ck_assert_int_eq(page(s, NULL, after, 2), 1);
    same_rows(before, after, 1);
    convo_close(s);
}
END_TEST

int main(int argc, char **argv)
{
    int status = redis_test_args(argc, argv, "redis-layout8", "a cluster keeps layout 4");
    if (status >= 0)
        return status;
    Suite *su = suite_create("redis-layout8");
    TCase *tc = tcase_create("server");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, connect_nodes, disconnect_nodes);
    tcase_add_test(tc, test_layout7_migrated);
    tcase_add_test(tc, test_layout6_migrated);
    suite_add_tcase(su, tc);
    return redis_test_run(su);
}
