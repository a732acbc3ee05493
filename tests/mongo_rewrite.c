/* mongo_rewrite.c — the MongoDB driver's tail rewrite checks (part of
 * tests/mongo_extra): the stored layout of a rewrite (one batch at the next
 * slot, generation r), the replaced batches collected, every read (loads with
 * windows and tails, forks, lists) right while replaced batches are still there
 * (a process killed before collecting them), a second rewrite on top of such
 * leftovers, dropping checkpoints finished by a reader when the writer was
 * killed, a layout 4 store moved up, and forks and loads racing rewrites. */
#include "mongo_util.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message as forge_batch and append_batch make them. */
static char *message(int w, int64_t b, int i, int n)
{
    char *m = malloc(96);
    snprintf(m, 96, "{\"role\":\"user\",\"w\":%d,\"b\":%lld,\"i\":%d,\"n\":%d}", w, (long long)b,
             i, n);
    return m;
}

/* Replaces [keep, length) of id with n messages of group (w, b). */
static int rewrite(convo_store *s, const char *id, int64_t keep, int w, int b, int n,
                   const convo_rewrite_opts *o, convo_rewrite_result *r)
{
    char *msgs[8];
    ck_assert_int_le(n, 8);
    for (int i = 0; i < n; i++)
        msgs[i] = message(w, b, i, n);
    convo_rewrite_result unused;
    int rc = convo_replace_tail(s, id, keep, (const char *const *)msgs, NULL, (size_t)n, o,
                                r ? r : &unused, &err);
    for (int i = 0; i < n; i++)
        free(msgs[i]);
    return rc;
}

/* The history of id (all, or the window opts gives); asserts it loads. */
static convo_history *load(convo_store *s, const char *id, const convo_load_opts *o)
{
    convo_history *h;
    ck_assert_msg(convo_load(s, id, o, &h, &err) == 0, "load %s: %s", id, err.message);
    return h;
}

/* Message i of h is group (w, b), item j. */
static void assert_message(const convo_history *h, size_t i, int64_t seq, int w, int b, int j)
{
    json_t *m = json_loads(convo_history_message(h, i, NULL), 0, NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(convo_history_seq(h, i), seq);
    ck_assert_msg(json_integer_value(json_object_get(m, "w")) == w &&
                      json_integer_value(json_object_get(m, "b")) == b &&
                      json_integer_value(json_object_get(m, "i")) == j,
                  "seq %lld is %s, expected w %d b %d i %d", (long long)seq,
                  convo_history_message(h, i, NULL), w, b, j);
    json_decref(m);
}

/* The batch of generation g at slot s, or NULL. */
static bson_t *batch_at(const bson_oid_t *g, int64_t s)
{
    return raw_find("batches", BCON_NEW("g", BCON_OID(g), "s", BCON_INT64(s)));
}

static int64_t get_int(const bson_t *doc, const char *key, int64_t def)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) ? bson_iter_as_int64(&it) : def;
}

/* Waits (at most 2 s) until generation g has n batch documents: the writer
 * collects replaced batches without waiting for the server's answer. */
static int64_t settle_count(const bson_oid_t *g, int64_t n)
{
    int64_t got = generation_batches(g);
    for (int i = 0; i < 200 && got != n; i++) {
        sleep_ms(10);
        got = generation_batches(g);
    }
    return got;
}

/* A rewrite is one batch at the next slot: messages [keep, keep + n), r = the
 * new generation, k = its slot; the replaced batches without a key are
 * collected, the one with a key stays (its key must still answer); loads,
 * windows, tails and appends read the new tail. */
