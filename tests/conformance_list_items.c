/* conformance_list_items.c — convo_checkpoint_list_opts v4 without_channel_items:
 * the same checkpoints, metadata and pending writes as a full list, each channel
 * list with its key and rest but no item, and the log read for the writes alone
 * (what a walk over ancestors such as LangGraph's delta history needs). */
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

/* Checkpoint id (parent or NULL, metadata step) whose "messages" channel is
 * M[0..n) under `key` (with REST) or the list itself, plus a plain "count". */
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
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = meta;
    cp.channels = c;
    cp.nchannels = 2;
    cp.channel_items = per;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
}

/* A pending write of one list to `id`: M[from..to) by seq, else FRESH inline. */
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
    const convo_items_in *per[1] = {&it};
    convo_write_in w = {0, "messages", {NULL, NULL, 0}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = tid;
    in.checkpoint_id = id;
    in.task_id = task;
    in.writes = &w;
    in.n = 1;
    in.items = per;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put_writes_ex(conf_store, &in, &err), err);
}

static convo_checkpoint_set *list(const char *tid, unsigned int version, int without)
{
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.version = version;
    lo.thread_id = tid;
    lo.without_channel_items = without;
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

/* b is a (without the channels' items): ids, metadata, channels' versions,
 * keys and rests, plain values, and every write resolved alike. */
static void same_but_items(const convo_checkpoint *a, const convo_checkpoint *b)
{
    ck_assert_str_eq(convo_checkpoint_id(a), convo_checkpoint_id(b));
    ck_assert_int_eq(!convo_checkpoint_parent_id(a), !convo_checkpoint_parent_id(b));
    if (convo_checkpoint_parent_id(a))
        ck_assert_str_eq(convo_checkpoint_parent_id(a), convo_checkpoint_parent_id(b));
    ck_assert_str_eq(convo_checkpoint_metadata(a), convo_checkpoint_metadata(b));
    ck_assert_int_eq(convo_checkpoint_log_length(a), convo_checkpoint_log_length(b));
    ck_assert_uint_eq(convo_checkpoint_channel_count(a), convo_checkpoint_channel_count(b));
    for (size_t i = 0; i < convo_checkpoint_channel_count(a); i++) {
        const char *va, *vb;
        convo_blob ba, bb;
        ck_assert_str_eq(convo_checkpoint_channel(a, i, &va, &ba),
                         convo_checkpoint_channel(b, i, &vb, &bb));
        ck_assert_str_eq(va, vb);
        convo_items ia, ib;
        int listed = convo_checkpoint_channel_items(a, i, &ia);
        ck_assert_int_eq(listed, convo_checkpoint_channel_items(b, i, &ib));
        if (!listed) {
            same_blob(ba, bb);
            continue;
        }
        ck_assert_uint_gt(ia.n, 0);
        ck_assert_uint_eq(ib.n, 0);
        ck_assert_int_eq(!ia.key, !ib.key);
        if (ia.key)
            ck_assert_str_eq(ia.key, ib.key);
        same_blob(ia.rest, ib.rest);
    }
    ck_assert_uint_eq(convo_checkpoint_write_count(a), convo_checkpoint_write_count(b));
    for (size_t i = 0; i < convo_checkpoint_write_count(a); i++) {
        convo_items ia, ib;
        ck_assert_int_eq(convo_checkpoint_write_items(a, i, &ia), 1);
        ck_assert_int_eq(convo_checkpoint_write_items(b, i, &ib), 1);
        ck_assert_uint_eq(ia.n, ib.n);
        for (size_t j = 0; j < ia.n; j++) {
            ck_assert_int_eq(ia.seqs[j], ib.seqs[j]);
            ck_assert_str_eq(ia.items[j], ib.items[j]);
        }
    }
}

START_TEST(test_list_without_channel_items)
{
    char tid[256];
    TID(tid, "t");
    put(tid, "c1", NULL, 1, NULL, 1);
    put(tid, "c3", "c1", 3, NULL, 2);
    put(tid, "c5", "c3", 5, "messages", 3);
    write_list(tid, "c3", "task", -1, 0); /* inline: not in the log */
    write_list(tid, "c5", "task", 3, 5);  /* the log's messages 3 and 4 */
    convo_checkpoint_set *full = list(tid, CONVO_CHECKPOINT_LIST_OPTS_VERSION, 0);
    convo_checkpoint_set *lean = list(tid, CONVO_CHECKPOINT_LIST_OPTS_VERSION, 1);
    ck_assert_uint_eq(convo_checkpoint_set_count(full), 3);
    ck_assert_uint_eq(convo_checkpoint_set_count(lean), 3);
    for (size_t i = 0; i < 3; i++)
        same_but_items(convo_checkpoint_set_get(full, i), convo_checkpoint_set_get(lean, i));
    /* what was read of the log: the full list reads it from message 0 for c5's
     * list; without items c5 reads messages 3..4 for its write (message 0 not
     * read: no origin), c3 and c1 nothing (no generation: no log read at all) */
    const convo_checkpoint *f5 = convo_checkpoint_set_get(full, 0);
    const convo_checkpoint *l5 = convo_checkpoint_set_get(lean, 0);
    ck_assert_int_eq(convo_checkpoint_generation(f5), 0);
    ck_assert_int_ge(convo_checkpoint_log_origin(f5), 0);
    ck_assert_int_eq(convo_checkpoint_generation(l5), 0);
    ck_assert_int_eq(convo_checkpoint_log_origin(l5), -1);
    for (size_t i = 1; i < 3; i++) {
        ck_assert_int_eq(convo_checkpoint_generation(convo_checkpoint_set_get(full, i)), 0);
        ck_assert_int_eq(convo_checkpoint_generation(convo_checkpoint_set_get(lean, i)), -1);
        ck_assert_int_eq(convo_checkpoint_log_origin(convo_checkpoint_set_get(lean, i)), -1);
    }
    convo_checkpoint_set_free(full);
    convo_checkpoint_set_free(lean);
}
END_TEST

START_TEST(test_list_without_channel_items_versions)
{
    char tid[256];
    TID(tid, "t");
    put(tid, "c1", NULL, 1, NULL, 1);
    put(tid, "c3", "c1", 3, NULL, 2);
    /* a version-3 caller's struct ends before the field: whatever follows it
     * in memory, its lists come back whole */
    convo_checkpoint_set *v3 = list(tid, 3, 1);
    convo_items it;
    const convo_checkpoint *c3 = convo_checkpoint_set_get(v3, 0);
    ck_assert_int_eq(convo_checkpoint_channel_items(c3, 1, &it), 1);
    ck_assert_uint_eq(it.n, 3);
    ck_assert_str_eq(it.items[2], M[2]);
    convo_checkpoint_set_free(v3);
    /* neither 0 nor 1: an error, nothing listed */
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    lo.without_channel_items = 2;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ASSERT_FAILS(convo_checkpoint_list(conf_store, &lo, &set, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(set);
    lo.version = CONVO_CHECKPOINT_LIST_OPTS_VERSION + 1;
    lo.without_channel_items = 1;
    ASSERT_FAILS(convo_checkpoint_list(conf_store, &lo, &set, &err), err, CONVO_EINVAL);
    /* with a known prefix too: the writes' texts below it left out as usual */
    write_list(tid, "c3", "task", 1, 3);
    convo_checkpoint_set *full = list(tid, CONVO_CHECKPOINT_LIST_OPTS_VERSION, 0);
    int64_t gen = convo_checkpoint_generation(convo_checkpoint_set_get(full, 0));
    int64_t origin = convo_checkpoint_log_origin(convo_checkpoint_set_get(full, 0));
    convo_checkpoint_set_free(full);
    lo.version = CONVO_CHECKPOINT_LIST_OPTS_VERSION;
    lo.known_generation = gen;
    lo.known_length = 2;
    lo.known_origin = origin;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    c3 = convo_checkpoint_set_get(set, 0);
    ck_assert_int_eq(convo_checkpoint_channel_items(c3, 1, &it), 1);
    ck_assert_uint_eq(it.n, 0);
    ck_assert_int_eq(convo_checkpoint_write_items(c3, 0, &it), 1);
    ck_assert_uint_eq(it.n, 2);
    ck_assert_ptr_null(it.items[0]); /* seq 1, held by the caller */
    ck_assert_str_eq(it.items[1], M[2]);
    convo_checkpoint_set_free(set);
}
END_TEST

void conf_add_list_items_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "list_items");
    tcase_add_test(tc, test_list_without_channel_items);
    tcase_add_test(tc, test_list_without_channel_items_versions);
}
