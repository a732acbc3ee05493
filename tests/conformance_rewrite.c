/* conformance_rewrite.c — the tail rewrite (convo_replace_tail) and the thread
 * generation, on every driver: pop, replace, the conditions (length,
 * generation, the caller's view of the tail), idempotency, checkpoints that
 * refer to removed messages, fork/export/import of rewritten threads, races. */
#include "conformance.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const THREE[] = {"{\"role\":\"user\",\"content\":\"a\"}",
                                    "{\"role\":\"assistant\",\"content\":\"b\"}",
                                    "{\"role\":\"user\",\"content\":\"c\"}"};

static int64_t generation_of(convo_store *s, const char *tid)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.tail = 1;
    convo_history *h = conf_load(s, tid, &lo);
    int64_t g = convo_history_generation(h);
    convo_history_free(h);
    return g;
}

static int rewrite(const char *tid, int64_t keep, const char *const *msgs, size_t n,
                   const convo_rewrite_opts *o, convo_rewrite_result *r, convo_error *err)
{
    return convo_replace_tail(conf_store, tid, keep, msgs, NULL, n, o, r, err);
}

START_TEST(test_rewrite_pop)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    ck_assert_int_eq(generation_of(conf_store, tid), 0);
    convo_rewrite_result r;
    convo_error err;
    ASSERT_OK(rewrite(tid, 2, NULL, 0, NULL, &r, &err), err);
    ck_assert_int_eq(r.first_seq, 2);
    ck_assert_uint_eq(r.count, 0);
    ck_assert_int_eq(r.removed, 1);
    ck_assert_int_eq(r.generation, 1);
    ck_assert_int_eq(r.replayed, 0);
    convo_history *h = conf_load(conf_store, tid, NULL);
    ck_assert_int_eq(convo_history_length(h), 2);
    ck_assert_int_eq(convo_history_generation(h), 1);
    conf_assert_message(h, 0, THREE[0], strlen(THREE[0]), "user", 0);
    conf_assert_message(h, 1, THREE[1], strlen(THREE[1]), "assistant", 1);
    convo_history_free(h);
    /* the log grows on from the new tail, seq dense */
    ck_assert_int_eq(conf_append(conf_store, tid, &THREE[2], 1), 2);
    /* pop everything: the thread stays, empty, with its extra */
    convo_error e2;
    ASSERT_OK(convo_save_extra(conf_store, tid, "{\"title\":\"x\"}", &e2), e2);
    ASSERT_OK(rewrite(tid, 0, NULL, 0, NULL, &r, &err), err);
    ck_assert_int_eq(r.removed, 3);
    ck_assert_int_eq(r.generation, 2);
    ck_assert_int_eq(conf_length(conf_store, tid), 0);
    conf_assert_extra(conf_store, tid, "{\"title\":\"x\"}");
}
END_TEST

START_TEST(test_rewrite_replace)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    int64_t before = 0;
    {
        convo_history *h = conf_load(conf_store, tid, NULL);
        before = convo_history_created_at(h, 2);
        convo_history_free(h);
    }
    const char *fresh[] = {"{\"role\":\"assistant\",\"content\":\"B2\",\"id\":\"m1\"}",
                           "{\"content\":\"tool out\", \"role\" : \"tool\"}"};
    convo_rewrite_result r;
    convo_error err;
    ASSERT_OK(rewrite(tid, 1, fresh, 2, NULL, &r, &err), err);
    ck_assert_int_eq(r.first_seq, 1);
    ck_assert_uint_eq(r.count, 2);
    ck_assert_int_eq(r.removed, 2);
    convo_history *h = conf_load(conf_store, tid, NULL);
    ck_assert_int_eq(convo_history_length(h), 3);
    conf_assert_message(h, 0, THREE[0], strlen(THREE[0]), "user", 0);
    conf_assert_message(h, 1, fresh[0], strlen(fresh[0]), "assistant", 1);
    conf_assert_message(h, 2, fresh[1], strlen(fresh[1]), "tool", 2);
    ck_assert(convo_history_created_at(h, 1) >= before);
    convo_history_free(h);
    /* keep == length: a plain append that still counts as a rewrite */
    ASSERT_OK(rewrite(tid, 3, &THREE[0], 1, NULL, &r, &err), err);
    ck_assert_int_eq(r.generation, 2);
    ck_assert_int_eq(conf_length(conf_store, tid), 4);
}
END_TEST

