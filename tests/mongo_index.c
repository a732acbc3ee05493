/* mongo_index.c — the MongoDB driver's thread index (layout 6): the fields and
 * indexes it stores, that a page reads the index (the server's profiler counts
 * the documents each listing examined), a layout 5 store moved up, a writer
 * that died between its batch and the index update, ttl and delete. */
#include "mongo_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const MSG = "{\"role\":\"user\",\"content\":\"hi\"}";

static convo_store *open_keyed(const char *const *keys)
{
    char p[512];
    snprintf(p, sizeof p, "database=%s&prefix=%s", database, prefix);
    char *u = url_with(p);
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = keys;
    convo_store *s = NULL;
    int rc = convo_open_ex(&s, u, &so, &err);
    ck_assert_msg(rc == 0, "convo_open_ex(%s): %d %s", u, rc, err.message);
    free(u);
    return s;
}

/* One page; the ids joined by spaces (caller frees). */
static char *page_ids(convo_store *s, const char *where, int order, int reverse, size_t limit,
                      convo_thread_page **keep)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.order = order;
    o.reverse = reverse;
    o.limit = limit;
    o.with_last_message = 1;
    convo_thread_page *p;
    ck_assert_msg(convo_thread_list_ex(s, &o, &p, &err) == 0, "%s", err.message);
    char *out = calloc(1, 1);
    for (size_t i = 0; i < convo_thread_page_count(p); i++) {
        const char *id = convo_thread_page_id(p, i);
        size_t len = strlen(out);
        out = realloc(out, len + strlen(id) + 2);
        sprintf(out + len, "%s%s", len ? " " : "", id);
    }
    if (keep)
        *keep = p;
    else
        convo_thread_page_free(p);
    return out;
}

static int64_t get_i64(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it)
               ? bson_iter_as_int64(&it)
               : -1;
}

/* What the listings since the profiler was cleared examined on P_threads:
 * the largest docsExamined of one command, and its plan summary. */
static int64_t most_examined(char *plan, size_t size)
{
    char ns[160];
    snprintf(ns, sizeof ns, "%s.%s_threads", database, prefix);
    mongoc_collection_t *c = mongoc_client_get_collection(raw, database, "system.profile");
    bson_t *filter = BCON_NEW("ns", BCON_UTF8(ns), "command.aggregate", "{", "$exists",
                              BCON_BOOL(true), "}");
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(c, filter, NULL, NULL);
    const bson_t *doc;
    int64_t most = -1;
    while (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        if (get_i64(doc, "docsExamined") <= most)
            continue;
        most = get_i64(doc, "docsExamined");
        snprintf(plan, size, "%s",
                 bson_iter_init_find(&it, doc, "planSummary") && BSON_ITER_HOLDS_UTF8(&it)
                     ? bson_iter_utf8(&it, NULL)
                     : "");
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    /* the next measure starts afresh */
    bson_t *all = bson_new();
    mongoc_collection_delete_many(c, all, NULL, NULL, NULL);
    bson_destroy(all);
    mongoc_collection_destroy(c);
    return most;
}

START_TEST(test_index_layout)
{
    const char *keys[] = {"user_id", NULL};
    convo_store *s = open_keyed(keys);
    ck_assert_int_eq(convo_save_extra(s, "lay", "{\"user_id\":\"u1\"}", &err), 0);
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("lay")));
    int64_t created = get_i64(t, "ca");
    ck_assert_int_gt(created, 0);
    ck_assert_int_eq(get_i64(t, "ua"), created);
    ck_assert_int_eq(get_i64(t, "ln"), 0);
    bson_destroy(t);
    ck_assert_int_eq(convo_append(s, "lay", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_append(s, "lay", &MSG, NULL, 1, NULL, NULL, &err), 0);
    t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("lay")));
    ck_assert_int_eq(get_i64(t, "ca"), created);
    ck_assert_int_gt(get_i64(t, "ua"), created);
    ck_assert_int_eq(get_i64(t, "ln"), 2);
    ck_assert_int_eq(get_i64(t, "sl"), 1);
    bson_destroy(t);
    bson_t *meta = raw_find("meta", BCON_NEW("_id", BCON_UTF8("index")));
    ck_assert_ptr_nonnull(meta);
    assert_field(meta, "keys.0", BSON_TYPE_UTF8);
    bson_destroy(meta);
    const char *names[] = {"convo_recent_v6", "convo_created_v6", "convo_x_user_id_recent",
                           "convo_x_user_id_created", "convo_x_user_id_id"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        bson_t *ix = index_named("threads", names[i]);
        ck_assert_msg(ix != NULL, "no index %s", names[i]);
        bson_destroy(ix);
    }
    convo_close(s);
    /* an opener declaring other keys is refused; one declaring none uses these */
    const char *other[] = {"tenant", NULL};
    char p[512];
    snprintf(p, sizeof p, "database=%s&prefix=%s", database, prefix);
    char *u = url_with(p);
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = other;
    s = NULL;
    ck_assert_int_eq(convo_open_ex(&s, u, &so, &err), CONVO_EINVAL);
    free(u);
    s = open_store(NULL);
    char *ids = page_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0, 10, NULL);
    ck_assert_str_eq(ids, "lay");
    free(ids);
    convo_close(s);
}
END_TEST

