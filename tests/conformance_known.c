/* conformance_known.c — reads that leave out what the caller holds of the log
 * (convo_checkpoint_get_ex, convo_checkpoint_list_opts v3): the known prefix
 * comes back without texts only while the thread is the same one at the same
 * generation; a tail rewrite, or the thread deleted and started again under
 * its id, gives every text again; bad input is a clear error. */
#include "conformance.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *M[] = {
    "{\"role\":\"user\",\"content\":\"one\",\"id\":\"m0\"}",
    "{\"role\":\"assistant\",\"content\":\"two\",\"id\":\"m1\"}",
    "{\"role\":\"user\",\"content\":\"three\",\"id\":\"m2\"}",
    "{\"role\":\"assistant\",\"content\":\"four\",\"id\":\"m3\"}",
    "{\"role\":\"user\",\"content\":\"five\",\"id\":\"m4\"}",
};
static const char *OTHER[] = {
    "{\"role\":\"user\",\"content\":\"another\",\"id\":\"o0\"}",
    "{\"role\":\"assistant\",\"content\":\"thread\",\"id\":\"o1\"}",
    "{\"role\":\"user\",\"content\":\"same id\",\"id\":\"o2\"}",
    "{\"role\":\"assistant\",\"content\":\"new life\",\"id\":\"o3\"}",
    "{\"role\":\"user\",\"content\":\"again\",\"id\":\"o4\"}",
};

/* Checkpoint id (parent or NULL) whose messages channel is texts[0..n), in the log. */
static void put_msgs(const char *tid, const char *id, const char *parent, const char *const *texts,
                     size_t n)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = texts;
    it.n = n;
    it.log = 1;
    const convo_items_in *per[1] = {&it};
    convo_channel_in c = {"messages", id, NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.channels = &c;
    cp.nchannels = 1;
    cp.channel_items = per;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
}

/* A thread of three checkpoints: c1 = M[0..1), c3 = M[0..3), c5 = M[0..5). */
static void build(const char *tid, const char *const *texts)
{
    put_msgs(tid, "c1", NULL, texts, 1);
    put_msgs(tid, "c3", "c1", texts, 3);
    put_msgs(tid, "c5", "c3", texts, 5);
}

static convo_checkpoint *get_known(const char *tid, const char *id, int64_t gen, int64_t len,
                                   int64_t origin)
{
    convo_checkpoint_get_opts o = CONVO_CHECKPOINT_GET_OPTS_INIT;
    o.thread_id = tid;
    o.checkpoint_id = id;
    o.known_generation = gen;
    o.known_length = len;
    o.known_origin = origin;
    convo_checkpoint *cp = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_get_ex(conf_store, &o, &cp, &err), err);
    return cp;
}

/* cp's messages channel: texts[i] for seqs >= elided, no text below. */
static void assert_msgs(const convo_checkpoint *cp, const char *const *texts, size_t n,
                        int64_t elided)
{
    convo_items it;
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 1);
    ck_assert_int_eq(convo_checkpoint_channel_items(cp, 0, &it), 1);
    ck_assert_uint_eq(it.n, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(it.seqs[i], (int64_t)i);
        if ((int64_t)i < elided) {
            ck_assert_ptr_null(it.items[i]);
            ck_assert_uint_eq(it.lengths[i], 0);
        } else {
            ck_assert_ptr_nonnull(it.items[i]);
            ck_assert_str_eq(it.items[i], texts[i]);
        }
    }
}

