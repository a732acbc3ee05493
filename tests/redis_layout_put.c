/* redis_layout_put.c — checkpoint puts on Redis that must write all or
 * nothing: a put with messages that conflicts leaves every key as it was
 * (index entry, deadline and the store's order included); a put with log
 * references swaps inline items for references in its own script, writes
 * nothing when its condition fails and leaves a record it cannot decode
 * alone. Part of tests/redis_layout (redis_layout.h). */
#include "redis_layout.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

START_TEST(test_put_log_conflict_writes_nothing)
{
    char prefix[256];
    convo_store *s = open_store("conflict", "ttl=3600", NULL, prefix, sizeof prefix);
    convo_error err;
    const char *t = "t";
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(put(s, t, "", "c1", 1, 2, &err), 0); /* length 3 now */
    /* another store, opened before the snapshot: the first open that finds
     * threads records the layout in P:store */
    char other[256];
    convo_store *s2 = open_store("conflict", "ttl=3600", NULL, other, sizeof other);
    bytes before = snapshot(prefix, t);
    /* the store wrote t lately: the script alone */
    ck_assert_int_eq(put(s, t, "", "c2", 2, 2, &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "thread has 3 messages, expected 2"));
    same_snapshot(&before, prefix, t, "conflict on a thread the store knows");
    ck_assert_int_eq(put(s, t, "", "c1", 1, 7, &err), CONVO_ECONFLICT); /* same key too */
    same_snapshot(&before, prefix, t, "conflict replacing a checkpoint");
    /* the other store: expected 0 runs inside the index protocol, > 0 alone */
    ck_assert_int_eq(put(s2, t, "", "c2", 1, 0, &err), CONVO_ECONFLICT);
    same_snapshot(&before, prefix, t, "expected 0 from a store that does not know the thread");
    ck_assert_int_eq(put(s2, t, "", "c2", 1, 4, &err), CONVO_ECONFLICT);
    same_snapshot(&before, prefix, t, "expected 4 from a store that does not know the thread");
    /* a missing thread: not created, not indexed */
    bytes none = snapshot(prefix, "missing");
    ck_assert_int_eq(put(s2, "missing", "", "c1", 1, 1, &err), CONVO_ECONFLICT);
    same_snapshot(&none, prefix, "missing", "conflict on a missing thread");
    convo_history *h;
    ck_assert_int_eq(convo_load(s2, "missing", NULL, &h, &err), CONVO_ENOTFOUND);
    /* the right length: messages and checkpoint together, the deadline renewed */
    ck_assert_int_eq(put(s2, t, "", "c2", 2, 3, &err), 0);
    ck_assert_int_eq(convo_load(s, t, NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 5);
    convo_history_free(h);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, t, "", "c2", &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 5);
    convo_checkpoint_free(cp);
    char key[512];
    key_of(key, sizeof key, prefix, t, 0);
    redisReply *r = on_key(key, "PTTL %s", key);
    ck_assert_int_gt(r->integer, 3590 * 1000LL);
    freeReplyObject(r);
    free(before.p);
    free(none.p);
    delete_ok(s, t);
    drop_store_key(prefix);
    convo_close(s2);
    convo_close(s);
}
END_TEST

/* ---- log references (put_refs.lua) ----
 * A turn's input checkpoint "in": __start__ (version 1) = {messages: [msgs[0]]}
 * and the __start__ task's pending write [msgs[0]], both inline; then "c0"
 * (parent "in") whose message channel appends msgs[0] to the log, turning both
 * into references in the same script. */
static const char in_write[] = "\0in\0start\0" "0"; /* NS\0ID\0TASK\0IDX in writes */
static const char in_value[] = "\0__start__\0" "1"; /* NS\0CHANNEL\0VERSION in blobs */