/* A page examines the page's thread docs (and one more), not the others: the
 * server's profiler says so for every order, filtered on the declared key and
 * not; a filter on another key examines every thread doc. */
START_TEST(test_index_used)
{
    const char *keys[] = {"user_id", NULL};
    convo_store *s = open_keyed(keys);
    char tid[64], patch[128];
    for (int i = 0; i < 600; i++) { /* 30 threads of u1 among 600 */
        snprintf(tid, sizeof tid, "t%04d", i);
        snprintf(patch, sizeof patch, "{\"user_id\":\"u%d\",\"n\":%d}", i % 20 ? 2 + i % 7 : 1, i);
        ck_assert_int_eq(convo_save_extra(s, tid, patch, &err), 0);
        if (i % 3 == 0)
            ck_assert_int_eq(convo_append(s, tid, &MSG, NULL, 1, NULL, NULL, &err), 0);
    }
    profile_level(2);
    char plan[256];
    most_examined(plan, sizeof plan);
    static const int orders[] = {CONVO_ORDER_RECENT, CONVO_ORDER_CREATED, CONVO_ORDER_ID};
    for (int k = 0; k < 3; k++) {
        for (int reverse = 0; reverse < 2; reverse++) {
            char *ids = page_ids(s, "{\"user_id\":\"u1\"}", orders[k], reverse, 20, NULL);
            ck_assert_uint_eq(strlen(ids), 20 * 6 - 1);
            free(ids);
            int64_t seen = most_examined(plan, sizeof plan);
            ck_assert_msg(seen >= 20 && seen <= 21, "order %d: %lld examined (%s)", orders[k],
                          (long long)seen, plan);
            ck_assert_msg(strstr(plan, "extra.user_id") != NULL, "plan %s", plan);
            ids = page_ids(s, NULL, orders[k], reverse, 20, NULL);
            free(ids);
            seen = most_examined(plan, sizeof plan);
            ck_assert_msg(seen >= 20 && seen <= 21, "order %d unfiltered: %lld examined (%s)",
                          orders[k], (long long)seen, plan);
            ck_assert_msg(strstr(plan, "IXSCAN") != NULL, "plan %s", plan);
        }
    }
    /* not declared: correct, and every thread doc is read */
    char *ids = page_ids(s, "{\"n\":40}", CONVO_ORDER_RECENT, 0, 20, NULL);
    ck_assert_str_eq(ids, "t0040");
    free(ids);
    ck_assert_int_ge(most_examined(plan, sizeof plan), 600);
    profile_level(0);
    convo_close(s);
}
END_TEST

/* A layout 5 store: thread docs without times. Moving up takes created_at
 * from the first batch and updated_at from the last; placeholders stay out. */