START_TEST(test_rewrite_conditions)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    convo_rewrite_result r;
    convo_error err;
    o.expected_length = 2;
    ASSERT_FAILS(rewrite(tid, 1, &THREE[0], 1, &o, &r, &err), err, CONVO_ECONFLICT);
    o.expected_length = 3;
    o.expected_generation = 1;
    ASSERT_FAILS(rewrite(tid, 1, &THREE[0], 1, &o, &r, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, tid), 3);
    ck_assert_int_eq(generation_of(conf_store, tid), 0);
    o.expected_generation = 0;
    ASSERT_OK(rewrite(tid, 2, NULL, 0, &o, &r, &err), err);
    ck_assert_int_eq(r.generation, 1);
    /* the same conditions again: stale now */
    o.expected_length = 2;
    ASSERT_FAILS(rewrite(tid, 1, NULL, 0, &o, &r, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, tid), 2);

    /* append, put and fork can require the generation */
    convo_append_opts ao = CONVO_APPEND_OPTS_INIT;
    convo_append_result ar;
    ao.expected_generation = 0;
    ASSERT_FAILS(convo_append(conf_store, tid, &THREE[2], NULL, 1, &ao, &ar, &err), err,
                 CONVO_ECONFLICT);
    ao.expected_generation = 1;
    ASSERT_OK(convo_append(conf_store, tid, &THREE[2], NULL, 1, &ao, &ar, &err), err);
    ck_assert_int_eq(ar.first_seq, 2);
    char fresh[256];
    TID(fresh, "new");
    ao.expected_generation = 0; /* a thread that does not exist yet is at 0 */
    ASSERT_OK(convo_append(conf_store, fresh, &THREE[0], NULL, 1, &ao, &ar, &err), err);

    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = "c1";
    cp.messages = &THREE[0];
    cp.nmessages = 1;
    cp.expected_length = 3;
    cp.log_length = 4;
    cp.expected_generation = 0;
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &cp, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, tid), 3);
    cp.expected_generation = 1;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
    ck_assert_int_eq(conf_length(conf_store, tid), 4);

    char dst[256];
    TID(dst, "fork");
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.expected_generation = 0;
    ASSERT_FAILS(convo_thread_fork_ex(conf_store, tid, dst, -1, &fo, &err), err,
                 CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, dst), -1);
    fo.expected_generation = 1;
    ASSERT_OK(convo_thread_fork_ex(conf_store, tid, dst, 2, &fo, &err), err);
    ck_assert_int_eq(conf_length(conf_store, dst), 2);
    ck_assert_int_eq(generation_of(conf_store, dst), 1);
}
END_TEST

