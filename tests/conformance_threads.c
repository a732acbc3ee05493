/* conformance_threads.c — the thread index (convo_thread_list_ex) on every
 * driver: the extra filter, each order and direction, paging with cursors
 * (also while others write), the row summary, what updates updated_at, delete,
 * fork, import, the declared index keys and bad input. Each test tags its
 * threads with a "suite" value of its own, so runs sharing a server never see
 * each other's threads. */
#include "conformance.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const MSG = "{\"role\":\"user\",\"content\":\"hi\"}";

/* A thread of the test's tag, with extra {"suite": tag, ...more}. */
static void make_thread(const char *tid, const char *tag, const char *more)
{
    char patch[1024];
    snprintf(patch, sizeof patch, "{\"suite\":\"%s\"%s%s}", tag, more ? "," : "",
             more ? more : "");
    convo_error err;
    ASSERT_OK(convo_save_extra(conf_store, tid, patch, &err), err);
    usleep(2000); /* distinct times on every backend's clock */
}

/* Lists the test's threads (where {"suite": tag} plus more) into ids joined by
 * spaces, page by page of `limit`, checking cursors and next on the way. */
static char *list_ids(const char *tag, const char *more, int order, int reverse, size_t limit)
{
    char where[1024];
    if (tag) /* NULL: the filter is more alone */
        snprintf(where, sizeof where, "{\"suite\":\"%s\"%s%s}", tag, more ? "," : "",
                 more ? more : "");
    else
        snprintf(where, sizeof where, "{%s}", more);
    char *out = calloc(1, 1);
    char *after = NULL;
    for (int pages = 0;; pages++) {
        ck_assert_int_lt(pages, 1000);
        convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
        o.where_json = where;
        o.order = order;
        o.reverse = reverse;
        o.limit = limit;
        o.after = after;
        convo_thread_page *p;
        convo_error err;
        ASSERT_OK(convo_thread_list_ex(conf_store, &o, &p, &err), err);
        size_t n = convo_thread_page_count(p);
        ck_assert_uint_le(n, limit);
        for (size_t i = 0; i < n; i++) {
            const char *id = convo_thread_page_id(p, i);
            const char *slash = strrchr(id, '/');
            size_t len = strlen(out);
            out = realloc(out, len + strlen(id) + 2);
            sprintf(out + len, "%s%s", len ? " " : "", slash ? slash + 1 : id);
            ck_assert_ptr_nonnull(convo_thread_page_cursor(p, i));
        }
        const char *next = convo_thread_page_next(p);
        if (next)
            ck_assert_str_eq(next, convo_thread_page_cursor(p, n - 1));
        free(after);
        after = next ? strdup(next) : NULL;
        convo_thread_page_free(p);
        if (!after)
            break;
    }
    return out;
}

static void assert_listing(const char *tag, const char *more, int order, int reverse,
                           size_t limit, const char *expected)
{
    char *got = list_ids(tag, more, order, reverse, limit);
    ck_assert_msg(strcmp(got, expected) == 0, "order %d reverse %d limit %zu: got '%s', want '%s'",
                  order, reverse, limit, got, expected);
    free(got);
}