START_TEST(test_rewrite_layout)
{
    convo_store *s = open_store(NULL);
    bson_oid_t g;
    append_batch(s, "rw", 1, 0, 2); /* slot 0: [0, 2) */
    convo_append_opts ao = CONVO_APPEND_OPTS_INIT;
    ao.idempotency_key = "ka";
    char *keyed = message(1, 1, 0, 1);
    ck_assert_int_eq(convo_append(s, "rw", (const char *const *)&keyed, NULL, 1, &ao, NULL, &err),
                     0); /* slot 2: [2, 3) */
    append_batch(s, "rw", 1, 2, 2); /* slot 3: [3, 5) */
    thread_generation("rw", &g);
    bson_t *b = batch_at(&g, 0); /* each batch names the one below it (pb), the first none */
    ck_assert_int_eq(get_int(b, "pb", -2), -2);
    bson_destroy(b);
    b = batch_at(&g, 3);
    ck_assert_int_eq(get_int(b, "pb", -2), 2);
    bson_destroy(b);
    convo_rewrite_result r;
    ck_assert_msg(rewrite(s, "rw", 1, 2, 0, 1, NULL, &r) == 0, "%s", err.message);
    ck_assert(r.first_seq == 1 && r.count == 1 && r.removed == 4 && r.generation == 1 &&
              !r.replayed);
    b = batch_at(&g, 5);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(get_int(b, "e", -1), 2);
    ck_assert_int_eq(get_int(b, "n", -1), 1);
    ck_assert_int_eq(get_int(b, "r", -1), 1);
    ck_assert_int_eq(get_int(b, "k", -1), 5);
    ck_assert_int_eq(get_int(b, "pb", -2), 0); /* message 0 is read from slot 0 */
    bson_iter_t it;
    ck_assert(!bson_iter_init_find(&it, b, "u")); /* nothing to drop: not pending */
    bson_destroy(b);
    b = index_named("checkpoints", "convo_checkpoint_log_v5"); /* checkpoints past keep */
    ck_assert_ptr_nonnull(b);
    ck_assert(bson_iter_init_find(&it, b, "key") && bson_iter_recurse(&it, &it) &&
              bson_iter_next(&it) && strcmp(bson_iter_key(&it), "g") == 0 &&
              bson_iter_next(&it) && strcmp(bson_iter_key(&it), "ll") == 0);
    bson_destroy(b);
    ck_assert_int_eq(settle_count(&g, 3), 3); /* slot 3 collected; 0, 2 (keyed) and 5 stay */
    b = batch_at(&g, 3);
    ck_assert_ptr_null(b);
    b = batch_at(&g, 2);
    ck_assert_ptr_nonnull(b);
    bson_destroy(b);

    convo_history *h = load(s, "rw", NULL);
    ck_assert_int_eq(convo_history_count(h), 2);
    ck_assert_int_eq(convo_history_length(h), 2);
    ck_assert_int_eq(convo_history_generation(h), 1);
    assert_message(h, 0, 0, 1, 0, 0);
    assert_message(h, 1, 1, 2, 0, 0);
    convo_history_free(h);
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.from_seq = 1;
    o.limit = 1;
    h = load(s, "rw", &o);
    ck_assert_int_eq(convo_history_count(h), 1);
    ck_assert_int_eq(convo_history_generation(h), 1);
    assert_message(h, 0, 1, 2, 0, 0);
    convo_history_free(h);
    o = (convo_load_opts)CONVO_LOAD_OPTS_INIT;
    o.limit = 1;
    h = load(s, "rw", &o);
    ck_assert_int_eq(convo_history_count(h), 1);
    assert_message(h, 0, 0, 1, 0, 0);
    convo_history_free(h);
    /* appends go after the rewrite, at the next slot, in its generation */
    ao = (convo_append_opts)CONVO_APPEND_OPTS_INIT;
    ao.expected_generation = 0;
    char *next = message(3, 0, 0, 1);
    ck_assert_int_eq(convo_append(s, "rw", (const char *const *)&next, NULL, 1, &ao, NULL, &err),
                     CONVO_ECONFLICT);
    ao.expected_generation = 1;
    convo_append_result ar;
    ck_assert_int_eq(convo_append(s, "rw", (const char *const *)&next, NULL, 1, &ao, &ar, &err),
                     0);
    ck_assert_int_eq(ar.first_seq, 2);
    b = batch_at(&g, 6);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(get_int(b, "e", -1), 3);
    ck_assert_int_eq(get_int(b, "r", -1), 1);
    ck_assert_int_eq(get_int(b, "pb", -2), 5);
    bson_destroy(b);
    o = (convo_load_opts)CONVO_LOAD_OPTS_INIT;
    o.tail = 2;
    h = load(s, "rw", &o);
    ck_assert_int_eq(convo_history_count(h), 2);
    assert_message(h, 0, 1, 2, 0, 0);
    assert_message(h, 1, 2, 3, 0, 0);
    convo_history_free(h);
    verify_raw_chains();
    /* the replaced append's key: found, and its messages are not there any more */
    ao = (convo_append_opts)CONVO_APPEND_OPTS_INIT;
    ao.idempotency_key = "ka";
    ck_assert_int_eq(convo_append(s, "rw", (const char *const *)&keyed, NULL, 1, &ao, NULL, &err),
                     CONVO_ECONFLICT);
    free(keyed);
    free(next);
    /* a pop to nothing: one empty batch carries the generation */
    ck_assert_int_eq(rewrite(s, "rw", 0, 0, 0, 0, NULL, &r), 0);
    ck_assert_int_eq(r.generation, 2);
    h = load(s, "rw", NULL);
    ck_assert_int_eq(convo_history_length(h), 0);
    ck_assert_int_eq(convo_history_generation(h), 2);
    convo_history_free(h);
    ck_assert_int_eq(listed(s, "rw"), 1);
    ck_assert_int_eq(append_batch(s, "rw", 4, 0, 1), 0);
    ck_assert_int_eq(verify_thread(s, "rw"), 1);
    ck_assert_int_eq(convo_thread_delete(s, "rw", &err), 0);
    ck_assert_int_eq(generation_batches(&g), 0);
    convo_close(s);
}
END_TEST