START_TEST(test_rewrite_expected_suffix)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    const char *repl[] = {"{\"role\":\"assistant\",\"content\":\"new\"}"};
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    convo_rewrite_result r;
    convo_error err;
    /* stale view: the last message is not what the caller thinks */
    const char *stale[] = {THREE[1], "{\"role\":\"user\",\"content\":\"C\"}"};
    o.expected_suffix = stale;
    o.nexpected_suffix = 2;
    ASSERT_FAILS(rewrite(tid, 1, repl, 1, &o, &r, &err), err, CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "not the expected"));
    /* a view of the wrong size */
    o.expected_suffix = &THREE[2];
    o.nexpected_suffix = 1;
    ASSERT_FAILS(rewrite(tid, 1, repl, 1, &o, &r, &err), err, CONVO_ECONFLICT);
    convo_history *h = conf_load(conf_store, tid, NULL);
    ck_assert_int_eq(convo_history_length(h), 3);
    ck_assert_int_eq(convo_history_generation(h), 0);
    conf_assert_message(h, 2, THREE[2], strlen(THREE[2]), "user", 2);
    convo_history_free(h);
    /* the right view, with lengths */
    size_t lens[] = {strlen(THREE[1]), strlen(THREE[2])};
    o.expected_suffix = &THREE[1];
    o.expected_suffix_lengths = lens;
    o.nexpected_suffix = 2;
    ASSERT_OK(rewrite(tid, 1, repl, 1, &o, &r, &err), err);
    ck_assert_int_eq(conf_length(conf_store, tid), 2);
    /* an empty view: only when nothing is after keep */
    static const char *none[1];
    o.expected_suffix = none;
    o.expected_suffix_lengths = NULL;
    o.nexpected_suffix = 0;
    ASSERT_FAILS(rewrite(tid, 1, NULL, 0, &o, &r, &err), err, CONVO_ECONFLICT);
    ASSERT_OK(rewrite(tid, 2, &THREE[2], 1, &o, &r, &err), err);
    ck_assert_int_eq(conf_length(conf_store, tid), 3);
}
END_TEST

START_TEST(test_rewrite_idempotent)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    const char *repl[] = {"{\"role\":\"assistant\",\"content\":\"again\"}"};
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.idempotency_key = "op-1";
    o.expected_length = 3;
    o.expected_suffix = &THREE[1];
    o.nexpected_suffix = 2;
    convo_rewrite_result r, r2;
    convo_error err;
    ASSERT_OK(rewrite(tid, 1, repl, 1, &o, &r, &err), err);
    ck_assert_int_eq(r.replayed, 0);
    /* the retry: its conditions are stale, its key answers */
    ASSERT_OK(rewrite(tid, 1, repl, 1, &o, &r2, &err), err);
    ck_assert_int_eq(r2.replayed, 1);
    ck_assert_int_eq(r2.first_seq, 1);
    ck_assert_uint_eq(r2.count, 1);
    ck_assert_int_eq(r2.generation, 1);
    ck_assert_int_eq(generation_of(conf_store, tid), 1);
    ck_assert_int_eq(conf_length(conf_store, tid), 2);
    /* the same key with another call is refused, nothing written */
    const char *other[] = {"{\"role\":\"assistant\",\"content\":\"other\"}"};
    ASSERT_FAILS(rewrite(tid, 1, other, 1, &o, &r2, &err), err, CONVO_ECONFLICT);
    ASSERT_FAILS(rewrite(tid, 0, repl, 1, &o, &r2, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, tid), 2);
    ck_assert_int_eq(generation_of(conf_store, tid), 1);
    /* a pop under a key replays too */
    convo_rewrite_opts p = CONVO_REWRITE_OPTS_INIT;
    p.idempotency_key = "pop-1";
    p.expected_length = 2;
    ASSERT_OK(rewrite(tid, 1, NULL, 0, &p, &r, &err), err);
    ASSERT_OK(rewrite(tid, 1, NULL, 0, &p, &r2, &err), err);
    ck_assert_int_eq(r2.replayed, 1);
    ck_assert_int_eq(conf_length(conf_store, tid), 1);
    ck_assert_int_eq(generation_of(conf_store, tid), 2);
}
END_TEST

/* An append whose messages a rewrite removed: a retry must not answer with
 * seqs that hold other messages now. */
START_TEST(test_rewrite_removed_append_key)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 2);
    convo_append_opts ao = CONVO_APPEND_OPTS_INIT;
    ao.idempotency_key = "k";
    convo_append_result ar;
    convo_error err;
    ASSERT_OK(convo_append(conf_store, tid, &THREE[2], NULL, 1, &ao, &ar, &err), err);
    ck_assert_int_eq(ar.first_seq, 2);
    convo_rewrite_result r;
    ASSERT_OK(rewrite(tid, 2, NULL, 0, NULL, &r, &err), err);
    /* removed: the retry is a conflict, not a replay of seq 2 */
    ASSERT_FAILS(convo_append(conf_store, tid, &THREE[2], NULL, 1, &ao, &ar, &err), err,
                 CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, tid), 2);
    /* other messages at that seq now: still a conflict */
    conf_append(conf_store, tid, &THREE[0], 1);
    ASSERT_FAILS(convo_append(conf_store, tid, &THREE[2], NULL, 1, &ao, &ar, &err), err,
                 CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, tid), 3);
}
END_TEST

