/* conformance_items.c — log references (convo_items_in, convo_items) on every
 * driver: a LangGraph-shaped turn (input, pending writes, the checkpoint that
 * commits them) stores each message once; branches, removed and replaced
 * messages; interrupted steps leave the log alone; conflicts, bad input,
 * export/import, list, and the rewrite protecting referenced messages. */
#include "conformance.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS ""

static const char *U1 = "{\"role\":\"user\",\"content\":\"hi\",\"id\":\"u1\"}";
static const char *A1 = "{\"role\":\"assistant\",\"content\":\"hello\",\"id\":\"a1\"}";
static const char *U2 = "{\"role\":\"user\",\"content\":\"more\",\"id\":\"u2\"}";
static const char *A2 = "{\"role\":\"assistant\",\"content\":\"sure\",\"id\":\"a2\"}";

/* Puts checkpoint id (parent or NULL) whose channel `ch` is the list items
 * (seqs: NULL or hints), log = 1 for the message channel. seqs_out filled. */
static int put_list(const char *tid, const char *id, const char *parent, const char *ch,
                    const char *version, const char *const *items, const int64_t *seqs, size_t n,
                    int log, const char *key, int64_t expected_generation, int64_t *seqs_out,
                    convo_error *err)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = items;
    it.seqs = seqs;
    it.n = n;
    it.log = log;
    it.key = key;
    it.seqs_out = seqs_out;
    if (key)
        it.rest = (convo_blob){"json", "{\"x\":1}", 7};
    const convo_items_in *per[1] = {&it};
    convo_channel_in c = {ch, version, NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.channels = &c;
    cp.nchannels = 1;
    cp.channel_items = per;
    cp.expected_generation = expected_generation;
    return convo_checkpoint_put(conf_store, &cp, err);
}

static void put_list_ok(const char *tid, const char *id, const char *parent,
                        const char *const *items, const int64_t *seqs, size_t n,
                        int64_t *seqs_out)
{
    convo_error err;
    ASSERT_OK(put_list(tid, id, parent, "messages", id, items, seqs, n, 1, NULL, -1, seqs_out,
                       &err),
              err);
}

/* A pending write of task `task` on checkpoint id: channel messages, the items inline. */
static void write_items_ok(const char *tid, const char *id, const char *task,
                           const char *const *items, size_t n)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = items;
    it.n = n;
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

static convo_checkpoint *get_ok(const char *tid, const char *id)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_get(conf_store, tid, NS, id, &cp, &err), err);
    return cp;
}

/* it must hold exactly texts (n) with seqs (-1 = inline). */
static void assert_items(const convo_items *it, const char *const *texts, const int64_t *seqs,
                         size_t n)
{
    ck_assert_uint_eq(it->n, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(it->items[i], texts[i]);
        ck_assert_uint_eq(it->lengths[i], strlen(texts[i]));
        ck_assert_int_eq(it->seqs[i], seqs[i]);
    }
}

/* The channel named ch of cp, as items. */
static void channel_items(const convo_checkpoint *cp, const char *ch, convo_items *out)
{
    for (size_t i = 0; i < convo_checkpoint_channel_count(cp); i++) {
        convo_blob v;
        if (strcmp(convo_checkpoint_channel(cp, i, NULL, &v), ch) == 0) {
            ck_assert_str_eq(v.type, "convo/items");
            ck_assert_int_eq(convo_checkpoint_channel_items(cp, i, out), 1);
            return;
        }
    }
    ck_abort_msg("channel %s not in the checkpoint", ch);
}