/* A rewrite inserted, its writer killed before collecting what it replaced:
 * every reader already sees the new tail; a second rewrite on top keeps the
 * leftovers hidden and collects them; forks copy one generation. */
START_TEST(test_crash_rewrite_not_collected)
{
    convo_store *s = open_store(NULL);
    bson_oid_t g;
    append_batch(s, "rc", 1, 0, 2); /* slot 0: [0, 2) */
    append_batch(s, "rc", 1, 1, 1); /* slot 2: [2, 3) */
    append_batch(s, "rc", 1, 2, 2); /* slot 3: [3, 5) */
    thread_generation("rc", &g);
    /* what the rewrite's insert leaves: keep 1, one message, at slot 5 */
    char *text = message(2, 0, 0, 1);
    raw_insert("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(5), "e", BCON_INT64(2), "n",
                                   BCON_INT64(1), "r", BCON_INT64(1), "pb", BCON_INT64(0), "at",
                                   BCON_INT64(now_ms() * 1000), "k", BCON_INT64(5), "m", "[",
                                   "{", "r", BCON_UTF8("user"), "b",
                                   BCON_BIN(BSON_SUBTYPE_BINARY, (const uint8_t *)text,
                                            (uint32_t)strlen(text)),
                                   "}", "]"));
    free(text);
    ck_assert_int_eq(generation_batches(&g), 4);
    convo_history *h = load(s, "rc", NULL);
    ck_assert_int_eq(convo_history_count(h), 2);
    ck_assert_int_eq(convo_history_generation(h), 1);
    assert_message(h, 0, 0, 1, 0, 0);
    assert_message(h, 1, 1, 2, 0, 0);
    convo_history_free(h);
    for (int64_t from = 0; from < 2; from++) {
        convo_load_opts o = CONVO_LOAD_OPTS_INIT;
        o.from_seq = from;
        o.limit = 1;
        h = load(s, "rc", &o);
        ck_assert_int_eq(convo_history_count(h), 1);
        ck_assert_int_eq(convo_history_length(h), 2);
        if (from == 0)
            assert_message(h, 0, 0, 1, 0, 0);
        else
            assert_message(h, 0, 1, 2, 0, 0);
        convo_history_free(h);
    }
    /* a fork copies the new tail, not the leftovers, and takes the generation */
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.expected_generation = 0;
    ck_assert_int_eq(convo_thread_fork_ex(s, "rc", "rc-f", -1, &fo, &err), CONVO_ECONFLICT);
    fo.expected_generation = 1;
    ck_assert_msg(convo_thread_fork_ex(s, "rc", "rc-f", -1, &fo, &err) == 0, "%s", err.message);
    h = load(s, "rc-f", NULL);
    ck_assert_int_eq(convo_history_count(h), 2);
    ck_assert_int_eq(convo_history_generation(h), 1);
    assert_message(h, 1, 1, 2, 0, 0);
    convo_history_free(h);
    ck_assert_int_eq(convo_thread_fork(s, "rc", "rc-0", 0, &err), 0);
    h = load(s, "rc-0", NULL);
    ck_assert_int_eq(convo_history_count(h), 0);
    ck_assert_int_eq(convo_history_generation(h), 1);
    convo_history_free(h);
    /* a second rewrite on top: keep 2 */
    convo_rewrite_result r;
    ck_assert_msg(rewrite(s, "rc", 2, 3, 0, 2, NULL, &r) == 0, "%s", err.message);
    ck_assert_int_eq(r.generation, 2);
    ck_assert_int_eq(r.removed, 0);
    h = load(s, "rc", NULL);
    ck_assert_int_eq(convo_history_count(h), 4);
    ck_assert_int_eq(convo_history_generation(h), 2);
    assert_message(h, 0, 0, 1, 0, 0);
    assert_message(h, 1, 1, 2, 0, 0);
    assert_message(h, 2, 2, 3, 0, 0);
    assert_message(h, 3, 3, 3, 0, 1);
    convo_history_free(h);
    /* it collected the first one's leftovers (slots 2 and 3, from seq 2 and 3) */
    ck_assert_int_eq(settle_count(&g, 3), 3);
    verify_raw_chains();
    convo_close(s);
}
END_TEST