START_TEST(test_rewrite_bad_input)
{
    char tid[256], missing[256];
    TID(tid, "t");
    TID(missing, "missing");
    conf_append(conf_store, tid, THREE, 3);
    convo_rewrite_result r;
    convo_error err;
    ASSERT_FAILS(rewrite(missing, 0, NULL, 0, NULL, &r, &err), err, CONVO_ENOTFOUND);
    ck_assert_int_eq(conf_length(conf_store, missing), -1);
    ASSERT_FAILS(rewrite(tid, -1, NULL, 0, NULL, &r, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(rewrite(tid, 4, &THREE[0], 1, NULL, &r, &err), err, CONVO_EINVAL);
    const char *bad[] = {THREE[0], "{\"content\":\"no role\"}"};
    ASSERT_FAILS(rewrite(tid, 1, bad, 2, NULL, &r, &err), err, CONVO_EINVAL);
    const char *notjson[] = {"{\"role\":\"user\""};
    ASSERT_FAILS(rewrite(tid, 1, notjson, 1, NULL, &r, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(rewrite(tid, 1, NULL, 2, NULL, &r, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(rewrite("", 1, NULL, 0, NULL, &r, &err), err, CONVO_EINVAL);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.version = 99;
    ASSERT_FAILS(rewrite(tid, 1, NULL, 0, &o, &r, &err), err, CONVO_EINVAL);
    o = (convo_rewrite_opts)CONVO_REWRITE_OPTS_INIT;
    o.expected_length = -2;
    ASSERT_FAILS(rewrite(tid, 1, NULL, 0, &o, &r, &err), err, CONVO_EINVAL);
    o = (convo_rewrite_opts)CONVO_REWRITE_OPTS_INIT;
    o.nexpected_suffix = 1;
    ASSERT_FAILS(rewrite(tid, 1, NULL, 0, &o, &r, &err), err, CONVO_EINVAL);
    o = (convo_rewrite_opts)CONVO_REWRITE_OPTS_INIT;
    o.idempotency_key = "";
    ASSERT_FAILS(rewrite(tid, 1, NULL, 0, &o, &r, &err), err, CONVO_EINVAL);
    /* too large: over the batch limit of a store that allows 2 */
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.max_batch_messages = 2;
    convo_store *small = conf_open_ex(&so);
    ASSERT_FAILS(convo_replace_tail(small, tid, 0, THREE, NULL, 3, NULL, &r, &err), err,
                 CONVO_ETOOLARGE);
    convo_close(small);
    convo_history *h = conf_load(conf_store, tid, NULL);
    ck_assert_int_eq(convo_history_length(h), 3);
    ck_assert_int_eq(convo_history_generation(h), 0);
    for (size_t i = 0; i < 3; i++)
        conf_assert_message(h, i, THREE[i], strlen(THREE[i]), convo_history_role(h, i),
                            (int64_t)i);
    convo_history_free(h);
}
END_TEST

static void put_cp(const char *tid, const char *ns, const char *id, int64_t log_length)
{
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = id;
    cp.log_length = log_length;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
    convo_write_in w = {0, "messages", {"json", "[1]", 3}};
    ASSERT_OK(convo_checkpoint_put_writes(conf_store, tid, ns, id, "task", "", &w, 1, &err),
              err);
}

static int checkpoint_exists(const char *tid, const char *ns, const char *id)
{
    convo_checkpoint *cp;
    convo_error err;
    int rc = convo_checkpoint_get(conf_store, tid, ns, id, &cp, &err);
    ck_assert_msg(rc == 0 || rc == CONVO_ENOTFOUND, "get: %s", err.message);
    convo_checkpoint_free(cp);
    return rc == 0;
}

START_TEST(test_rewrite_checkpoints)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    put_cp(tid, "", "cp-2", 2);
    put_cp(tid, "sub", "cp-3", 3);
    convo_rewrite_result r;
    convo_error err;
    ASSERT_FAILS(rewrite(tid, 2, NULL, 0, NULL, &r, &err), err, CONVO_ECONFLICT);
    ck_assert_msg(strstr(err.message, "cp-3") != NULL, "conflict does not name it: %s",
                  err.message);
    ck_assert_int_eq(conf_length(conf_store, tid), 3);
    ck_assert(checkpoint_exists(tid, "sub", "cp-3"));
    /* keeping what they refer to is fine */
    ASSERT_OK(rewrite(tid, 3, &THREE[0], 1, NULL, &r, &err), err);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = 1;
    ASSERT_OK(rewrite(tid, 2, NULL, 0, &o, &r, &err), err);
    ck_assert(!checkpoint_exists(tid, "sub", "cp-3"));
    ck_assert(checkpoint_exists(tid, "", "cp-2"));
    convo_checkpoint *cp;
    ASSERT_OK(convo_checkpoint_get(conf_store, tid, "", "cp-2", &cp, &err), err);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    /* the latest of "sub" is gone; a list shows only cp-2 */
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    convo_checkpoint_set *set;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    ck_assert_str_eq(convo_checkpoint_id(convo_checkpoint_set_get(set, 0)), "cp-2");
    convo_checkpoint_set_free(set);
    convo_write_in w = {0, "messages", {"json", "[2]", 3}};
    ASSERT_FAILS(convo_checkpoint_put_writes(conf_store, tid, "sub", "cp-3", "t", "", &w, 1,
                                             &err),
                 err, CONVO_ENOTFOUND);
}
END_TEST

START_TEST(test_rewrite_export_import)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    convo_rewrite_result r;
    convo_error err;
    ASSERT_OK(rewrite(tid, 2, &THREE[0], 1, NULL, &r, &err), err);
    const char *ids[] = {tid};
    /* an export can require the generation: nothing of the thread is written */
    int64_t want[] = {0};
    convo_dump_opts dopts = CONVO_DUMP_OPTS_INIT;
    dopts.expected_generations = want;
    conf_buf none = {0};
    ASSERT_FAILS(convo_export(conf_store, ids, 1, conf_buf_write, &none, &dopts, NULL, &err), err,
                 CONVO_ECONFLICT);
    free(none.data);
    want[0] = 1;
    conf_buf dump = {0};
    ASSERT_OK(convo_export(conf_store, ids, 1, conf_buf_write, &dump, &dopts, NULL, &err), err);
    /* the dump carries the generation: restored, it is the same */
    ASSERT_OK(convo_thread_delete(conf_store, tid, &err), err);
    ASSERT_OK(convo_import(conf_store, conf_buf_read, &dump, NULL, NULL, &err), err);
    ck_assert_int_eq(generation_of(conf_store, tid), 1);
    ck_assert_int_eq(conf_length(conf_store, tid), 3);
    /* importing it again changes nothing */
    dump.pos = 0;
    ASSERT_OK(convo_import(conf_store, conf_buf_read, &dump, NULL, NULL, &err), err);
    /* after another rewrite, the old dump conflicts instead of mixing */
    ASSERT_OK(rewrite(tid, 3, &THREE[1], 1, NULL, &r, &err), err);
    dump.pos = 0;
    ASSERT_FAILS(convo_import(conf_store, conf_buf_read, &dump, NULL, NULL, &err), err,
                 CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, tid), 4);
    ck_assert_int_eq(generation_of(conf_store, tid), 2);
    free(dump.data);
}
END_TEST

/* ---- races: every thread of the process on one shared store handle ---- */

typedef struct racer {
    const char *tid;
    int64_t expected_length;
    int rc;
    int wins;
} racer;

static void *replace_once(void *arg)
{
    racer *a = arg;
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.expected_length = a->expected_length;
    const char *m[] = {"{\"role\":\"assistant\",\"content\":\"racer\"}"};
    convo_error err;
    a->rc = convo_replace_tail(conf_store, a->tid, 1, m, NULL, 1, &o, NULL, &err);
    return NULL;
}

START_TEST(test_rewrite_race_same_tail)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    enum { N = 4 };
    pthread_t th[N];
    racer a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (racer){tid, 3, 0, 0};
        pthread_create(&th[i], NULL, replace_once, &a[i]);
    }
    int won = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(a[i].rc == 0 || a[i].rc == CONVO_ECONFLICT, "rc %d", a[i].rc);
        won += a[i].rc == 0;
    }
    ck_assert_int_eq(won, 1);
    ck_assert_int_eq(conf_length(conf_store, tid), 2);
    ck_assert_int_eq(generation_of(conf_store, tid), 1);
}
END_TEST

