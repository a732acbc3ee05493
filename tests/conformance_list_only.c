/* conformance_list_only.c — convo_checkpoint_list_opts v5 only_channel: each
 * checkpoint listed with only what a walk over ancestors for one channel needs
 * (ids, parent, that channel without its list's items, its pending writes to
 * that channel resolved as usual), no body, metadata "{}", the log read for
 * those writes alone; the filter still on the stored metadata. */
#include "conformance.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *M[] = {
    "{\"role\":\"user\",\"content\":\"one\",\"id\":\"m0\"}",
    "{\"role\":\"assistant\",\"content\":\"two\",\"id\":\"m1\"}",
    "{\"role\":\"user\",\"content\":\"three\",\"id\":\"m2\"}",
    "{\"role\":\"assistant\",\"content\":\"four\",\"id\":\"m3\"}",
    "{\"role\":\"user\",\"content\":\"five\",\"id\":\"m4\"}",
};
static const char *FRESH = "{\"role\":\"user\",\"content\":\"not yet logged\",\"id\":\"w0\"}";
static const convo_blob REST = {"json", "{\"x\":1}", 7};
static const convo_blob COUNT = {"json", "5", 1};
static const convo_blob BODY = {"json", "{\"v\":4,\"ts\":\"now\"}", 19};
static const convo_blob OTHER = {"json", "\"other\"", 7};
static const char *put_ns = ""; /* the namespace put() and write_list() use */

/* Checkpoint id (parent or NULL, metadata step, a body) with "messages" M[0..n)
 * under `key` (with REST) or the list itself, and a plain "count". */
static void put(const char *tid, const char *id, const char *parent, size_t n, const char *key,
                int step)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = M;
    it.n = n;
    it.log = 1;
    it.key = key;
    if (key)
        it.rest = REST;
    convo_channel_in c[2] = {{"count", id, &COUNT}, {"messages", id, NULL}};
    const convo_items_in *per[2] = {NULL, &it};
    char meta[64];
    snprintf(meta, sizeof meta, "{\"step\":%d}", step);
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_ns = put_ns;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = meta;
    cp.body = BODY;
    cp.channels = c;
    cp.nchannels = 2;
    cp.channel_items = per;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
}

/* Task `task`'s writes to `id`: a list to "messages" (M[from..to) by seq, else
 * FRESH inline) at idx 0, and a plain value to "other" at idx 1. */
static void write_list(const char *tid, const char *id, const char *task, int64_t from,
                       int64_t to)
{
    int64_t seqs[8];
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    if (from >= 0) {
        for (int64_t q = from; q < to; q++)
            seqs[q - from] = q;
        it.items = &M[from];
        it.seqs = seqs;
        it.n = (size_t)(to - from);
    } else {
        it.items = &FRESH;
        it.n = 1;
    }
    const convo_items_in *per[2] = {&it, NULL};
    convo_write_in w[2] = {{0, "messages", {NULL, NULL, 0}}, {1, "other", OTHER}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = tid;
    in.checkpoint_ns = put_ns;
    in.checkpoint_id = id;
    in.task_id = task;
    in.writes = w;
    in.n = 2;
    in.items = per;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put_writes_ex(conf_store, &in, &err), err);
}

static convo_checkpoint_set *list(const char *tid, const char *only, const char *filter)
{
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    lo.only_channel = only;
    lo.filter_json = filter;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    return set;
}

static void same_blob(convo_blob a, convo_blob b)
{
    ck_assert_int_eq(!a.type, !b.type);
    if (!a.type)
        return;
    ck_assert_str_eq(a.type, b.type);
    ck_assert_uint_eq(a.len, b.len);
    ck_assert_int_eq(memcmp(a.bytes, b.bytes, a.len), 0);
}

/* b is a (listed whole) cut down to `channel`: the same ids, parent, length and
 * time; no body, metadata {}; the channel's version and value (a list without
 * items, its key and rest); a's writes to the channel, resolved alike. */