/* A checkpoint put with log_length ll. */
static void put_ll(convo_store *s, const char *thread, const char *id, int64_t ll)
{
    convo_blob v = {"json", "1", 1};
    convo_channel_in ch[] = {{"a", id, &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = thread;
    cp.checkpoint_id = id;
    cp.metadata_json = "{}";
    cp.body = (convo_blob){"json", "{}", 2};
    cp.channels = ch;
    cp.nchannels = 1;
    cp.log_length = ll;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
    convo_write_in w = {0, "a", {"json", "2", 1}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, thread, "", id, "task", "", &w, 1, &err), 0);
}

/* The ids of the thread's checkpoints, newest first, space-separated (static). */
static const char *listed_ids(convo_store *s, const char *thread)
{
    static char out[256];
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    convo_checkpoint_set *set;
    o.thread_id = thread;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    out[0] = '\0';
    for (size_t i = 0; i < convo_checkpoint_set_count(set); i++) {
        if (i)
            strcat(out, " ");
        strcat(out, convo_checkpoint_id(convo_checkpoint_set_get(set, i)));
    }
    convo_checkpoint_set_free(set);
    return out;
}

/* A rewrite dropping checkpoints carries their keys (dc, marked u); killed
 * before it dropped them, the next reader of checkpoints does, so no reader
 * ever sees one of them with the new tail. */
START_TEST(test_crash_rewrite_drop)
{
    convo_store *s = open_store(NULL);
    append_batch(s, "rd", 1, 0, 3);
    put_ll(s, "rd", "c1", 1);
    put_ll(s, "rd", "c3", 3);
    bson_oid_t g;
    thread_generation("rd", &g);
    /* refused without drop_checkpoints, naming the checkpoint */
    ck_assert_int_eq(rewrite(s, "rd", 2, 2, 0, 1, NULL, NULL), CONVO_ECONFLICT);
    ck_assert_msg(strstr(err.message, "c3") != NULL, "%s", err.message);
    /* the rewrite's insert, then the writer killed */
    bson_t *cp = raw_find("checkpoints", BCON_NEW("g", BCON_OID(&g), "id", BCON_UTF8("c3")));
    ck_assert_ptr_nonnull(cp);
    int64_t w = get_int(cp, "w", -1);
    bson_destroy(cp);
    char *text = message(2, 0, 0, 1);
    raw_insert("batches",
               BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(3), "e", BCON_INT64(3), "n",
                        BCON_INT64(1), "r", BCON_INT64(1), "pb", BCON_INT64(0), "at",
                        BCON_INT64(now_ms() * 1000), "k",
                        BCON_INT64(3), "m", "[", "{", "r", BCON_UTF8("user"), "b",
                        BCON_BIN(BSON_SUBTYPE_BINARY, (const uint8_t *)text,
                                 (uint32_t)strlen(text)),
                        "}", "]", "u", BCON_BOOL(true), "dc", "{", "c", BCON_INT64(2), "l", "[",
                        "{", "ns", BCON_UTF8(""), "id", BCON_UTF8("c3"), "w", BCON_INT64(w), "}",
                        "]", "}"));
    free(text);
    ck_assert_int_eq(thread_docs("checkpoints", "rd"), 2);
    convo_checkpoint *got;
    ck_assert_int_eq(convo_checkpoint_get(s, "rd", "", NULL, &got, &err), 0);
    ck_assert_str_eq(convo_checkpoint_id(got), "c1");
    convo_checkpoint_free(got);
    ck_assert_int_eq(convo_checkpoint_get(s, "rd", "", "c3", &got, &err), CONVO_ENOTFOUND);
    ck_assert_str_eq(listed_ids(s, "rd"), "c1");
    ck_assert_int_eq(thread_docs("checkpoints", "rd"), 1);
    ck_assert_int_eq(thread_docs("writes", "rd"), 1);
    ck_assert_int_eq(unsettled("rd"), 0);
    /* through the API: dropped before the call returns; a later put with a
     * log_length past keep is the new tail's and stays */
    put_ll(s, "rd", "c4", 3);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = 1;
    convo_rewrite_result r;
    ck_assert_msg(rewrite(s, "rd", 1, 3, 0, 2, &o, &r) == 0, "%s", err.message);
    ck_assert_int_eq(r.generation, 2);
    ck_assert_int_eq(thread_docs("checkpoints", "rd"), 1);
    ck_assert_int_eq(thread_docs("writes", "rd"), 1);
    ck_assert_int_eq(unsettled("rd"), 0);
    put_ll(s, "rd", "c5", 3);
    ck_assert_str_eq(listed_ids(s, "rd"), "c5 c1");
    ck_assert_int_eq(length_of(s, "rd"), 3);
    verify_raw_chains();
    convo_close(s);
}
END_TEST