static void assert_log(const char *tid, const char *const *texts, size_t n)
{
    convo_history *h = conf_load(conf_store, tid, NULL);
    ck_assert_int_eq(convo_history_length(h), (int64_t)n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(convo_history_message(h, i, NULL), texts[i]);
    convo_history_free(h);
}

/* One LangGraph turn: the input checkpoint (its __start__ value holds the
 * user's message), the __start__ task's write, the checkpoint that commits
 * it, the node's write (the answer), the checkpoint that commits that. */
static void turn(const char *tid, int k, const char *const *history, size_t nhist,
                 const char *user, const char *answer, int hints)
{
    char in[32], c0[32], c1[32], prev[32];
    snprintf(in, sizeof in, "%02d-in", k);
    snprintf(c0, sizeof c0, "%02d-0", k);
    snprintf(c1, sizeof c1, "%02d-1", k);
    snprintf(prev, sizeof prev, "%02d-1", k - 1);
    convo_error err;
    /* the input: __start__ = {messages: [user], x: 1}; never in the log yet */
    ASSERT_OK(put_list(tid, in, k ? prev : NULL, "__start__", in, &user, NULL, 1, 0, "messages",
                       -1, NULL, &err),
              err);
    write_items_ok(tid, in, "start", &user, 1);
    const char *list[16];
    int64_t seqs[16], out[16];
    for (size_t i = 0; i < nhist; i++)
        list[i] = history[i], seqs[i] = hints ? (int64_t)i : -1;
    list[nhist] = user, seqs[nhist] = -1;
    put_list_ok(tid, c0, in, list, seqs, nhist + 1, out);
    for (size_t i = 0; i <= nhist; i++)
        ck_assert_int_eq(out[i], (int64_t)i);
    write_items_ok(tid, c0, "agent", &answer, 1);
    list[nhist + 1] = answer, seqs[nhist + 1] = -1;
    put_list_ok(tid, c1, c0, list, seqs, nhist + 2, out);
    ck_assert_int_eq(out[nhist + 1], (int64_t)nhist + 1);
}

START_TEST(test_items_turns)
{
    char tid[256];
    TID(tid, "t");
    const char *conv[] = {U1, A1, U2, A2};
    turn(tid, 0, conv, 0, U1, A1, 1);
    turn(tid, 1, conv, 2, U2, A2, 0); /* no hints: compared by text */
    assert_log(tid, conv, 4);         /* each message once */
    /* the input checkpoint's value and write became references (seq 2) */
    convo_checkpoint *cp = get_ok(tid, "01-in");
    convo_items it;
    channel_items(cp, "__start__", &it);
    int64_t two[] = {2}, three[] = {3};
    assert_items(&it, &conv[2], two, 1);
    ck_assert_str_eq(it.key, "messages");
    ck_assert_str_eq(it.rest.type, "json");
    ck_assert_uint_eq(it.rest.len, 7);
    ck_assert_int_eq(memcmp(it.rest.bytes, "{\"x\":1}", 7), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    assert_items(&it, &conv[2], two, 1);
    ck_assert(convo_checkpoint_log_length(cp) >= 3); /* protects what it refers to */
    convo_checkpoint_free(cp);
    /* the node's answer, written on 01-0, is a reference to seq 3 */
    cp = get_ok(tid, "01-0");
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    assert_items(&it, &conv[3], three, 1);
    convo_checkpoint_free(cp);
    cp = get_ok(tid, "01-1");
    channel_items(cp, "messages", &it);
    int64_t all[] = {0, 1, 2, 3};
    assert_items(&it, conv, all, 4);
    ck_assert_ptr_null(it.key);
    ck_assert_ptr_null(it.rest.type);
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 4);
    ck_assert_int_eq(convo_checkpoint_generation(cp), 0); /* read with the log */
    convo_checkpoint_free(cp);
}
END_TEST

START_TEST(test_items_branches)
{
    char tid[256];
    TID(tid, "t");
    const char *conv[] = {U1, A1, U2, A2};
    int64_t out[8];
    put_list_ok(tid, "c1", NULL, conv, NULL, 2, out);
    put_list_ok(tid, "c2", "c1", conv, NULL, 4, out);
    assert_log(tid, conv, 4);
    /* time travel: a branch from c1 with another message: it extends c1's list,
     * so it is appended (after the abandoned line) */
    const char *x = "{\"role\":\"user\",\"content\":\"other\"}";
    const char *branch[] = {U1, A1, x};
    int64_t hints[] = {0, 1, -1};
    put_list_ok(tid, "b1", "c1", branch, hints, 3, out);
    ck_assert_int_eq(out[2], 4);
    convo_checkpoint *cp = get_ok(tid, "b1");
    convo_items it;
    channel_items(cp, "messages", &it);
    int64_t bseq[] = {0, 1, 4};
    assert_items(&it, branch, bseq, 3);
    convo_checkpoint_free(cp);
    /* a replaced message (same id, new content) stays inline; the log keeps its 5 */
    const char *a1b = "{\"role\":\"assistant\",\"content\":\"HELLO\",\"id\":\"a1\"}";
    const char *repl[] = {U1, a1b, U2};
    put_list_ok(tid, "r1", "c1", repl, NULL, 3, out);
    ck_assert_int_eq(out[0], 0);
    ck_assert_int_eq(out[1], -1);
    ck_assert_int_eq(out[2], -1);
    ck_assert_int_eq(conf_length(conf_store, tid), 5);
    /* the next turn on that line appends again; the replaced one stays inline */
    const char *next[] = {U1, a1b, U2, A2};
    put_list_ok(tid, "r2", "r1", next, NULL, 4, out);
    ck_assert_int_eq(out[1], -1);
    ck_assert_int_eq(out[2], -1); /* inline in r1: the same inline text */
    ck_assert_int_eq(out[3], 5);
    cp = get_ok(tid, "r2");
    channel_items(cp, "messages", &it);
    int64_t rseq[] = {0, -1, -1, 5};
    assert_items(&it, next, rseq, 4);
    convo_checkpoint_free(cp);
    /* a removed message: the list names seqs 0, 2, 3 of c2's */
    const char *removed[] = {U1, U2, A2};
    int64_t rh[] = {0, 2, 3};
    put_list_ok(tid, "d1", "c2", removed, rh, 3, out);
    cp = get_ok(tid, "d1");
    channel_items(cp, "messages", &it);
    assert_items(&it, removed, rh, 3);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(conf_length(conf_store, tid), 6);
}
END_TEST

START_TEST(test_items_interrupted_step)
{
    char tid[256];
    TID(tid, "t");
    int64_t out[2];
    put_list_ok(tid, "c1", NULL, &U1, NULL, 1, out);
    /* the node's write, then the step never commits (interrupt, failure) */
    write_items_ok(tid, "c1", "agent", &A1, 1);
    ck_assert_int_eq(conf_length(conf_store, tid), 1);
    convo_checkpoint *cp = get_ok(tid, "c1");
    convo_items it;
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    int64_t inl[] = {-1};
    assert_items(&it, &A1, inl, 1);
    convo_checkpoint_free(cp);
    /* a put that does not extend c1's list (a retry from c1 with another answer
     * written): the write stays as it was */
    const char *other = "{\"role\":\"assistant\",\"content\":\"retry\"}";
    const char *list[] = {U1, other};
    put_list_ok(tid, "c2", "c1", list, NULL, 2, out);
    cp = get_ok(tid, "c1");
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    assert_items(&it, &A1, inl, 1);
    convo_checkpoint_free(cp);
    const char *logged[] = {U1, other};
    assert_log(tid, logged, 2);
}
END_TEST

START_TEST(test_items_conflicts)
{
    char tid[256];
    TID(tid, "t");
    int64_t out[4];
    put_list_ok(tid, "c1", NULL, &U1, NULL, 1, out);
    /* another writer appends meanwhile: the library puts the fresh item after it */
    conf_append(conf_store, tid, &U2, 1);
    const char *list[] = {U1, A1};
    int64_t h[] = {0, -1};
    put_list_ok(tid, "c2", "c1", list, h, 2, out);
    ck_assert_int_eq(out[1], 2);
    convo_checkpoint *cp = get_ok(tid, "c2");
    convo_items it;
    channel_items(cp, "messages", &it);
    int64_t s2[] = {0, 2};
    assert_items(&it, list, s2, 2);
    convo_checkpoint_free(cp);
    /* a generation condition not met: nothing written */
    convo_error err;
    const char *l3[] = {U1, A1, A2};
    int64_t h3[] = {0, 2, -1};
    ASSERT_FAILS(put_list(tid, "c3", "c2", "messages", "v3", l3, h3, 3, 1, NULL, 7, NULL, &err),
                 err, CONVO_ECONFLICT);
    ASSERT_FAILS(convo_checkpoint_get(conf_store, tid, NS, "c3", &cp, &err), err,
                 CONVO_ENOTFOUND);
    ck_assert_int_eq(conf_length(conf_store, tid), 3);
    /* an explicit expected length not met: CONVO_ECONFLICT, nothing written */
    convo_items_in it_in = CONVO_ITEMS_IN_INIT;
    it_in.items = l3;
    it_in.seqs = h3;
    it_in.n = 3;
    it_in.log = 1;
    const convo_items_in *per[1] = {&it_in};
    convo_channel_in c = {"messages", "v3", NULL};
    convo_checkpoint_in in = CONVO_CHECKPOINT_IN_INIT;
    in.thread_id = tid;
    in.checkpoint_id = "c3";
    in.parent_id = "c2";
    in.channels = &c;
    in.nchannels = 1;
    in.channel_items = per;
    in.expected_length = 1;
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &in, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, tid), 3);
    in.expected_length = 3;
    in.expected_generation = 0;
    ASSERT_OK(convo_checkpoint_put(conf_store, &in, &err), err);
    ck_assert_int_eq(conf_length(conf_store, tid), 4);
}
END_TEST