START_TEST(test_known_prefix_left_out)
{
    char tid[256];
    TID(tid, "t");
    build(tid, M);
    /* a plain get gives every text, the generation and the origin */
    convo_checkpoint *cp = get_known(tid, "c3", -1, 0, -1);
    assert_msgs(cp, M, 3, 0);
    int64_t gen = convo_checkpoint_generation(cp), origin = convo_checkpoint_log_origin(cp);
    ck_assert_int_eq(gen, 0);
    ck_assert_int_ge(origin, 0);
    convo_checkpoint_free(cp);
    /* holding [0, 3): only the two new texts come back */
    cp = get_known(tid, "c5", gen, 3, origin);
    assert_msgs(cp, M, 5, 3);
    ck_assert_int_eq(convo_checkpoint_generation(cp), gen);
    ck_assert_int_eq(convo_checkpoint_log_origin(cp), origin);
    convo_checkpoint_free(cp);
    /* holding more than the checkpoint refers to: no text at all */
    cp = get_known(tid, "c3", gen, 5, origin);
    assert_msgs(cp, M, 3, 3);
    convo_checkpoint_free(cp);
    /* the latest (checkpoint_id NULL) */
    cp = get_known(tid, NULL, gen, 4, origin);
    ck_assert_str_eq(convo_checkpoint_id(cp), "c5");
    assert_msgs(cp, M, 5, 4);
    convo_checkpoint_free(cp);
    /* a list of the thread, newest first, each with the known prefix left out */
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    lo.known_generation = gen;
    lo.known_length = 3;
    lo.known_origin = origin;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 3);
    assert_msgs(convo_checkpoint_set_get(set, 0), M, 5, 3);
    assert_msgs(convo_checkpoint_set_get(set, 1), M, 3, 3);
    assert_msgs(convo_checkpoint_set_get(set, 2), M, 1, 1);
    convo_checkpoint_set_free(set);
    /* a known origin that is not this thread's: every text */
    cp = get_known(tid, "c5", gen, 3, origin + 1);
    assert_msgs(cp, M, 5, 0);
    ck_assert_int_eq(convo_checkpoint_log_origin(cp), origin);
    convo_checkpoint_free(cp);
}
END_TEST

START_TEST(test_known_prefix_after_rewrite)
{
    char tid[256];
    TID(tid, "t");
    build(tid, M);
    convo_checkpoint *cp = get_known(tid, "c3", -1, 0, -1);
    int64_t gen = convo_checkpoint_generation(cp), origin = convo_checkpoint_log_origin(cp);
    convo_checkpoint_free(cp);
    /* pop messages 3.. (c5 dropped): the generation moves on; a new branch
     * from c3 puts two other messages at seqs 3 and 4 */
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = 1;
    convo_rewrite_result r;
    convo_error err;
    ASSERT_OK(convo_replace_tail(conf_store, tid, 3, NULL, NULL, 0, &o, &r, &err), err);
    const char *now[] = {M[0], M[1], M[2], OTHER[3], OTHER[4]};
    put_msgs(tid, "d5", "c3", now, 5);
    /* the caller's [0, 5) of the old generation is stale: every text again */
    cp = get_known(tid, "d5", gen, 5, origin);
    assert_msgs(cp, now, 5, 0);
    ck_assert_int_eq(convo_checkpoint_generation(cp), gen + 1);
    ck_assert_int_eq(convo_checkpoint_log_origin(cp), origin); /* message 0 kept */
    convo_checkpoint_free(cp);
    /* and with the new generation the prefix is left out again */
    cp = get_known(tid, "d5", gen + 1, 4, origin);
    assert_msgs(cp, now, 5, 4);
    convo_checkpoint_free(cp);
}
END_TEST

START_TEST(test_known_prefix_thread_started_again)
{
    char tid[256];
    TID(tid, "t");
    build(tid, M);
    convo_checkpoint *cp = get_known(tid, "c5", -1, 0, -1);
    int64_t gen = convo_checkpoint_generation(cp), origin = convo_checkpoint_log_origin(cp);
    convo_checkpoint_free(cp);
    convo_error err;
    ASSERT_OK(convo_thread_delete(conf_store, tid, &err), err);
    usleep(3000); /* message 0 of the new thread is created later, on every clock */
    build(tid, OTHER); /* the same id, checkpoint ids and shape: generation 0 again */
    cp = get_known(tid, "c5", gen, 5, origin);
    ck_assert_int_eq(convo_checkpoint_generation(cp), gen);
    ck_assert_int_ne(convo_checkpoint_log_origin(cp), origin);
    assert_msgs(cp, OTHER, 5, 0); /* never the old thread's texts */
    convo_checkpoint_free(cp);
}
END_TEST