/* A store written by layout 4 (no generation anywhere, every batch at the slot
 * of its first message) moves up to 5: nothing to rewrite, the version is
 * recorded, threads read at generation 0 and take rewrites. */
START_TEST(test_upgrade_from_v4)
{
    bson_oid_t g;
    new_generation("v4", &g);
    raw_insert("meta", BCON_NEW("_id", BCON_UTF8("schema"), "version", BCON_INT32(4)));
    forge_thread("v4", &g, true, false, 0);
    forge_batch(&g, 0, 2, 1);
    forge_batch(&g, 2, 1, 1);
    convo_store *s = open_store(NULL);
    bson_t *meta = raw_find("meta", BCON_NEW("_id", BCON_UTF8("schema")));
    ck_assert_int_eq(get_int(meta, "version", -1), 6);
    bson_destroy(meta);
    convo_history *h = load(s, "v4", NULL);
    ck_assert_int_eq(convo_history_count(h), 3);
    ck_assert_int_eq(convo_history_generation(h), 0);
    convo_history_free(h);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.expected_generation = 0;
    o.expected_length = 3;
    ck_assert_msg(rewrite(s, "v4", 2, 2, 0, 1, &o, NULL) == 0, "%s", err.message);
    ck_assert_int_eq(verify_thread(s, "v4"), 3);
    convo_close(s);
    s = open_store(NULL); /* once moved up, opening changes nothing */
    h = load(s, "v4", NULL);
    ck_assert_int_eq(convo_history_generation(h), 1);
    assert_message(h, 2, 2, 2, 0, 0);
    convo_history_free(h);
    convo_close(s);
}
END_TEST

/* A fork of a rewritten thread larger than what a fork keeps from its first
 * walk (8 MiB) reads the batches it chose a second time: the same messages. */
START_TEST(test_rewrite_fork_large)
{
    convo_store *s = open_store(NULL);
    char *big[12];
    for (int i = 0; i < 12; i++)
        big[i] = big_message((size_t)900 * 1024 + (size_t)i);
    for (int i = 0; i < 12; i += 4) /* three batches of 3.6 MB */
        ck_assert_msg(convo_append(s, "rl", (const char *const *)&big[i], NULL, 4, NULL, NULL,
                                   &err) == 0,
                      "%s", err.message);
    /* keep 10: the last batch is cut inside */
    ck_assert_msg(rewrite(s, "rl", 10, 2, 0, 1, NULL, NULL) == 0, "%s", err.message);
    ck_assert_msg(convo_thread_fork(s, "rl", "rl-f", -1, &err) == 0, "%s", err.message);
    ck_assert_msg(convo_thread_fork(s, "rl", "rl-g", 6, &err) == 0, "%s", err.message);
    convo_history *h = load(s, "rl-f", NULL), *g = load(s, "rl-g", NULL);
    ck_assert_int_eq(convo_history_count(h), 11);
    ck_assert_int_eq(convo_history_generation(h), 1);
    ck_assert_int_eq(convo_history_count(g), 6);
    ck_assert_int_eq(convo_history_generation(g), 1);
    for (int i = 0; i < 10; i++) {
        size_t len;
        const char *m = convo_history_message(h, (size_t)i, &len);
        ck_assert_msg(len == strlen(big[i]) && memcmp(m, big[i], len) == 0, "message %d", i);
        if (i < 6) {
            m = convo_history_message(g, (size_t)i, &len);
            ck_assert(len == strlen(big[i]) && memcmp(m, big[i], len) == 0);
        }
    }
    assert_message(h, 10, 10, 2, 0, 0);
    convo_history_free(h);
    convo_history_free(g);
    for (int i = 0; i < 12; i++)
        free(big[i]);
    verify_raw_chains();
    convo_close(s);
}
END_TEST