static void put_input(convo_store *s, const char *id)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = msgs;
    it.n = 1;
    it.key = "messages";
    it.rest = (convo_blob){"json", "{}", 2};
    const convo_items_in *per[1] = {&it};
    convo_channel_in ch = {"__start__", "1", NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = id;
    cp.checkpoint_id = "in";
    cp.channels = &ch;
    cp.nchannels = 1;
    cp.channel_items = per;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    ck_assert_msg(rc == 0, "put in: %d %s", rc, err.message);
    it.key = NULL;
    it.rest = (convo_blob){NULL, NULL, 0};
    convo_write_in w = {0, "messages", {NULL, NULL, 0}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = id;
    in.checkpoint_id = "in";
    in.task_id = "start";
    in.writes = &w;
    in.n = 1;
    in.items = per;
    rc = convo_checkpoint_put_writes_ex(s, &in, &err);
    ck_assert_msg(rc == 0, "put_writes in: %d %s", rc, err.message);
}

/* Checkpoint cp_id (parent "in") whose messages are msgs[0] (hint: seq or -1). */
static int put_commit(convo_store *s, const char *id, const char *cp_id, int64_t hint,
                      int64_t expected_generation, convo_error *err)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = msgs;
    it.seqs = &hint;
    it.n = 1;
    it.log = 1;
    const convo_items_in *per[1] = {&it};
    convo_channel_in ch = {"messages", cp_id, NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = id;
    cp.checkpoint_id = cp_id;
    cp.parent_id = "in";
    cp.channels = &ch;
    cp.nchannels = 1;
    cp.channel_items = per;
    cp.expected_generation = expected_generation;
    return convo_checkpoint_put(s, &cp, err);
}

/* A copy of field of a thread's hash (kind), *len its length; NULL when absent. */
static char *raw_hget(const char *prefix, const char *id, int kind, const char *field,
                      size_t flen, size_t *len)
{
    char key[512];
    key_of(key, sizeof key, prefix, id, kind);
    redisReply *r = on_key(key, "HGET %s %b", key, field, flen);
    char *out = NULL;
    *len = 0;
    if (r->type == REDIS_REPLY_STRING) {
        out = malloc(r->len + 1);
        ck_assert_ptr_nonnull(out);
        memcpy(out, r->str, r->len);
        *len = r->len;
    }
    freeReplyObject(r);
    return out;
}

static void raw_hset(const char *prefix, const char *id, int kind, const char *field,
                     size_t flen, const char *value, size_t len)
{
    char key[512];
    key_of(key, sizeof key, prefix, id, kind);
    freeReplyObject(on_key(key, "HSET %s %b %b", key, field, flen, value, len));
}

/* Whether checkpoint "in" has its "l" member at log length n. */
static int in_member_at(const char *prefix, const char *id, int n)
{
    char key[512], m[64];
    key_of(key, sizeof key, prefix, id, 5);
    int len = snprintf(m, sizeof m, "l%c%016x%c%cin", 0, n, 0, 0);
    redisReply *r = on_key(key, "ZSCORE %s %b", key, m, (size_t)len);
    int yes = r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return yes;
}

static void assert_raw(const char *prefix, const char *id, int kind, const char *field,
                       size_t flen, const char *want, size_t want_len, const char *what)
{
    size_t len;
    char *now = raw_hget(prefix, id, kind, field, flen, &len);
    ck_assert_msg(now && len == want_len && memcmp(now, want, len) == 0, "%s changed", what);
    free(now);
}

START_TEST(test_refs_swapped_in_the_put)
{
    char prefix[256];
    convo_store *s = open_store("refs", NULL, NULL, prefix, sizeof prefix);
    convo_error err;
    put_input(s, "t");
    ck_assert(in_member_at(prefix, "t", 0));
    int rc = put_commit(s, "t", "c0", -1, -1, &err);
    ck_assert_msg(rc == 0, "put c0: %d %s", rc, err.message);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "in", &cp, &err), 0);
    convo_items it;
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    ck_assert_uint_eq(it.n, 1);
    ck_assert_int_eq(it.seqs[0], 0); /* a reference to seq 0 */
    ck_assert_int_eq(convo_checkpoint_channel_items(cp, 0, &it), 1);
    ck_assert_int_eq(it.seqs[0], 0);
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 1);
    convo_checkpoint_free(cp);
    /* the record's log_length and its "l" member moved together */
    ck_assert(in_member_at(prefix, "t", 1));
    ck_assert(!in_member_at(prefix, "t", 0));
    ck_assert_int_eq(loglen_members(prefix, "t"), 2);
    delete_ok(s, "t");
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

/* The generation condition fails before the script writes anything: messages,
 * checkpoint, swaps, index entry, deadlines, the store's order. */
START_TEST(test_refs_conflict_writes_nothing)
{
    char prefix[256], other[256];
    convo_store *s = open_store("refs-conflict", "ttl=3600", NULL, prefix, sizeof prefix);
    convo_error err;
    put_input(s, "t");
    convo_store *s2 = open_store("refs-conflict", "ttl=3600", NULL, other, sizeof other);
    bytes before = snapshot(prefix, "t");
    ck_assert_int_eq(put_commit(s, "t", "c0", -1, 7, &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "generation 0, expected 7"));
    same_snapshot(&before, prefix, "t", "a put with swaps and messages");
    ck_assert_int_eq(put_commit(s2, "t", "c0", -1, 7, &err), CONVO_ECONFLICT);
    same_snapshot(&before, prefix, "t", "the same from a store that does not know the thread");
    free(before.p);
    /* no fresh message (msgs[0] is seq 0 already): the condition still holds */
    ck_assert_int_eq(convo_append(s, "t", msgs, NULL, 1, NULL, NULL, &err), 0);
    before = snapshot(prefix, "t");
    ck_assert_int_eq(put_commit(s, "t", "c1", 0, 7, &err), CONVO_ECONFLICT);
    same_snapshot(&before, prefix, "t", "a put without messages");
    ck_assert_int_eq(put_commit(s, "t", "c1", 0, 0, &err), 0);
    free(before.p);
    delete_ok(s, "t");
    drop_store_key(prefix);
    convo_close(s2);
    convo_close(s);
}
END_TEST