START_TEST(test_index_orders)
{
    char tag[256], a[256], b[256], c[256];
    TID(tag, "tag");
    TID(a, "a");
    TID(c, "c");
    TID(b, "b");
    make_thread(a, tag, NULL);
    make_thread(c, tag, NULL);
    make_thread(b, tag, NULL);
    assert_listing(tag, NULL, CONVO_ORDER_RECENT, 0, 100, "b c a");
    assert_listing(tag, NULL, CONVO_ORDER_CREATED, 0, 100, "b c a");
    assert_listing(tag, NULL, CONVO_ORDER_ID, 0, 100, "a b c");
    /* a write moves a thread to the front of the activity order only */
    conf_append(conf_store, a, &MSG, 1);
    assert_listing(tag, NULL, CONVO_ORDER_RECENT, 0, 100, "a b c");
    assert_listing(tag, NULL, CONVO_ORDER_RECENT, 1, 100, "c b a");
    assert_listing(tag, NULL, CONVO_ORDER_CREATED, 0, 100, "b c a");
    assert_listing(tag, NULL, CONVO_ORDER_CREATED, 1, 100, "a c b");
    assert_listing(tag, NULL, CONVO_ORDER_ID, 1, 100, "c b a");
    /* in pages of one and two, the same */
    assert_listing(tag, NULL, CONVO_ORDER_RECENT, 0, 1, "a b c");
    assert_listing(tag, NULL, CONVO_ORDER_CREATED, 1, 2, "a c b");
    assert_listing(tag, NULL, CONVO_ORDER_ID, 0, 2, "a b c");
    /* the default options: newest activity first */
    char where[512];
    snprintf(where, sizeof where, "{\"suite\":\"%s\"}", tag);
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    convo_thread_page *p;
    convo_error err;
    ASSERT_OK(convo_thread_list_ex(conf_store, &o, &p, &err), err);
    ck_assert_uint_eq(convo_thread_page_count(p), 3);
    ck_assert_str_eq(convo_thread_page_id(p, 0), a);
    ck_assert_ptr_null(convo_thread_page_next(p));
    convo_thread_page_free(p);
}
END_TEST

START_TEST(test_index_filter)
{
    char tag[256], t1[256], t2[256], t3[256], t4[256];
    TID(tag, "tag");
    TID(t1, "1");
    TID(t2, "2");
    TID(t3, "3");
    TID(t4, "4");
    make_thread(t1, tag, "\"user_id\":\"u1\",\"meta\":{\"lang\":\"en\",\"n\":1},\"tags\":[\"x\",\"y\"]");
    make_thread(t2, tag, "\"user_id\":\"u2\",\"meta\":{\"lang\":\"fr\"}");
    make_thread(t3, tag, "\"user_id\":\"u1\",\"archived\":true,\"tags\":[\"y\"]");
    make_thread(t4, tag, "\"user_id\":\"u1.x\",\"odd.key$\":null");
    assert_listing(tag, "\"user_id\":\"u1\"", CONVO_ORDER_RECENT, 0, 100, "3 1");
    assert_listing(tag, "\"meta\":{\"lang\":\"en\"}", CONVO_ORDER_RECENT, 0, 100, "1");
    assert_listing(tag, "\"tags\":[\"y\"]", CONVO_ORDER_ID, 0, 100, "1 3");
    assert_listing(tag, "\"user_id\":\"u1\",\"archived\":true", CONVO_ORDER_ID, 0, 100, "3");
    assert_listing(tag, "\"odd.key$\":null", CONVO_ORDER_ID, 0, 100, "4");
    assert_listing(tag, "\"user_id\":\"nobody\"", CONVO_ORDER_ID, 0, 100, "");
    assert_listing(tag, "\"meta\":{\"n\":1.5}", CONVO_ORDER_ID, 0, 100, "");
    /* a changed extra moves the thread between filters */
    convo_error err;
    ASSERT_OK(convo_save_extra(conf_store, t2, "{\"user_id\":\"u1\"}", &err), err);
    assert_listing(tag, "\"user_id\":\"u1\"", CONVO_ORDER_RECENT, 0, 100, "2 3 1");
    assert_listing(tag, "\"user_id\":\"u2\"", CONVO_ORDER_RECENT, 0, 100, "");
}
END_TEST