/* The commands the server's profiler recorded on this test's collections from
 * the skip-th on, as "aggregate threads, update batches, delete batches w0"
 * (w0: sent unacknowledged); *total: how many there are in all. */
static char *profiled(int skip, int *total)
{
    mongoc_collection_t *c = mongoc_client_get_collection(raw, database, "system.profile");
    char re[sizeof database + sizeof prefix + 8];
    snprintf(re, sizeof re, "^%s\\.%s_", database, prefix);
    bson_t *filter = BCON_NEW("ns", "{", "$regex", BCON_UTF8(re), "}");
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(c, filter, NULL, NULL);
    const bson_t *doc;
    char *out = calloc(1, 1);
    *total = 0;
    while (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it, cmd;
        if ((*total)++ < skip || !bson_iter_init_find(&it, doc, "command") ||
            !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &cmd) ||
            !bson_iter_next(&cmd))
            continue;
        const char *name = bson_iter_key(&cmd), *target = bson_iter_utf8(&cmd, NULL);
        target = target ? target + strlen(prefix) + 1 : "?";
        bool w0 = bson_iter_init(&it, doc) &&
                  bson_iter_find_descendant(&it, "command.writeConcern.w", &cmd) &&
                  bson_iter_as_int64(&cmd) == 0;
        size_t len = strlen(out);
        out = realloc(out, len + strlen(name) + strlen(target) + 8);
        sprintf(out + len, "%s%s %s%s", len ? ", " : "", name, target, w0 ? " w0" : "");
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    mongoc_collection_destroy(c);
    return out;
}

/* The length the thread index has for id (-1: none). */
static int64_t index_length(const char *id)
{
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8(id)));
    int64_t ln = t ? get_int(t, "ln", -1) : -1;
    if (t)
        bson_destroy(t);
    return ln;
}

/* Asserts that what runs after the profiler's skip-th entry becomes want (the
 * unacknowledged commands may reach the server after the call returned). */
static int expect_commands(int skip, const char *want)
{
    int total = 0;
    char *got = profiled(skip, &total);
    for (int i = 0; i < 200 && strcmp(got, want) != 0; i++) {
        sleep_ms(10);
        free(got);
        got = profiled(skip, &total);
    }
    ck_assert_msg(strcmp(got, want) == 0, "commands: %s; expected %s", got, want);
    free(got);
    return total;
}

/* A replace of the last messages of the top batch costs what an append does:
 * one aggregate and the batch's upsert (stored only as the top of the chain)
 * acknowledged, then the collection and the
 * thread index sent unacknowledged. The batch holding message keep - 1 comes
 * from the top batch when it holds it; a pop of the whole top batch, or a
 * rewrite reaching below it, reads it with one find (the top's pb is not
 * trusted for it: with appends racing pops it named another batch than a
 * load reads, test_rewrite_race_appends). */