START_TEST(test_items_bad_input)
{
    char tid[256];
    TID(tid, "t");
    convo_error err;
    const char *norole = "{\"content\":\"x\"}";
    ASSERT_FAILS(put_list(tid, "c1", NULL, "messages", "v", &norole, NULL, 1, 1, NULL, -1, NULL,
                          &err),
                 err, CONVO_EINVAL);
    const char *notjson = "{\"role\":";
    ASSERT_FAILS(put_list(tid, "c1", NULL, "messages", "v", &notjson, NULL, 1, 1, NULL, -1,
                          NULL, &err),
                 err, CONVO_EINVAL);
    const char *none[] = {NULL};
    ASSERT_FAILS(put_list(tid, "c1", NULL, "messages", "v", none, NULL, 1, 1, NULL, -1, NULL,
                          &err),
                 err, CONVO_EINVAL);
    int64_t neg[] = {-5};
    ASSERT_FAILS(put_list(tid, "c1", NULL, "messages", "v", &U1, neg, 1, 1, NULL, -1, NULL,
                          &err),
                 err, CONVO_EINVAL);
    ck_assert_int_eq(conf_length(conf_store, tid), -1); /* nothing written */
    /* both a value and items; items with messages; a reserved or malformed type */
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &U1;
    it.n = 1;
    const convo_items_in *per[1] = {&it};
    convo_blob v = {"json", "[]", 2};
    convo_channel_in c = {"messages", "v", &v};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = "c1";
    cp.channels = &c;
    cp.nchannels = 1;
    cp.channel_items = per;
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &cp, &err), err, CONVO_EINVAL);
    c.value = NULL;
    cp.messages = &U1;
    cp.nmessages = 1;
    cp.expected_length = 0;
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &cp, &err), err, CONVO_EINVAL);
    convo_checkpoint_in plain = CONVO_CHECKPOINT_IN_INIT;
    plain.thread_id = tid;
    plain.checkpoint_id = "c1";
    plain.channels = &c;
    plain.nchannels = 1;
    convo_blob reserved = {"convo/other", "x", 1};
    c.value = &reserved;
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &plain, &err), err, CONVO_EINVAL);
    convo_blob bad = {"convo/items", "\x93\x01\x02\x03", 4};
    c.value = &bad;
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &plain, &err), err, CONVO_EINVAL);
    ck_assert_int_eq(conf_length(conf_store, tid), -1);
    /* a write of an item without role: nothing written */
    int64_t out[1];
    put_list_ok(tid, "c1", NULL, &U1, NULL, 1, out);
    convo_items_in wi = CONVO_ITEMS_IN_INIT;
    wi.items = &norole;
    wi.n = 1;
    const convo_items_in *wper[1] = {&wi};
    convo_write_in w = {0, "messages", {NULL, NULL, 0}};
    convo_writes_in win = CONVO_WRITES_IN_INIT;
    win.thread_id = tid;
    win.checkpoint_id = "c1";
    win.task_id = "t";
    win.writes = &w;
    win.n = 1;
    win.items = wper;
    ASSERT_FAILS(convo_checkpoint_put_writes_ex(conf_store, &win, &err), err, CONVO_EINVAL);
    convo_checkpoint *got = get_ok(tid, "c1");
    ck_assert_uint_eq(convo_checkpoint_write_count(got), 0);
    convo_checkpoint_free(got);
    win.version = 99;
    ASSERT_FAILS(convo_checkpoint_put_writes_ex(conf_store, &win, &err), err, CONVO_EINVAL);
}
END_TEST