static void *append_many(void *arg)
{
    racer *a = arg;
    for (int i = 0; i < 40; i++) {
        convo_error err;
        const char *m[] = {"{\"role\":\"user\",\"content\":\"x\"}"};
        a->rc = convo_append(conf_store, a->tid, m, NULL, 1, NULL, NULL, &err);
        if (a->rc)
            break;
        a->wins++;
    }
    return NULL;
}

static void *pop_many(void *arg)
{
    racer *a = arg;
    for (int i = 0; i < 40; i++) {
        convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
        lo.tail = 1;
        lo.with_extra = 0;
        convo_history *h;
        convo_error err;
        if ((a->rc = convo_load(conf_store, a->tid, &lo, &h, &err)) != 0)
            break;
        convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
        o.expected_length = convo_history_length(h);
        o.expected_generation = convo_history_generation(h);
        convo_history_free(h);
        if (o.expected_length <= 3) /* never into the first three: the check reads them */
            continue;
        int64_t keep = o.expected_length - 1;
        int rc = convo_replace_tail(conf_store, a->tid, keep, NULL, NULL, 0, &o, NULL, &err);
        if (rc == 0)
            a->wins++;
        else if (rc != 0 && rc != CONVO_ECONFLICT) {
            a->rc = rc;
            break;
        }
    }
    return NULL;
}