START_TEST(test_rewrite_round_trips)
{
    const char *usual = "aggregate threads, update batches, delete batches w0, "
                        "update threads w0";
    const char *reads = "aggregate threads, find batches, update batches, "
                        "delete batches w0, update threads w0";
    const char *append = "aggregate threads, update batches, update threads w0";
    convo_store *s = open_store(NULL);
    bson_oid_t g;
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    int n = 0;
    append_batch(s, "rr", 1, 0, 3); /* slot 0: [0, 3) */
    append_batch(s, "rr", 1, 1, 1); /* slot 3: [3, 4), pb 0 */
    thread_generation("rr", &g);
    for (int i = 0; i < 200 && index_length("rr") != 4; i++)
        sleep_ms(10); /* the append's index update, sent unacknowledged, has landed */
    profile_level(2);
    free(profiled(0, &n));
    o.expected_length = 4; /* a pop of the top batch: the batch below is read */
    ck_assert_msg(rewrite(s, "rr", 3, 0, 0, 0, &o, NULL) == 0, "%s", err.message);
    n = expect_commands(n, reads);
    free(profiled(0, &n));
    append_batch(s, "rr", 1, 2, 3); /* slot 5: [3, 6), pb 0 (below the empty slot 4) */
    n = expect_commands(n, append);
    ck_assert_msg(rewrite(s, "rr", 5, 2, 0, 1, NULL, NULL) == 0, "%s", err.message);
    n = expect_commands(n, usual); /* the last message replaced: the top holds message 4 */
    ck_assert_msg(rewrite(s, "rr", 1, 3, 0, 1, NULL, NULL) == 0, "%s", err.message);
    n = expect_commands(n, reads); /* below the top batch */
    bson_t *b = batch_at(&g, 9);
    ck_assert_int_eq(get_int(b, "pb", -2), 0);
    bson_destroy(b);
    free(profiled(0, &n)); /* that find was ours */
    /* a top batch without pb (written before batches carried it) */
    append_batch(s, "rr", 1, 3, 1); /* slot 10: [2, 3), pb 9 */
    n = expect_commands(n, append);
    raw_update("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(10)),
               BCON_NEW("$unset", "{", "pb", BCON_UTF8(""), "}"));
    free(profiled(0, &n));
    ck_assert_msg(rewrite(s, "rr", 2, 4, 0, 2, NULL, NULL) == 0, "%s", err.message);
    n = expect_commands(n, reads);
    b = batch_at(&g, 11);
    ck_assert_int_eq(get_int(b, "pb", -2), 9);
    bson_destroy(b);
    free(profiled(0, &n));
    ck_assert_msg(rewrite(s, "rr", 0, 5, 0, 1, NULL, NULL) == 0, "%s", err.message);
    n = expect_commands(n, usual); /* keep 0: nothing below */
    profile_level(0);
    convo_history *h = load(s, "rr", NULL);
    ck_assert_int_eq(convo_history_count(h), 1);
    ck_assert_int_eq(convo_history_generation(h), 5);
    assert_message(h, 0, 0, 5, 0, 0);
    convo_history_free(h);
    verify_raw_chains();
    convo_close(s);
}
END_TEST

/* A new tail larger than one MongoDB document is refused before anything is
 * written: the thread, its generation and its batches stay as they were. */
START_TEST(test_rewrite_too_large)
{
    convo_store *s = open_store(NULL);
    bson_oid_t g;
    append_batch(s, "rt", 1, 0, 2);
    thread_generation("rt", &g);
    char *big[17];
    for (int i = 0; i < 17; i++)
        big[i] = big_message((size_t)1000 * 1000);
    convo_rewrite_result r;
    ck_assert_int_eq(convo_replace_tail(s, "rt", 1, (const char *const *)big, NULL, 17, NULL, &r,
                                        &err),
                     CONVO_ETOOLARGE);
    for (int i = 0; i < 17; i++)
        free(big[i]);
    ck_assert_int_eq(generation_batches(&g), 1);
    convo_history *h = load(s, "rt", NULL);
    ck_assert_int_eq(convo_history_count(h), 2);
    ck_assert_int_eq(convo_history_generation(h), 0);
    convo_history_free(h);
    convo_close(s);
}
END_TEST

/* ---- forks and loads racing rewrites ---- */

#define RACE_MIN 30    /* forks and loads each racer must have done */
#define RACE_MAX 3000  /* rewrites at most */

typedef struct racer {
    convo_store *s;
    int id, done, bad;
    char why[400];
} racer;

static volatile int racing;

/* A thread (or fork) state must be one rewrite's whole result: at generation
 * G > 0, the seed's first message then the G - 1th rewrite's group (w 2, b G - 1,
 * 1 + (G - 1) % 3 messages); at 0, the seed (w 1, b 0, 3 messages). */
static int check_state(const convo_history *h, char *why, size_t len)
{
    int64_t gen = convo_history_generation(h);
    size_t want = gen == 0 ? 3 : 1 + 1 + (size_t)((gen - 1) % 3);
    if (convo_history_count(h) != want || convo_history_length(h) != (int64_t)want) {
        snprintf(why, len, "generation %lld with %zu messages", (long long)gen,
                 convo_history_count(h));
        return 1;
    }
    for (size_t i = 0; i < want; i++) {
        json_t *m = json_loads(convo_history_message(h, i, NULL), 0, NULL);
        int w = (int)json_integer_value(json_object_get(m, "w"));
        int64_t b = json_integer_value(json_object_get(m, "b"));
        int j = (int)json_integer_value(json_object_get(m, "i"));
        json_decref(m);
        bool ok = gen == 0 || i == 0 ? (w == 1 && b == 0 && j == (int)i)
                                     : (w == 2 && b == gen - 1 && j == (int)i - 1);
        if (!ok || convo_history_seq(h, i) != (int64_t)i) {
            snprintf(why, len, "generation %lld: seq %zu is w %d b %lld i %d", (long long)gen, i,
                     w, (long long)b, j);
            return 1;
        }
    }
    return 0;
}