START_TEST(test_items_list_export_import)
{
    char tid[256];
    TID(tid, "t");
    const char *conv[] = {U1, A1, U2, A2};
    turn(tid, 0, conv, 0, U1, A1, 1);
    /* list resolves every checkpoint */
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 3);
    const convo_checkpoint *newest = convo_checkpoint_set_get(set, 0);
    ck_assert_str_eq(convo_checkpoint_id(newest), "00-1");
    convo_items it;
    channel_items(newest, "messages", &it);
    int64_t s01[] = {0, 1};
    assert_items(&it, conv, s01, 2);
    convo_checkpoint_set_free(set);
    /* export, delete, import: the references come back with the log */
    const char *ids[] = {tid};
    conf_buf dump = {0};
    ASSERT_OK(convo_export(conf_store, ids, 1, conf_buf_write, &dump, NULL, NULL, &err), err);
    ASSERT_OK(convo_thread_delete(conf_store, tid, &err), err);
    ASSERT_OK(convo_import(conf_store, conf_buf_read, &dump, NULL, NULL, &err), err);
    free(dump.data);
    convo_checkpoint *cp = get_ok(tid, "00-1");
    channel_items(cp, "messages", &it);
    assert_items(&it, conv, s01, 2);
    convo_checkpoint_free(cp);
    cp = get_ok(tid, "00-0");
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    int64_t s1[] = {1};
    assert_items(&it, &conv[1], s1, 1);
    convo_checkpoint_free(cp);
    assert_log(tid, conv, 2);
}
END_TEST