static void same_for_channel(const convo_checkpoint *a, const convo_checkpoint *b,
                             const char *channel)
{
    ck_assert_str_eq(convo_checkpoint_id(a), convo_checkpoint_id(b));
    ck_assert_int_eq(!convo_checkpoint_parent_id(a), !convo_checkpoint_parent_id(b));
    if (convo_checkpoint_parent_id(a))
        ck_assert_str_eq(convo_checkpoint_parent_id(a), convo_checkpoint_parent_id(b));
    ck_assert_int_eq(convo_checkpoint_log_length(a), convo_checkpoint_log_length(b));
    ck_assert_int_eq(convo_checkpoint_created_at(a), convo_checkpoint_created_at(b));
    ck_assert_ptr_nonnull(convo_checkpoint_body(a).type);
    ck_assert_ptr_null(convo_checkpoint_body(b).type);
    ck_assert_str_ne(convo_checkpoint_metadata(a), "{}");
    ck_assert_str_eq(convo_checkpoint_metadata(b), "{}");
    size_t found = 0;
    for (size_t i = 0; i < convo_checkpoint_channel_count(a); i++) {
        const char *va, *vb;
        convo_blob ba, bb;
        if (strcmp(convo_checkpoint_channel(a, i, &va, &ba), channel) != 0)
            continue;
        ck_assert_uint_eq(convo_checkpoint_channel_count(b), 1);
        ck_assert_str_eq(convo_checkpoint_channel(b, 0, &vb, &bb), channel);
        ck_assert_str_eq(va, vb);
        found++;
        convo_items ia, ib;
        int listed = convo_checkpoint_channel_items(a, i, &ia);
        ck_assert_int_eq(listed, convo_checkpoint_channel_items(b, 0, &ib));
        if (!listed) {
            same_blob(ba, bb);
            continue;
        }
        ck_assert_uint_eq(ib.n, 0);
        ck_assert_int_eq(!ia.key, !ib.key);
        if (ia.key)
            ck_assert_str_eq(ia.key, ib.key);
        same_blob(ia.rest, ib.rest);
    }
    ck_assert_uint_eq(convo_checkpoint_channel_count(b), found);
    size_t j = 0;
    for (size_t i = 0; i < convo_checkpoint_write_count(a); i++) {
        const char *ca, *cb, *pa, *pb;
        int64_t xa, xb;
        convo_blob ba, bb;
        const char *ta = convo_checkpoint_write(a, i, &pa, &xa, &ca, &ba);
        if (strcmp(ca, channel) != 0)
            continue;
        ck_assert_uint_lt(j, convo_checkpoint_write_count(b));
        const char *tb = convo_checkpoint_write(b, j, &pb, &xb, &cb, &bb);
        ck_assert_str_eq(ta, tb);
        ck_assert_str_eq(pa, pb);
        ck_assert_str_eq(ca, cb);
        ck_assert_int_eq(xa, xb);
        convo_items ia, ib;
        int listed = convo_checkpoint_write_items(a, i, &ia);
        ck_assert_int_eq(listed, convo_checkpoint_write_items(b, j, &ib));
        if (!listed)
            same_blob(ba, bb);
        else {
            ck_assert_uint_eq(ia.n, ib.n);
            for (size_t q = 0; q < ia.n; q++) {
                ck_assert_int_eq(ia.seqs[q], ib.seqs[q]);
                ck_assert_str_eq(ia.items[q], ib.items[q]);
            }
        }
        j++;
    }
    ck_assert_uint_eq(convo_checkpoint_write_count(b), j);
}

/* c1 <- c3 <- c5 (c5's messages under a key, as a delta channel's list), writes
 * on c3 (inline) and c5 (by seq), each with a write to "other" beside it. */
static void three(const char *tid)
{
    put(tid, "c1", NULL, 1, NULL, 1);
    put(tid, "c3", "c1", 3, NULL, 2);
    put(tid, "c5", "c3", 5, "messages", 3);
    write_list(tid, "c3", "task", -1, 0);
    write_list(tid, "c5", "task", 3, 5);
}