START_TEST(test_known_prefix_bad_input)
{
    char tid[256];
    TID(tid, "t");
    build(tid, M);
    convo_checkpoint_get_opts o = CONVO_CHECKPOINT_GET_OPTS_INIT;
    o.thread_id = tid;
    convo_checkpoint *cp = (convo_checkpoint *)&o; /* must be reset to NULL */
    convo_error err;
    o.known_length = -1;
    ASSERT_FAILS(convo_checkpoint_get_ex(conf_store, &o, &cp, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(cp);
    o.known_length = 2; /* without the generation and origin */
    ASSERT_FAILS(convo_checkpoint_get_ex(conf_store, &o, &cp, &err), err, CONVO_EINVAL);
    o.known_generation = 0; /* without the origin */
    ASSERT_FAILS(convo_checkpoint_get_ex(conf_store, &o, &cp, &err), err, CONVO_EINVAL);
    o.known_origin = 0;
    o.version = 2; /* unknown version */
    ASSERT_FAILS(convo_checkpoint_get_ex(conf_store, &o, &cp, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_checkpoint_get_ex(conf_store, NULL, &cp, &err), err, CONVO_EINVAL);
    o.version = CONVO_CHECKPOINT_GET_OPTS_VERSION;
    o.thread_id = "";
    ASSERT_FAILS(convo_checkpoint_get_ex(conf_store, &o, &cp, &err), err, CONVO_EINVAL);
    /* a list with a known prefix must name its thread */
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.known_generation = 0;
    lo.known_length = 1;
    lo.known_origin = 0;
    convo_checkpoint_set *set = NULL;
    ASSERT_FAILS(convo_checkpoint_list(conf_store, &lo, &set, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(set);
    /* a version-2 caller's struct ends before the known fields: read as none */
    convo_checkpoint_list_opts v2 = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    v2.version = 2;
    v2.thread_id = tid;
    ASSERT_OK(convo_checkpoint_list(conf_store, &v2, &set, &err), err);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 3);
    assert_msgs(convo_checkpoint_set_get(set, 0), M, 5, 0);
    convo_checkpoint_set_free(set);
}
END_TEST

/* A seq the caller gives for an item must name a message the thread has: a
 * reference past the log would dangle (every later get CONVO_ECORRUPT). A
 * conflict, as the caller's view of the log is out of date: a saver puts
 * again with the texts. */
START_TEST(test_seq_hint_past_the_log)
{
    char tid[256];
    TID(tid, "t");
    build(tid, M); /* 5 messages, c5 lists them all */
    convo_error err;
    const char *list[] = {M[0], M[1], M[2], M[3], M[4], M[0]};
    int64_t seqs[] = {0, 1, 2, 3, 4, 5}; /* 5: past the log (and past c5's log_length) */
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = list;
    it.seqs = seqs;
    it.n = 6;
    it.log = 1;
    const convo_items_in *per[1] = {&it};
    convo_channel_in c = {"messages", "bad", NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = "bad";
    cp.parent_id = "c5";
    cp.channels = &c;
    cp.nchannels = 1;
    cp.channel_items = per;
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &cp, &err), err, CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "item 5"));
    convo_checkpoint *got = NULL;
    ASSERT_FAILS(convo_checkpoint_get(conf_store, tid, "", "bad", &got, &err), err,
                 CONVO_ENOTFOUND);
    seqs[5] = (int64_t)1 << 32; /* far past it, with no parent to compare with */
    cp.parent_id = NULL;
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &cp, &err), err, CONVO_ECONFLICT);
    /* a pending write naming a seq past the log */
    convo_items_in w = CONVO_ITEMS_IN_INIT;
    int64_t wseq[] = {9};
    w.items = &M[0];
    w.seqs = wseq;
    w.n = 1;
    const convo_items_in *wper[1] = {&w};
    convo_write_in wr = {0, "messages", {NULL, NULL, 0}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = tid;
    in.checkpoint_id = "c5";
    in.task_id = "task";
    in.writes = &wr;
    in.n = 1;
    in.items = wper;
    ASSERT_FAILS(convo_checkpoint_put_writes_ex(conf_store, &in, &err), err, CONVO_ECONFLICT);
    got = get_known(tid, "c5", -1, 0, -1);
    ck_assert_uint_eq(convo_checkpoint_write_count(got), 0); /* nothing written */
    convo_checkpoint_free(got);
    /* the last message's own seq is fine, on a put and on a write */
    wseq[0] = 4;
    w.items = &M[4];
    ASSERT_OK(convo_checkpoint_put_writes_ex(conf_store, &in, &err), err);
    seqs[5] = 0;
    list[5] = M[0];
    cp.checkpoint_id = "ok";
    cp.parent_id = "c5";
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
}
END_TEST

void conf_add_known_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "known");
    tcase_add_test(tc, test_known_prefix_left_out);
    tcase_add_test(tc, test_known_prefix_after_rewrite);
    tcase_add_test(tc, test_known_prefix_thread_started_again);
    tcase_add_test(tc, test_known_prefix_bad_input);
    tcase_add_test(tc, test_seq_hint_past_the_log);
}