START_TEST(test_index_rows)
{
    char tag[256], full[256], empty[256];
    TID(tag, "tag");
    TID(full, "full");
    TID(empty, "empty");
    int64_t before = 0;
    {
        convo_history *h;
        convo_error err;
        make_thread(full, tag, "\"title\":\"Trip\"");
        ASSERT_OK(convo_load(conf_store, full, NULL, &h, &err), err);
        convo_history_free(h);
    }
    const char *msgs[] = {MSG, "{\"role\":\"assistant\",\"content\":\"last one\"}"};
    conf_append(conf_store, full, msgs, 2);
    make_thread(empty, tag, NULL);
    char where[512];
    snprintf(where, sizeof where, "{\"suite\":\"%s\"}", tag);
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.order = CONVO_ORDER_ID;
    o.with_extra = 1;
    o.with_last_message = 1;
    convo_thread_page *p;
    convo_error err;
    ASSERT_OK(convo_thread_list_ex(conf_store, &o, &p, &err), err);
    ck_assert_uint_eq(convo_thread_page_count(p), 2);
    /* "empty" sorts before "full" */
    ck_assert_str_eq(convo_thread_page_id(p, 0), empty);
    ck_assert_int_eq(convo_thread_page_length(p, 0), 0);
    size_t len = 99;
    ck_assert_ptr_null(convo_thread_page_last_message(p, 0, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(convo_thread_page_id(p, 1), full);
    ck_assert_int_eq(convo_thread_page_length(p, 1), 2);
    const char *last = convo_thread_page_last_message(p, 1, &len);
    ck_assert_uint_eq(len, strlen(msgs[1]));
    ck_assert_mem_eq(last, msgs[1], len);
    ck_assert_ptr_nonnull(strstr(convo_thread_page_extra(p, 1), "\"title\":\"Trip\""));
    ck_assert(convo_thread_page_created_at(p, 1) > before);
    ck_assert(convo_thread_page_updated_at(p, 1) > convo_thread_page_created_at(p, 1));
    ck_assert(convo_thread_page_updated_at(p, 0) >= convo_thread_page_created_at(p, 0));
    convo_thread_page_free(p);
    /* without asking: no extra, no last message */
    o.with_extra = 0;
    o.with_last_message = 0;
    ASSERT_OK(convo_thread_list_ex(conf_store, &o, &p, &err), err);
    ck_assert_ptr_null(convo_thread_page_extra(p, 1));
    ck_assert_ptr_null(convo_thread_page_last_message(p, 1, NULL));
    ck_assert_int_eq(convo_thread_page_length(p, 1), 2);
    convo_thread_page_free(p);
    /* convo_thread_list still lists ids in byte order */
    size_t n;
    empty[strlen(empty) - 1] = '\0'; /* the listing starts after its prefix */
    char **ids = conf_list_prefix(conf_store, empty, 10, &n);
    empty[strlen(empty)] = 'y';
    ck_assert_uint_ge(n, 1);
    ck_assert_str_eq(ids[0], empty);
    conf_ids_free(ids, n);
}
END_TEST

/* updated_at of the only thread of tag */
static int64_t updated_of(const char *tag, int64_t *created)
{
    char where[512];
    snprintf(where, sizeof where, "{\"suite\":\"%s\"}", tag);
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    convo_thread_page *p;
    convo_error err;
    ASSERT_OK(convo_thread_list_ex(conf_store, &o, &p, &err), err);
    ck_assert_uint_eq(convo_thread_page_count(p), 1);
    int64_t u = convo_thread_page_updated_at(p, 0);
    if (created)
        *created = convo_thread_page_created_at(p, 0);
    convo_thread_page_free(p);
    usleep(2000);
    return u;
}

START_TEST(test_index_updated_by_every_write)
{
    char tag[256], tid[256];
    TID(tag, "tag");
    TID(tid, "t");
    make_thread(tid, tag, NULL);
    int64_t created, c2;
    int64_t u0 = updated_of(tag, &created);
    conf_append(conf_store, tid, &MSG, 1);
    int64_t u1 = updated_of(tag, &c2);
    ck_assert(u1 > u0);
    ck_assert_int_eq(c2, created);
    convo_error err;
    ASSERT_OK(convo_save_extra(conf_store, tid, "{\"k\":1}", &err), err);
    int64_t u2 = updated_of(tag, NULL);
    ck_assert(u2 > u1);
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = "c1";
    cp.log_length = 1;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
    int64_t u3 = updated_of(tag, NULL);
    ck_assert(u3 > u2);
    cp.checkpoint_id = "c2";
    cp.messages = &MSG;
    cp.nmessages = 1;
    cp.expected_length = 1;
    cp.log_length = 2;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
    int64_t u4 = updated_of(tag, NULL);
    ck_assert(u4 > u3);
    convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
    ro.drop_checkpoints = 1;
    ASSERT_OK(convo_replace_tail(conf_store, tid, 1, NULL, NULL, 0, &ro, NULL, &err), err);
    int64_t u5 = updated_of(tag, &c2);
    ck_assert(u5 > u4);
    ck_assert_int_eq(c2, created);
    /* reads change nothing */
    convo_history *h = conf_load(conf_store, tid, NULL);
    convo_history_free(h);
    ck_assert_int_eq(updated_of(tag, NULL), u5);
}
END_TEST

START_TEST(test_index_delete_fork_import)
{
    char tag[256], src[256], gone[256], dst[256];
    TID(tag, "tag");
    TID(src, "src");
    TID(gone, "gone");
    TID(dst, "dst");
    make_thread(src, tag, NULL);
    conf_append(conf_store, src, &MSG, 1);
    make_thread(gone, tag, NULL);
    convo_error err;
    ASSERT_OK(convo_thread_delete(conf_store, gone, &err), err);
    assert_listing(tag, NULL, CONVO_ORDER_ID, 0, 100, "src");
    int64_t src_created;
    updated_of(tag, &src_created);
    ASSERT_OK(convo_thread_fork(conf_store, src, dst, -1, &err), err);
    /* the fork is a new thread: its own times, its extra (and so the tag) copied */
    assert_listing(tag, NULL, CONVO_ORDER_CREATED, 0, 100, "dst src");
    char where[512];
    snprintf(where, sizeof where, "{\"suite\":\"%s\"}", tag);
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.order = CONVO_ORDER_CREATED;
    convo_thread_page *p;
    ASSERT_OK(convo_thread_list_ex(conf_store, &o, &p, &err), err);
    ck_assert(convo_thread_page_created_at(p, 0) > src_created);
    ck_assert_int_eq(convo_thread_page_length(p, 0), 1);
    convo_thread_page_free(p);
    /* an import creates the thread with its own times too, and is listed whole */
    const char *ids[] = {src};
    conf_buf dump = {0};
    ASSERT_OK(convo_export(conf_store, ids, 1, conf_buf_write, &dump, NULL, NULL, &err), err);
    ASSERT_OK(convo_thread_delete(conf_store, src, &err), err);
    assert_listing(tag, NULL, CONVO_ORDER_ID, 0, 100, "dst");
    usleep(2000);
    ASSERT_OK(convo_import(conf_store, conf_buf_read, &dump, NULL, NULL, &err), err);
    free(dump.data);
    assert_listing(tag, NULL, CONVO_ORDER_CREATED, 0, 100, "src dst");
    o.limit = 1;
    ASSERT_OK(convo_thread_list_ex(conf_store, &o, &p, &err), err);
    ck_assert_str_eq(convo_thread_page_id(p, 0), src);
    ck_assert_int_eq(convo_thread_page_length(p, 0), 1);
    convo_thread_page_free(p);
}
END_TEST

START_TEST(test_index_paging_while_writing)
{
    char tag[256];
    TID(tag, "tag");
    enum { N = 7 };
    char ids[N][256];
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        conf_tid(ids[i], sizeof ids[i], __func__, name);
        make_thread(ids[i], tag, NULL);
    }
    char where[512];
    snprintf(where, sizeof where, "{\"suite\":\"%s\"}", tag);
    for (int order = CONVO_ORDER_CREATED; order <= CONVO_ORDER_ID; order++) {
        int seen[N] = {0};
        char *after = NULL;
        for (int page = 0;; page++) {
            convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
            o.where_json = where;
            o.order = order;
            o.limit = 2;
            o.after = after;
            convo_thread_page *p;
            convo_error err;
            ASSERT_OK(convo_thread_list_ex(conf_store, &o, &p, &err), err);
            for (size_t i = 0; i < convo_thread_page_count(p); i++)
                for (int k = 0; k < N; k++)
                    if (strcmp(convo_thread_page_id(p, i), ids[k]) == 0)
                        seen[k]++;
            /* others write between pages: every thread, listed or not */
            for (int k = 0; k < N; k++)
                conf_append(conf_store, ids[k], &MSG, 1);
            free(after);
            after = convo_thread_page_next(p) ? strdup(convo_thread_page_next(p)) : NULL;
            convo_thread_page_free(p);
            if (!after)
                break;
            ck_assert_int_lt(page, 20);
        }
        for (int k = 0; k < N; k++)
            ck_assert_msg(seen[k] == 1, "order %d: thread %d listed %d times", order, k,
                          seen[k]);
    }
}
END_TEST

START_TEST(test_index_bad_input)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    convo_thread_page *p = (convo_thread_page *)1;
    convo_error err;
    const char *bad_where[] = {"[1]", "nope", "\"text\"", "{\"a\":", "{\"a\":1,\"a\":2}", NULL};
    for (int i = 0; bad_where[i]; i++) {
        o.where_json = bad_where[i];
        ASSERT_FAILS(convo_thread_list_ex(conf_store, &o, &p, &err), err, CONVO_EINVAL);
        ck_assert_ptr_null(p);
    }
    o = (convo_thread_list_opts)CONVO_THREAD_LIST_OPTS_INIT;
    o.order = 7;
    ASSERT_FAILS(convo_thread_list_ex(conf_store, &o, &p, &err), err, CONVO_EINVAL);
    o.order = -1;
    ASSERT_FAILS(convo_thread_list_ex(conf_store, &o, &p, &err), err, CONVO_EINVAL);
    o = (convo_thread_list_opts)CONVO_THREAD_LIST_OPTS_INIT;
    o.reverse = 2;
    ASSERT_FAILS(convo_thread_list_ex(conf_store, &o, &p, &err), err, CONVO_EINVAL);
    o = (convo_thread_list_opts)CONVO_THREAD_LIST_OPTS_INIT;
    o.limit = 10001;
    ASSERT_FAILS(convo_thread_list_ex(conf_store, &o, &p, &err), err, CONVO_EINVAL);
    o = (convo_thread_list_opts)CONVO_THREAD_LIST_OPTS_INIT;
    o.version = 9;
    ASSERT_FAILS(convo_thread_list_ex(conf_store, &o, &p, &err), err, CONVO_EINVAL);
    const char *bad_cursor[] = {"x", "r0:zz:abc", "r0:0000000000000001:", "r2:0000000000000001:a",
                                "c0:0000000000000001:a", "r1:0000000000000001:a", NULL};
    for (int i = 0; bad_cursor[i]; i++) {
        o = (convo_thread_list_opts)CONVO_THREAD_LIST_OPTS_INIT;
        o.after = bad_cursor[i];
        ASSERT_FAILS(convo_thread_list_ex(conf_store, &o, &p, &err), err, CONVO_EINVAL);
    }
    ASSERT_FAILS(convo_thread_list_ex(NULL, &o, &p, &err), err, CONVO_EINVAL);
    /* index keys: checked at open */
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    const char *dup[] = {"user_id", "user_id", NULL};
    so.indexed_keys = dup;
    convo_store *s = NULL;
    ASSERT_FAILS(convo_open_ex(&s, conf_url, &so, &err), err, CONVO_EINVAL);
    const char *empty[] = {"", NULL};
    so.indexed_keys = empty;
    ASSERT_FAILS(convo_open_ex(&s, conf_url, &so, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(s);
}
END_TEST

/* A store declares its index keys once; an opener without them keeps them, one
 * with other keys is refused. */
START_TEST(test_index_declared_keys)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    const char *keys[] = {"user_id", "project", NULL};
    so.indexed_keys = keys;
    convo_store *s = conf_open_ex(&so);
    char tag[256], tid[256];
    TID(tag, "tag");
    TID(tid, "t");
    char patch[512];
    snprintf(patch, sizeof patch, "{\"suite\":\"%s\",\"user_id\":\"u9\",\"project\":\"p\"}", tag);
    convo_error err;
    ASSERT_OK(convo_save_extra(s, tid, patch, &err), err);
    char where[512];
    snprintf(where, sizeof where, "{\"user_id\":\"u9\",\"suite\":\"%s\"}", tag);
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    convo_thread_page *p;
    ASSERT_OK(convo_thread_list_ex(s, &o, &p, &err), err);
    ck_assert_uint_eq(convo_thread_page_count(p), 1);
    convo_thread_page_free(p);
    convo_close(s);
    if (conf_private)
        return; /* every open is a new store: nothing recorded to compare with */
    /* the same keys in another order, and no keys: fine */
    const char *same[] = {"project", "user_id", NULL};
    so.indexed_keys = same;
    s = conf_open_ex(&so);
    convo_close(s);
    s = conf_open();
    ASSERT_OK(convo_save_extra(s, tid, "{\"user_id\":\"u10\"}", &err), err);
    snprintf(where, sizeof where, "{\"user_id\":\"u10\",\"suite\":\"%s\"}", tag);
    ASSERT_OK(convo_thread_list_ex(s, &o, &p, &err), err);
    ck_assert_uint_eq(convo_thread_page_count(p), 1);
    convo_thread_page_free(p);
    convo_close(s);
    const char *other[] = {"tenant", NULL};
    so.indexed_keys = other;
    s = NULL;
    ASSERT_FAILS(convo_open_ex(&s, conf_url, &so, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(s);
}
END_TEST

/* "a b c" -> "c b a" */
static char *reverse_words(const char *words)
{
    size_t len = strlen(words);
    char *out = calloc(1, len + 1);
    const char *end = words + len;
    while (end > words) {
        const char *start = end;
        while (start > words && start[-1] != ' ')
            start--;
        strncat(out, start, (size_t)(end - start));
        if (start > words)
            strcat(out, " ");
        end = start > words ? start - 1 : words;
    }
    return out;
}

/* The ids, in recent order, of the test's threads whose extra's user_id is
 * `want` (a JSON scalar; numbers by value), read from the whole listing. */
static char *expected_ids(convo_store *s, const char *tag, json_t *want)
{
    char where[512];
    snprintf(where, sizeof where, "{\"suite\":\"%s\"}", tag);
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.limit = 10000;
    o.with_extra = 1;
    convo_thread_page *p;
    convo_error err;
    ASSERT_OK(convo_thread_list_ex(s, &o, &p, &err), err);
    char *out = calloc(1, 1);
    for (size_t i = 0; i < convo_thread_page_count(p); i++) {
        json_t *extra = json_loads(convo_thread_page_extra(p, i), 0, NULL);
        json_t *v = json_object_get(extra, "user_id");
        int match = v && (json_is_number(v) && json_is_number(want)
                              ? json_number_value(v) == json_number_value(want)
                              : json_equal(v, want));
        json_decref(extra);
        if (!match)
            continue;
        const char *id = strrchr(convo_thread_page_id(p, i), '/') + 1;
        size_t len = strlen(out);
        out = realloc(out, len + strlen(id) + 2);
        sprintf(out + len, "%s%s", len ? " " : "", id);
    }
    convo_thread_page_free(p);
    return out;
}

/* With user_id declared indexed, a random mix of writes that move threads
 * between users (strings, numbers as 3 and 3.0, null, arrays and objects that a
 * scalar filter never matches), append to them, rewrite their tails, fork and
 * delete them: after every few steps each user's listing, page by page, is the
 * whole listing filtered by hand. */
START_TEST(test_index_random_writes)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    const char *keys[] = {"user_id", "project", NULL};
    so.indexed_keys = keys;
    convo_store *saved = conf_store;
    conf_store = conf_open_ex(&so);
    char tag[256];
    TID(tag, "tag");
    const char *values[] = {"\"a\"", "\"b\"", "\"c\"", "3", "3.0", "null", "[\"a\"]",
                            "{\"id\":\"a\"}", "\"\""};
    const char *probes[] = {"\"a\"", "\"b\"", "\"c\"", "3", "null", "\"\""};
    enum { N = 24, STEPS = 160 };
    unsigned seed = 25;
    convo_error err;
    for (int step = 1; step <= STEPS; step++) {
        char tid[300], src[300], patch[512];
        int k = (int)(rand_r(&seed) % N), op = (int)(rand_r(&seed) % 10);
        snprintf(tid, sizeof tid, "%s/t%02d", tag, k);
        if (op < 4) {
            snprintf(patch, sizeof patch, "{\"suite\":\"%s\",\"user_id\":%s}", tag,
                     values[rand_r(&seed) % (sizeof values / sizeof values[0])]);
            ASSERT_OK(convo_save_extra(conf_store, tid, patch, &err), err);
        } else if (op < 5) {
            snprintf(patch, sizeof patch, "{\"suite\":\"%s\",\"other\":%d}", tag, step);
            ASSERT_OK(convo_save_extra(conf_store, tid, patch, &err), err);
        } else if (op < 8) {
            ASSERT_OK(convo_append(conf_store, tid, &MSG, NULL, 1, NULL, NULL, &err), err);
        } else if (op < 9) {
            int rc = convo_thread_delete(conf_store, tid, &err);
            ck_assert_msg(rc == 0 || rc == CONVO_ENOTFOUND, "delete: %s", err.message);
        } else {
            snprintf(src, sizeof src, "%s/t%02d", tag, (int)(rand_r(&seed) % N));
            convo_thread_delete(conf_store, tid, NULL);
            int rc = convo_thread_fork(conf_store, src, tid, -1, &err);
            ck_assert_msg(rc == 0 || rc == CONVO_ENOTFOUND || rc == CONVO_ECONFLICT, "fork: %s",
                          err.message);
        }
        if (step % 20 != 0)
            continue;
        for (size_t v = 0; v < sizeof probes / sizeof probes[0]; v++) {
            json_t *want = json_loads(probes[v], JSON_DECODE_ANY, NULL);
            char *expected = expected_ids(conf_store, tag, want);
            json_decref(want);
            char more[64];
            snprintf(more, sizeof more, "\"user_id\":%s", probes[v]);
            assert_listing(tag, more, CONVO_ORDER_RECENT, 0, 3, expected);
            if (conf_private) /* no other test's threads: the indexed key alone */
                assert_listing(NULL, more, CONVO_ORDER_RECENT, 0, 3, expected);
            char *reversed = reverse_words(expected);
            assert_listing(tag, more, CONVO_ORDER_RECENT, 1, 2, reversed);
            free(reversed);
            free(expected);
        }
    }
    convo_close(conf_store);
    conf_store = saved;
}
END_TEST

void conf_add_thread_index_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "thread index");
    tcase_add_test(tc, test_index_orders);
    tcase_add_test(tc, test_index_filter);
    tcase_add_test(tc, test_index_rows);
    tcase_add_test(tc, test_index_updated_by_every_write);
    tcase_add_test(tc, test_index_delete_fork_import);
    tcase_add_test(tc, test_index_paging_while_writing);
    tcase_add_test(tc, test_index_bad_input);
    tcase_add_test(tc, test_index_declared_keys);
    tcase_add_test(tc, test_index_random_writes);
}