/* Redis keeps what a script wrote before an error, so swaps.lua decodes each
 * record it would change before the first write of its swap, and leaves one
 * it cannot decode as it is: the put goes in whole, that value stays inline
 * (it still holds the same items), nothing is half-swapped. Here the records
 * are given an array header of 3 bytes (array 16): msgpack-c, and so a get,
 * reads them as before; swaps.lua takes only the 1-byte form convo writes. */
static char *widened(const char *rec, size_t len, size_t at, size_t *out_len)
{
    ck_assert_msg(at < len && ((unsigned char)rec[at] & 0xf0) == 0x90, "no fixarray at %zu", at);
    char *w = malloc(len + 2);
    ck_assert_ptr_nonnull(w);
    memcpy(w, rec, at);
    w[at] = (char)0xdc;
    w[at + 1] = 0;
    w[at + 2] = (char)(rec[at] & 0x0f);
    memcpy(w + at + 3, rec + at + 1, len - at - 1);
    *out_len = len + 2;
    return w;
}

static int64_t length_of(convo_store *s, const char *id)
{
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, id, NULL, &h, &err);
    ck_assert_msg(rc == 0, "load %s: %d %s", id, rc, err.message);
    int64_t n = convo_history_length(h);
    convo_history_free(h);
    return n;
}

START_TEST(test_refs_undecodable_record_left_alone)
{
    char prefix[256];
    convo_store *s = open_store("refs-corrupt", NULL, NULL, prefix, sizeof prefix);
    convo_error err;
    size_t len, wlen, vlen, clen;
    /* the pending write: left as it is; the value is swapped */
    put_input(s, "w");
    char *rec = raw_hget(prefix, "w", 7, in_write, sizeof in_write - 1, &len);
    char *w = widened(rec, len, 0, &wlen);
    free(rec);
    raw_hset(prefix, "w", 7, in_write, sizeof in_write - 1, w, wlen);
    int rc = put_commit(s, "w", "c0", -1, -1, &err);
    ck_assert_msg(rc == 0, "put c0: %d %s", rc, err.message);
    ck_assert_int_eq(length_of(s, "w"), 1);
    assert_raw(prefix, "w", 7, in_write, sizeof in_write - 1, w, wlen, "the write");
    ck_assert(in_member_at(prefix, "w", 1)); /* by the value's swap */
    convo_checkpoint *cp;
    convo_items it;
    ck_assert_int_eq(convo_checkpoint_get(s, "w", "", "in", &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    ck_assert_int_eq(it.seqs[0], -1); /* still inline */
    ck_assert_int_eq(convo_checkpoint_channel_items(cp, 0, &it), 1);
    ck_assert_int_eq(it.seqs[0], 0);
    convo_checkpoint_free(cp);
    free(w);
    /* the checkpoint's record (its tail [nil, "{}", nil, nil, 0]): neither
     * value is swapped, since its log_length could not be raised */
    put_input(s, "r");
    rec = raw_hget(prefix, "r", 4, "\0in", 3, &len);
    static const char tail[] = "\x95\xc0\xa2{}\xc0\xc0";
    ck_assert_msg(rec && len > 8 && memcmp(rec + len - 8, tail, 8) == 0, "unexpected record");
    char *c = widened(rec, len, len - 8, &clen);
    free(rec);
    raw_hset(prefix, "r", 4, "\0in", 3, c, clen);
    w = raw_hget(prefix, "r", 7, in_write, sizeof in_write - 1, &wlen);
    char *v = raw_hget(prefix, "r", 6, in_value, sizeof in_value - 1, &vlen);
    ck_assert(w && v);
    rc = put_commit(s, "r", "c0", -1, -1, &err);
    ck_assert_msg(rc == 0, "put c0: %d %s", rc, err.message);
    ck_assert_int_eq(length_of(s, "r"), 1);
    assert_raw(prefix, "r", 7, in_write, sizeof in_write - 1, w, wlen, "the write");
    assert_raw(prefix, "r", 6, in_value, sizeof in_value - 1, v, vlen, "the value");
    assert_raw(prefix, "r", 4, "\0in", 3, c, clen, "the record");
    ck_assert(in_member_at(prefix, "r", 0));
    ck_assert_int_eq(convo_checkpoint_get(s, "r", "", "c0", &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 1);
    convo_checkpoint_free(cp);
    free(c);
    free(w);
    free(v);
    delete_ok(s, "w");
    delete_ok(s, "r");
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

void redis_layout_add_put_tests(TCase *tc)
{
    tcase_add_test(tc, test_put_log_conflict_writes_nothing);
    tcase_add_test(tc, test_refs_swapped_in_the_put);
    tcase_add_test(tc, test_refs_conflict_writes_nothing);
    tcase_add_test(tc, test_refs_undecodable_record_left_alone);
}