START_TEST(test_index_upgrade_from_v5)
{
    bson_oid_t g, gp;
    new_generation("old", &g);
    new_generation("ph", &gp);
    raw_insert("meta", BCON_NEW("_id", BCON_UTF8("schema"), "version", BCON_INT32(5)));
    forge_thread("old", &g, true, false, 0);
    forge_batch(&g, 0, 2, 1);
    sleep_ms(5);
    forge_batch(&g, 2, 1, 1);
    forge_thread("ph", &gp, false, false, 0); /* an append placeholder: no batch */
    bson_t *first = raw_find("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(0)));
    bson_t *last = raw_find("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(2)));
    convo_store *s = open_store(NULL);
    bson_t *meta = raw_find("meta", BCON_NEW("_id", BCON_UTF8("schema")));
    ck_assert_int_eq(get_i64(meta, "version"), 6);
    bson_destroy(meta);
    convo_thread_page *p;
    char *ids = page_ids(s, NULL, CONVO_ORDER_RECENT, 0, 10, &p);
    ck_assert_str_eq(ids, "old");
    ck_assert_int_eq(convo_thread_page_created_at(p, 0), get_i64(first, "at"));
    ck_assert_int_eq(convo_thread_page_updated_at(p, 0), get_i64(last, "at"));
    ck_assert_int_gt(convo_thread_page_updated_at(p, 0), convo_thread_page_created_at(p, 0));
    ck_assert_int_eq(convo_thread_page_length(p, 0), 3);
    convo_thread_page_free(p);
    free(ids);
    bson_destroy(first);
    bson_destroy(last);
    convo_close(s);
}
END_TEST

/* A writer killed between its batch and the index update: the thread doc says
 * one message less and an older time. A listing gives the right length and
 * repairs the doc; a load does too. */
START_TEST(test_index_repaired_on_read)
{
    convo_store *s = open_store(NULL);
    ck_assert_int_eq(convo_append(s, "cut", &MSG, NULL, 1, NULL, NULL, &err), 0);
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("cut")));
    int64_t ua = get_i64(t, "ua");
    bson_destroy(t);
    ck_assert_int_eq(convo_append(s, "cut", &MSG, NULL, 1, NULL, NULL, &err), 0);
    raw_update("threads", BCON_NEW("_id", BCON_UTF8("cut")),
               BCON_NEW("$set", "{", "ua", BCON_INT64(ua), "ln", BCON_INT64(1), "sl",
                        BCON_INT64(0), "}"));
    convo_thread_page *p;
    char *ids = page_ids(s, NULL, CONVO_ORDER_RECENT, 0, 10, &p);
    ck_assert_str_eq(ids, "cut");
    ck_assert_int_eq(convo_thread_page_length(p, 0), 2);
    ck_assert_int_eq(convo_thread_page_updated_at(p, 0), ua); /* where it was sorted */
    convo_thread_page_free(p);
    free(ids);
    t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("cut")));
    ck_assert_int_eq(get_i64(t, "ln"), 2);
    ck_assert_int_gt(get_i64(t, "ua"), ua);
    bson_destroy(t);
    /* the index fields gone altogether (a first batch whose update was lost) */
    raw_update("threads", BCON_NEW("_id", BCON_UTF8("cut")),
               BCON_NEW("$unset", "{", "ua", BCON_UTF8(""), "ca", BCON_UTF8(""), "ln",
                        BCON_UTF8(""), "sl", BCON_UTF8(""), "}", "$set", "{", "live",
                        BCON_BOOL(false), "}"));
    ids = page_ids(s, NULL, CONVO_ORDER_RECENT, 0, 10, NULL);
    ck_assert_str_eq(ids, ""); /* not in the index until read */
    free(ids);
    ck_assert_int_eq(length_of(s, "cut"), 2);
    ids = page_ids(s, NULL, CONVO_ORDER_CREATED, 0, 10, NULL);
    ck_assert_str_eq(ids, "cut");
    free(ids);
    convo_close(s);
}
END_TEST

/* Field key of thread doc id (-1: missing). */
static int64_t thread_field(const char *id, const char *key)
{
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8(id)));
    int64_t v = t ? get_i64(t, key) : -1;
    if (t)
        bson_destroy(t);
    return v;
}