START_TEST(test_rewrite_race_appends)
{
    char tid[256];
    TID(tid, "t");
    conf_append(conf_store, tid, THREE, 3);
    pthread_t th[3];
    racer a[3] = {{tid, -1, 0, 0}, {tid, -1, 0, 0}, {tid, -1, 0, 0}};
    pthread_create(&th[0], NULL, append_many, &a[0]);
    pthread_create(&th[1], NULL, append_many, &a[1]);
    pthread_create(&th[2], NULL, pop_many, &a[2]);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(a[i].rc, 0);
    }
    convo_history *h = conf_load(conf_store, tid, NULL);
    ck_assert_int_eq(convo_history_length(h), 3 + a[0].wins + a[1].wins - a[2].wins);
    ck_assert_uint_eq(convo_history_count(h), (size_t)convo_history_length(h));
    for (size_t i = 0; i < convo_history_count(h); i++)
        ck_assert_int_eq(convo_history_seq(h, i), (int64_t)i);
    conf_assert_message(h, 0, THREE[0], strlen(THREE[0]), "user", 0);
    ck_assert(convo_history_generation(h) >= a[2].wins);
    convo_history_free(h);
}
END_TEST

/* Racing pops alone (no appends), each popper on its own store handle as
 * separate processes would be: every message is popped exactly once, by the
 * pop whose rewrite removed it, and the thread ends empty. */
enum { POPPERS = 4, POPS_EACH = 10, POP_TRIES = 200 };

typedef struct popper {
    const char *tid;
    convo_store *store;
    int rc;
    int got[POPS_EACH]; /* the "n" of each message popped */
    int count;
} popper;