START_TEST(test_list_only_channel)
{
    char tid[256];
    TID(tid, "t");
    three(tid);
    convo_checkpoint_set *full = list(tid, NULL, NULL);
    ck_assert_uint_eq(convo_checkpoint_set_count(full), 3);
    const char *channels[] = {"messages", "count", "other"};
    for (size_t c = 0; c < 3; c++) {
        convo_checkpoint_set *only = list(tid, channels[c], NULL);
        ck_assert_uint_eq(convo_checkpoint_set_count(only), 3);
        for (size_t i = 0; i < 3; i++)
            same_for_channel(convo_checkpoint_set_get(full, i), convo_checkpoint_set_get(only, i),
                             channels[c]);
        convo_checkpoint_set_free(only);
    }
    /* what was read of the log: c5's write (messages 3..4: no message 0, so no
     * origin); nothing for c3 (its write is inline) nor c1 */
    convo_checkpoint_set *only = list(tid, "messages", NULL);
    ck_assert_uint_eq(convo_checkpoint_write_count(convo_checkpoint_set_get(only, 0)), 1);
    ck_assert_int_eq(convo_checkpoint_generation(convo_checkpoint_set_get(only, 0)), 0);
    ck_assert_int_eq(convo_checkpoint_log_origin(convo_checkpoint_set_get(only, 0)), -1);
    for (size_t i = 1; i < 3; i++)
        ck_assert_int_eq(convo_checkpoint_generation(convo_checkpoint_set_get(only, i)), -1);
    convo_checkpoint_set_free(only);
    /* a channel no checkpoint has: each with no channel and no write */
    only = list(tid, "nowhere", NULL);
    ck_assert_uint_eq(convo_checkpoint_set_count(only), 3);
    for (size_t i = 0; i < 3; i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(only, i);
        ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 0);
        ck_assert_uint_eq(convo_checkpoint_write_count(cp), 0);
        ck_assert_str_eq(convo_checkpoint_id(cp), convo_checkpoint_id(convo_checkpoint_set_get(full, i)));
    }
    convo_checkpoint_set_free(only);
    convo_checkpoint_set_free(full);
}
END_TEST

START_TEST(test_list_only_channel_filter_and_before)
{
    char tid[256];
    TID(tid, "t");
    three(tid);
    /* the filter applies to the stored metadata, though "{}" comes back */
    convo_checkpoint_set *set = list(tid, "messages", "{\"step\":2}");
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    ck_assert_str_eq(convo_checkpoint_id(convo_checkpoint_set_get(set, 0)), "c3");
    ck_assert_str_eq(convo_checkpoint_metadata(convo_checkpoint_set_get(set, 0)), "{}");
    convo_checkpoint_set_free(set);
    /* before and limit as without it: the ancestors of c5, one page */
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    lo.before = "c5";
    lo.limit = 1;
    lo.only_channel = "messages";
    convo_error err;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    const convo_checkpoint *c3 = convo_checkpoint_set_get(set, 0);
    ck_assert_str_eq(convo_checkpoint_id(c3), "c3");
    ck_assert_str_eq(convo_checkpoint_parent_id(c3), "c1");
    convo_items it;
    ck_assert_uint_eq(convo_checkpoint_write_count(c3), 1);
    ck_assert_int_eq(convo_checkpoint_write_items(c3, 0, &it), 1);
    ck_assert_uint_eq(it.n, 1);
    ck_assert_str_eq(it.items[0], FRESH);
    convo_checkpoint_set_free(set);
}
END_TEST