/* A rewrite that kept the length (the last message replaced) whose index
 * update was lost: ln is right, the slot and the time are not. A load repairs
 * them, and so does a listing. */
START_TEST(test_index_rewrite_repaired_on_read)
{
    convo_store *s = open_store(NULL);
    const char *msgs[2] = {MSG, MSG};
    ck_assert_int_eq(convo_append(s, "same", msgs, NULL, 2, NULL, NULL, &err), 0);
    for (int i = 0; i < 200 && thread_field("same", "sl") != 0; i++)
        sleep_ms(10); /* the append's update is sent unacknowledged */
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("same")));
    int64_t ua = get_i64(t, "ua");
    bson_destroy(t);
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(convo_replace_tail(s, "same", 1, &MSG, NULL, 1, NULL, NULL, &err), 0);
        int64_t slot = 2 + round; /* the rewrite's batch */
        for (int i = 0; i < 200 && thread_field("same", "sl") != slot; i++)
            sleep_ms(10);
        raw_update("threads", BCON_NEW("_id", BCON_UTF8("same")),
                   BCON_NEW("$set", "{", "ua", BCON_INT64(ua), "sl", BCON_INT64(slot - 1), "}"));
        if (round == 0) {
            ck_assert_int_eq(length_of(s, "same"), 2);
        } else {
            convo_thread_page *p;
            char *ids = page_ids(s, NULL, CONVO_ORDER_RECENT, 0, 10, &p);
            ck_assert_str_eq(ids, "same");
            ck_assert_int_eq(convo_thread_page_length(p, 0), 2);
            convo_thread_page_free(p);
            free(ids);
        }
        t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("same")));
        ck_assert_int_eq(get_i64(t, "ln"), 2);
        ck_assert_int_eq(get_i64(t, "sl"), slot);
        ck_assert_int_gt(get_i64(t, "ua"), ua);
        bson_destroy(t);
    }
    convo_close(s);
}
END_TEST

/* Expired, deleted, being deleted and half-imported threads. */
START_TEST(test_index_hidden)
{
    convo_store *s = open_store("ttl=1");
    ck_assert_int_eq(convo_append(s, "soon", &MSG, NULL, 1, NULL, NULL, &err), 0);
    sleep_ms(1100);
    ck_assert_int_eq(convo_append(s, "kept", &MSG, NULL, 1, NULL, NULL, &err), 0);
    char *ids = page_ids(s, NULL, CONVO_ORDER_CREATED, 1, 10, NULL);
    ck_assert_str_eq(ids, "kept");
    free(ids);
    ck_assert_int_eq(convo_thread_delete(s, "kept", &err), 0);
    convo_close(s);
    s = open_store(NULL);
    ck_assert_int_eq(convo_append(s, "gone", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_append(s, "dying", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_save_extra(s, ".convo-import-0123", "{}", &err), 0);
    ck_assert_int_eq(convo_append(s, ".convo-import-0123", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_thread_delete(s, "gone", &err), 0);
    /* a delete killed after its mark: still a thread; after its fence: gone */
    raw_update("threads", BCON_NEW("_id", BCON_UTF8("dying")),
               BCON_NEW("$set", "{", "dying", BCON_BOOL(true), "}"));
    ids = page_ids(s, NULL, CONVO_ORDER_ID, 0, 10, NULL);
    ck_assert_str_eq(ids, "dying");
    free(ids);
    bson_oid_t g;
    thread_generation("dying", &g);
    forge_fence(&g, 1);
    ids = page_ids(s, NULL, CONVO_ORDER_RECENT, 0, 10, NULL);
    ck_assert_str_eq(ids, "");
    free(ids);
    convo_close(s);
}
END_TEST

void add_index_cases(Suite *s)
{
    TCase *tc = tcase_create("thread_index");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_index_layout);
    tcase_add_test(tc, test_index_used);
    tcase_add_test(tc, test_index_upgrade_from_v5);
    tcase_add_test(tc, test_index_repaired_on_read);
    tcase_add_test(tc, test_index_rewrite_repaired_on_read);
    tcase_add_test(tc, test_index_hidden);
    suite_add_tcase(s, tc);
}