/* One pop as a binding does it: read the last message, remove it on the
 * (length, generation) read; read again when that lost a race. */
static int pop_one(popper *p, int *n)
{
    for (int tries = 0; tries < POP_TRIES; tries++) {
        convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
        lo.tail = 1;
        lo.with_extra = 0;
        convo_history *h;
        convo_error err;
        int rc = convo_load(p->store, p->tid, &lo, &h, &err);
        if (rc != 0)
            return rc;
        convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
        o.expected_length = convo_history_length(h);
        o.expected_generation = convo_history_generation(h);
        json_t *m = NULL;
        if (convo_history_count(h) == 1) {
            size_t len;
            const char *bytes = convo_history_message(h, 0, &len);
            m = json_loadb(bytes, len, 0, NULL);
        }
        convo_history_free(h);
        if (!m)
            return CONVO_ERROR; /* the thread was empty: a pop took two messages */
        *n = (int)json_integer_value(json_object_get(m, "n"));
        json_decref(m);
        rc = convo_replace_tail(p->store, p->tid, o.expected_length - 1, NULL, NULL, 0, &o,
                                NULL, &err);
        if (rc != CONVO_ECONFLICT)
            return rc;
    }
    return CONVO_ECONFLICT;
}

static void *pop_racer(void *arg)
{
    popper *p = arg;
    for (int i = 0; i < POPS_EACH && p->rc == 0; i++)
        if ((p->rc = pop_one(p, &p->got[i])) == 0)
            p->count++;
    return NULL;
}

START_TEST(test_rewrite_race_pops)
{
    enum { N = POPPERS * POPS_EACH };
    char tid[256], text[N][48];
    const char *msgs[N];
    TID(tid, "t");
    for (int i = 0; i < N; i++) {
        snprintf(text[i], sizeof text[i], "{\"role\":\"user\",\"n\":%d}", i);
        msgs[i] = text[i];
    }
    conf_append(conf_store, tid, msgs, N);
    pthread_t th[POPPERS];
    popper p[POPPERS];
    for (int i = 0; i < POPPERS; i++) {
        p[i] = (popper){tid, conf_private ? conf_store : conf_open(), 0, {0}, 0};
        pthread_create(&th[i], NULL, pop_racer, &p[i]);
    }
    int seen[N] = {0};
    for (int i = 0; i < POPPERS; i++) {
        pthread_join(th[i], NULL);
        if (p[i].store != conf_store)
            convo_close(p[i].store);
        ck_assert_msg(p[i].rc == 0, "popper %d: %s", i, convo_strerror(p[i].rc));
        for (int k = 0; k < p[i].count; k++) {
            ck_assert(p[i].got[k] >= 0 && p[i].got[k] < N);
            seen[p[i].got[k]]++;
        }
    }
    for (int i = 0; i < N; i++)
        ck_assert_msg(seen[i] == 1, "message %d popped %d times", i, seen[i]);
    convo_history *h = conf_load(conf_store, tid, NULL);
    ck_assert_int_eq(convo_history_length(h), 0);
    ck_assert_int_eq(convo_history_generation(h), N);
    convo_history_free(h);
}
END_TEST

void conf_add_rewrite_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "rewrite");
    tcase_add_test(tc, test_rewrite_pop);
    tcase_add_test(tc, test_rewrite_replace);
    tcase_add_test(tc, test_rewrite_conditions);
    tcase_add_test(tc, test_rewrite_expected_suffix);
    tcase_add_test(tc, test_rewrite_idempotent);
    tcase_add_test(tc, test_rewrite_removed_append_key);
    tcase_add_test(tc, test_rewrite_bad_input);
    tcase_add_test(tc, test_rewrite_checkpoints);
    tcase_add_test(tc, test_rewrite_export_import);
    tcase_add_test(tc, test_rewrite_race_same_tail);
    tcase_add_test(tc, test_rewrite_race_appends);
    tcase_add_test(tc, test_rewrite_race_pops);
}
