/* log_refs.h — what the checks of a put with log references share
 * (tests/sqlite-refs.c, tests/postgres_refs.c): the put of a "messages"
 * channel of thread "t" as log items, the node's answer as a pending write,
 * and the seq that write refers to. */
#ifndef CONVO_TESTS_LOG_REFS_H
#define CONVO_TESTS_LOG_REFS_H

#include <check.h>
#include <convo.h>
#include <stdint.h>

static const char *U1 = "{\"role\":\"user\",\"content\":\"hi\"}";
static const char *A1 = "{\"role\":\"assistant\",\"content\":\"hello\"}";

/* Checkpoint id (parent or NULL) of thread "t" whose "messages" channel is
 * the list items (hints: NULL or seqs), under a generation condition (-1: none). */
static inline int put_items(convo_store *s, const char *id, const char *parent,
                            const char *const *items, const int64_t *hints, size_t n,
                            int64_t expected_generation, convo_error *err)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = items;
    it.seqs = hints;
    it.n = n;
    it.log = 1;
    const convo_items_in *per[1] = {&it};
    convo_channel_in c = {"messages", id, NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.channels = &c;
    cp.nchannels = 1;
    cp.channel_items = per;
    cp.expected_generation = expected_generation;
    return convo_checkpoint_put(s, &cp, err);
}

/* The node's answer (A1) as a pending write of checkpoint id, inline. */
static inline void write_answer(convo_store *s, const char *id)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &A1;
    it.n = 1;
    const convo_items_in *per[1] = {&it};
    convo_write_in w = {0, "messages", {NULL, NULL, 0}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = "t";
    in.checkpoint_id = id;
    in.task_id = "agent";
    in.writes = &w;
    in.n = 1;
    in.items = per;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes_ex(s, &in, &err) == 0, "%s", err.message);
}

/* The seq the pending write of checkpoint id refers to (-1: inline). */
static inline int64_t write_seq(convo_store *s, const char *id)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", NULL, id, &cp, &err) == 0, "%s", err.message);
    convo_items it;
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    ck_assert_uint_eq(it.n, 1);
    ck_assert_str_eq(it.items[0], A1);
    int64_t seq = it.seqs[0];
    convo_checkpoint_free(cp);
    return seq;
}

#endif