START_TEST(test_list_only_channel_versions)
{
    char tid[256];
    TID(tid, "t");
    three(tid);
    /* a version-4 caller's struct ends before the field: whatever follows it
     * in memory, everything comes back */
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.version = 4;
    lo.thread_id = tid;
    lo.only_channel = "messages";
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    const convo_checkpoint *c5 = convo_checkpoint_set_get(set, 0);
    ck_assert_uint_eq(convo_checkpoint_channel_count(c5), 2);
    ck_assert_uint_eq(convo_checkpoint_write_count(c5), 2);
    ck_assert_ptr_nonnull(convo_checkpoint_body(c5).type);
    convo_checkpoint_set_free(set);
    /* an empty name: an error, nothing listed */
    lo.version = CONVO_CHECKPOINT_LIST_OPTS_VERSION;
    lo.only_channel = "";
    set = NULL;
    ASSERT_FAILS(convo_checkpoint_list(conf_store, &lo, &set, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(set);
    /* with a known prefix: the write's texts below it left out as usual */
    convo_checkpoint_set *full = list(tid, NULL, NULL);
    lo.known_generation = convo_checkpoint_generation(convo_checkpoint_set_get(full, 0));
    lo.known_origin = convo_checkpoint_log_origin(convo_checkpoint_set_get(full, 0));
    convo_checkpoint_set_free(full);
    lo.known_length = 4;
    lo.only_channel = "messages";
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    c5 = convo_checkpoint_set_get(set, 0);
    convo_items it;
    ck_assert_int_eq(convo_checkpoint_write_items(c5, 0, &it), 1);
    ck_assert_uint_eq(it.n, 2);
    ck_assert_ptr_null(it.items[0]); /* seq 3, held by the caller */
    ck_assert_str_eq(it.items[1], M[4]);
    convo_checkpoint_set_free(set);
}
END_TEST

/* o listed whole and with only_channel "messages": the same checkpoints (thread,
 * namespace, id) in the same order, each cut down as same_for_channel says. */
static void same_listing(convo_checkpoint_list_opts o, size_t count)
{
    convo_checkpoint_set *full = NULL, *only = NULL;
    convo_error err;
    o.only_channel = NULL;
    ASSERT_OK(convo_checkpoint_list(conf_store, &o, &full, &err), err);
    o.only_channel = "messages";
    ASSERT_OK(convo_checkpoint_list(conf_store, &o, &only, &err), err);
    ck_assert_uint_eq(convo_checkpoint_set_count(full), count);
    ck_assert_uint_eq(convo_checkpoint_set_count(only), count);
    for (size_t i = 0; i < count; i++) {
        const convo_checkpoint *a = convo_checkpoint_set_get(full, i);
        const convo_checkpoint *b = convo_checkpoint_set_get(only, i);
        ck_assert_str_eq(convo_checkpoint_thread_id(a), convo_checkpoint_thread_id(b));
        ck_assert_str_eq(convo_checkpoint_ns(a), convo_checkpoint_ns(b));
        same_for_channel(a, b, "messages");
    }
    convo_checkpoint_set_free(full);
    convo_checkpoint_set_free(only);
}

START_TEST(test_list_only_channel_every_thread)
{
    /* two threads in a namespace of this test alone, listed with thread_id NULL:
     * whole, from `before` in the other thread, with a limit, with a filter */
    char ns[256], t1[256], t2[256];
    TID(ns, "ns");
    TID(t1, "a");
    TID(t2, "b");
    put_ns = ns;
    three(t1);
    three(t2);
    put_ns = "";
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.checkpoint_ns = ns;
    same_listing(o, 6);
    o.before = "c5";
    o.before_thread_id = t2;
    same_listing(o, 5); /* put before it: t1's three, then t2's c1 and c3 */
    o.limit = 1;
    same_listing(o, 1);
    o.limit = 0;
    o.before = NULL;
    o.before_thread_id = NULL;
    o.filter_json = "{\"step\":2}";
    same_listing(o, 2);
}
END_TEST

void conf_add_list_only_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "list_only");
    tcase_add_test(tc, test_list_only_channel);
    tcase_add_test(tc, test_list_only_channel_filter_and_before);
    tcase_add_test(tc, test_list_only_channel_versions);
    tcase_add_test(tc, test_list_only_channel_every_thread);
}