START_TEST(test_items_rewrite_protects)
{
    char tid[256];
    TID(tid, "t");
    const char *conv[] = {U1, A1};
    turn(tid, 0, conv, 0, U1, A1, 0);
    /* popping the answer would leave 00-0's write (now seq 1) dangling: refused */
    convo_rewrite_result r;
    convo_error err;
    ASSERT_FAILS(convo_replace_tail(conf_store, tid, 1, NULL, NULL, 0, NULL, &r, &err), err,
                 CONVO_ECONFLICT);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = 1;
    ASSERT_OK(convo_replace_tail(conf_store, tid, 1, NULL, NULL, 0, &o, &r, &err), err);
    /* what is left resolves: 00-in refers to seq 0 only */
    convo_checkpoint *cp = NULL;
    ASSERT_FAILS(convo_checkpoint_get(conf_store, tid, NS, "00-0", &cp, &err), err,
                 CONVO_ENOTFOUND);
    cp = get_ok(tid, "00-in");
    convo_items it;
    channel_items(cp, "__start__", &it);
    int64_t s0[] = {0};
    assert_items(&it, conv, s0, 1);
    ck_assert_int_eq(convo_checkpoint_generation(cp), 1); /* after the rewrite */
    convo_checkpoint_free(cp);
}
END_TEST

/* A put with items and a body: body and channels as put (the base channel hidden). */
static void put_body(const char *tid, const char *id, const char *parent, const char *body)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &U1;
    int64_t zero = 0;
    it.seqs = parent ? &zero : NULL;
    it.n = 1;
    it.log = 1;
    const convo_items_in *per[2] = {NULL, &it};
    convo_blob sv = {"json", "7", 1};
    convo_channel_in c[2] = {{"step", id, &sv}, {"messages", "m1", NULL}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.body = (convo_blob){"json", body, strlen(body)};
    cp.channels = c;
    cp.nchannels = 2;
    cp.channel_items = per;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
}

static void assert_body(const convo_checkpoint *cp, const char *body)
{
    convo_blob b = convo_checkpoint_body(cp);
    ck_assert_str_eq(b.type, "json");
    ck_assert_uint_eq(b.len, strlen(body));
    ck_assert_int_eq(memcmp(b.bytes, body, b.len), 0);
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 2); /* messages, step: no base */
    for (size_t i = 0; i < 2; i++)
        ck_assert_str_ne(convo_checkpoint_channel(cp, i, NULL, NULL), "__convo_body__");
}

static char *body_text(int k, int drift)
{
    char *b = malloc(1000);
    ck_assert_ptr_nonnull(b);
    snprintf(b, 1000,
             "{\"v\":4,\"ts\":\"2026-11-26T10:00:%02d.000000+00:00\",\"id\":\"c%d\","
             "\"channel_versions\":{\"__start__\":\"%032d.0.1234\",\"messages\":"
             "\"%032d.0.5678\",\"branch:to:agent\":\"%032d.0.9\"},\"versions_seen\":"
             "{\"__input__\":{},\"agent\":{\"branch:to:agent\":\"%032d.0.9\"}}%s}",
             k % 60, k, k, k + 1, k + 2, k + 2,
             drift ? ",\"other\":\"a completely different tail, longer than half of the "
                     "body so that the delta is larger than the body allows: xxxxxxxxxxxxxxxxxx"
                     "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyzzzzzzzzzzzzzzzzzzzzzzz"
                     "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
                     "\""
                   : "");
    return b;
}