static void *forker(void *arg)
{
    racer *r = arg;
    convo_error e;
    for (int k = 0; racing && !r->bad; k++) {
        char dst[48];
        convo_history *h;
        snprintf(dst, sizeof dst, "race-f%d-%d", r->id, k % 100000);
        int rc = convo_thread_fork(r->s, "race", dst, -1, &e);
        if (rc == 0 && (rc = convo_load(r->s, dst, NULL, &h, &e)) == 0) {
            r->bad = check_state(h, r->why, sizeof r->why);
            convo_history_free(h);
            r->done++;
        }
        if (rc != 0 && !r->bad) {
            snprintf(r->why, sizeof r->why, "fork %s: %d %s", dst, rc, e.message);
            r->bad = 1;
        }
    }
    return NULL;
}

static void *loader(void *arg)
{
    racer *r = arg;
    convo_error e;
    while (racing && !r->bad) {
        convo_history *h;
        convo_load_opts o = CONVO_LOAD_OPTS_INIT;
        o.limit = r->done % 2 ? 0 : 10; /* windowed and not */
        int rc = convo_load(r->s, "race", &o, &h, &e);
        if (rc == 0) {
            r->bad = check_state(h, r->why, sizeof r->why);
            convo_history_free(h);
            r->done++;
        } else {
            snprintf(r->why, sizeof r->why, "load: %d %s", rc, e.message);
            r->bad = 1;
        }
    }
    return NULL;
}

/* One thread rewrites the tail after the seed's first message again and again
 * (collecting what each replaced) while others fork and load it: every fork
 * and every load is one rewrite's whole state, never a mix. */
START_TEST(test_rewrite_race_forks)
{
    convo_store *s = open_store(NULL);
    append_batch(s, "race", 1, 0, 3);
    racer r[3] = {{s, 0, 0, 0, ""}, {s, 1, 0, 0, ""}, {s, 2, 0, 0, ""}};
    pthread_t th[3];
    racing = 1;
    ck_assert_int_eq(pthread_create(&th[0], NULL, forker, &r[0]), 0);
    ck_assert_int_eq(pthread_create(&th[1], NULL, forker, &r[1]), 0);
    ck_assert_int_eq(pthread_create(&th[2], NULL, loader, &r[2]), 0);
    int rc = 0, done = 0;
    for (; done < RACE_MAX && rc == 0; done++) {
        if (r[0].done + r[1].done >= RACE_MIN && r[2].done >= RACE_MIN)
            break;
        if (r[0].bad || r[1].bad || r[2].bad)
            break;
        convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
        o.expected_generation = done;
        rc = rewrite(s, "race", 1, 2, done, 1 + done % 3, &o, NULL);
    }
    racing = 0;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(rc == 0, "rewrite: %s", err.message);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(!r[i].bad, "racer %d: %s", i, r[i].why);
    ck_assert_int_gt(r[0].done + r[1].done, 0);
    ck_assert_int_gt(r[2].done, 0);
    convo_history *h = load(s, "race", NULL);
    ck_assert_int_eq(convo_history_generation(h), done);
    char why[400];
    ck_assert_msg(!check_state(h, why, sizeof why), "%s", why);
    convo_history_free(h);
    verify_raw_chains();
    fprintf(stderr, "mongo_extra: %d rewrites raced by %d forks and %d loads\n", done,
            r[0].done + r[1].done, r[2].done);
    convo_close(s);
}
END_TEST

void add_rewrite_cases(Suite *s)
{
    TCase *tc = tcase_create("rewrite");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_rewrite_layout);
    tcase_add_test(tc, test_crash_rewrite_not_collected);
    tcase_add_test(tc, test_crash_rewrite_drop);
    tcase_add_test(tc, test_upgrade_from_v4);
    tcase_add_test(tc, test_rewrite_fork_large);
    tcase_add_test(tc, test_rewrite_too_large);
    tcase_add_test(tc, test_rewrite_round_trips);
    suite_add_tcase(s, tc);
    tc = tcase_create("rewrite_race");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rewrite_race_forks);
    suite_add_tcase(s, tc);
}