START_TEST(test_items_body_deltas)
{
    char tid[256];
    TID(tid, "t");
    char *bodies[6];
    char id[8], parent[8];
    for (int k = 0; k < 6; k++) {
        bodies[k] = body_text(k, k == 4); /* c4 drifts: a new base */
        snprintf(id, sizeof id, "c%d", k);
        snprintf(parent, sizeof parent, "c%d", k - 1);
        put_body(tid, id, k ? parent : NULL, bodies[k]);
    }
    for (int k = 0; k < 6; k++) {
        snprintf(id, sizeof id, "c%d", k);
        convo_checkpoint *cp = get_ok(tid, id);
        assert_body(cp, bodies[k]);
        convo_checkpoint_free(cp);
    }
    /* list gives the same bodies */
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 6);
    for (size_t i = 0; i < 6; i++)
        assert_body(convo_checkpoint_set_get(set, i), bodies[5 - i]);
    convo_checkpoint_set_free(set);
    /* prune to the newest: its base, c4's body, stays although c4 is gone */
    ASSERT_OK(convo_checkpoint_prune(conf_store, tid, 1, &err), err);
    convo_checkpoint *cp = get_ok(tid, "c5");
    assert_body(cp, bodies[5]);
    convo_checkpoint_free(cp);
    /* export, delete, import: the base travels as a value */
    const char *ids[] = {tid};
    conf_buf dump = {0};
    ASSERT_OK(convo_export(conf_store, ids, 1, conf_buf_write, &dump, NULL, NULL, &err), err);
    ASSERT_OK(convo_thread_delete(conf_store, tid, &err), err);
    ASSERT_OK(convo_import(conf_store, conf_buf_read, &dump, NULL, NULL, &err), err);
    free(dump.data);
    cp = get_ok(tid, "c5");
    assert_body(cp, bodies[5]);
    convo_checkpoint_free(cp);
    for (int k = 0; k < 6; k++)
        free(bodies[k]);
    /* a malformed delta body is refused, nothing written */
    convo_checkpoint_in bad = CONVO_CHECKPOINT_IN_INIT;
    bad.thread_id = tid;
    bad.checkpoint_id = "bad";
    bad.body = (convo_blob){"convo/delta", "\x94\x01", 2};
    ASSERT_FAILS(convo_checkpoint_put(conf_store, &bad, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_checkpoint_get(conf_store, tid, NS, "bad", &cp, &err), err,
                 CONVO_ENOTFOUND);
}
END_TEST

/* A delta body whose base is gone reads as CONVO_ECORRUPT, not as a wrong body. */
START_TEST(test_items_body_without_base)
{
    char tid[256];
    TID(tid, "t");
    char *b0 = body_text(0, 0);
    put_body(tid, "c0", NULL, b0);
    free(b0);
    convo_checkpoint *raw = get_ok(tid, "c0");
    ck_assert_str_eq(convo_checkpoint_body(raw).type, "json");
    ck_assert_int_eq(convo_checkpoint_generation(raw), 0);
    ck_assert_int_eq(convo_checkpoint_generation(NULL), -1);
    convo_checkpoint_free(raw);
    /* a checkpoint put with c0's delta body but not listing the base */
    convo_checkpoint_in in = CONVO_CHECKPOINT_IN_INIT;
    in.thread_id = tid;
    in.checkpoint_id = "orphan";
    /* [1, "json", 3, bin(COPY 0 3)] */
    in.body = (convo_blob){"convo/delta", "\x94\x01\xa4json\x03\xc4\x03\x00\x00\x03", 13};
    convo_error err;
    ASSERT_OK(convo_checkpoint_put(conf_store, &in, &err), err);
    convo_checkpoint *cp = NULL;
    ASSERT_FAILS(convo_checkpoint_get(conf_store, tid, NS, "orphan", &cp, &err), err,
                 CONVO_ECORRUPT);
    ck_assert_ptr_null(cp);
}
END_TEST

void conf_add_items_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "items");
    tcase_add_test(tc, test_items_turns);
    tcase_add_test(tc, test_items_branches);
    tcase_add_test(tc, test_items_interrupted_step);
    tcase_add_test(tc, test_items_conflicts);
    tcase_add_test(tc, test_items_bad_input);
    tcase_add_test(tc, test_items_list_export_import);
    tcase_add_test(tc, test_items_rewrite_protects);
    tcase_add_test(tc, test_items_body_deltas);
    tcase_add_test(tc, test_items_body_without_base);
}
