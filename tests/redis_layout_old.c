/* redis_layout_old.c — stores of older Redis layouts: layout 1
 * (checkpoints numbered per thread) is migrated when opened, or a thread by
 * its next checkpoint write, and then lists across threads in put order;
 * layout 2 gets its "l" members (checkpoints by log length) on open, a thread
 * left behind by the rewrite or copy that meets it; a record that does not
 * decode keeps its thread in layout 2 and is CONVO_ECORRUPT. Part of
 * tests/redis_layout (redis_layout.h). */
#include "redis_layout.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ids listed (newest first), joined by spaces; before = (bthread, "", bid) or none. */
static void list_ids(convo_store *s, const char *thread, const char *bthread, const char *bns,
                     const char *bid, char *out, size_t size)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = thread;
    o.before = bid;
    o.before_thread_id = bthread;
    o.before_ns = bns;
    convo_checkpoint_set *set;
    convo_error err;
    int rc = convo_checkpoint_list(s, &o, &set, &err);
    ck_assert_msg(rc == 0, "list: %d %s", rc, err.message);
    out[0] = '\0';
    for (size_t i = 0; i < convo_checkpoint_set_count(set); i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? " " : "",
                 convo_checkpoint_id(cp));
    }
    convo_checkpoint_set_free(set);
}

/* The layout 1 a thread had before put orders were store-wide: its
 * checkpoints numbered 1, 2, 3... in put order, meta v = 1, co = the count. */
static const char downgrade_lua[] =
    "local META, CP, CPIDX = KEYS[3], KEYS[5], KEYS[6]\n"
    "local m = redis.call('ZRANGEBYLEX', CPIDX, '[o\\0', '(o\\1')\n"
    "for i = 1, #m do\n"
    "  local old, field = string.match(m[i], '^o%z(%x+)%z(.*)$')\n"
    "  local ns, id = string.match(field, '^([^%z]*)%z(.*)$')\n"
    "  redis.call('ZREM', CPIDX, m[i], 'n\\0' .. ns .. '\\0' .. old .. '\\0' .. id)\n"
    "  local rec = redis.call('HGET', CP, field)\n"
    "  local o1 = cmsgpack.unpack_one(rec)\n"
    "  redis.call('HSET', CP, field, cmsgpack.pack(i) .. string.sub(rec, o1 + 1))\n"
    "  local h = string.format('%016x', i)\n"
    "  redis.call('ZADD', CPIDX, 0, 'o\\0' .. h .. '\\0' .. field,\n"
    "             0, 'n\\0' .. ns .. '\\0' .. h .. '\\0' .. id)\n"
    "end\n"
    "redis.call('HSET', META, 'v', '1', 'co', #m)\n"
    "return #m\n";

static void downgrade(const char *prefix, const char *id, long long count)
{
    char k[8][512];
    for (int i = 0; i < 8; i++)
        key_of(k[i], sizeof k[i], prefix, id, i);
    redisReply *r = on_key(k[0], "EVAL %s 8 %s %s %s %s %s %s %s %s", downgrade_lua, k[0], k[1],
                           k[2], k[3], k[4], k[5], k[6], k[7]);
    ck_assert_int_eq(r->integer, count);
    freeReplyObject(r);
}

static void assert_hget(const char *key, const char *field, const char *want)
{
    redisReply *r = on_key(key, "HGET %s %s", key, field);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0,
                  "HGET %s %s: want %s, got %s", key, field, want,
                  r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
    freeReplyObject(r);
}

/* Layout 2, before checkpoints were indexed by log length: no "l" members,
 * meta v = 2. Returns how many members it removed. */
static const char downgrade2_lua[] =
    "local n = redis.call('ZREMRANGEBYLEX', KEYS[6], '[l\\0', '(l\\1')\n"
    "redis.call('HSET', KEYS[3], 'v', '2')\n"
    "return n\n";

/* Runs a script on the eight keys of thread id; returns its integer reply. */
static long long eval_thread(const char *lua, const char *prefix, const char *id)
{
    char k[8][512];
    for (int i = 0; i < 8; i++)
        key_of(k[i], sizeof k[i], prefix, id, i);
    redisReply *r = on_key(k[0], "EVAL %s 8 %s %s %s %s %s %s %s %s", lua, k[0], k[1], k[2], k[3],
                           k[4], k[5], k[6], k[7]);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

START_TEST(test_old_layout)
{
    char prefix[256], list[512], meta_a[512], meta_b[512], store_key[512];
    convo_store *s = open_store("old", NULL, NULL, prefix, sizeof prefix);
    const char *a = "old-a", *b = "old-b";
    put_ok(s, b, "", "b0"); /* per-thread counters would put a2 (2) after b1 (2) */
    put_ok(s, a, "", "a1");
    put_ok(s, b, "", "b1");
    put_ok(s, a, "", "a2");
    put_ok(s, b, "", "b2");
    put_ok(s, b, "sub", "s1");
    convo_close(s);
    /* what layout 1 left: per-thread counters, no P:store */
    downgrade(prefix, a, 2);
    downgrade(prefix, b, 4);
    drop_store_key(prefix);
    key_of(meta_a, sizeof meta_a, prefix, a, 2);
    key_of(meta_b, sizeof meta_b, prefix, b, 2);
    snprintf(store_key, sizeof store_key, "%s:store", prefix);
    assert_hget(meta_a, "v", "1");
    /* open migrates every thread of the index, then marks the store */
    s = open_store("old", NULL, NULL, prefix, sizeof prefix);
    assert_hget(meta_a, "v", "4");
    assert_hget(meta_b, "v", "4");
    assert_hget(store_key, "v", cluster ? "9" : "8");
    list_ids(s, a, NULL, NULL, NULL, list, sizeof list);
    ck_assert_str_eq(list, "a2 a1");
    list_ids(s, b, NULL, NULL, NULL, list, sizeof list);
    ck_assert_str_eq(list, "s1 b2 b1 b0");
    list_ids(s, NULL, a, "", "a2", list, sizeof list);
    ck_assert_str_eq(list, "a1 b1 b0");
    list_ids(s, b, a, "", "a2", list, sizeof list);
    ck_assert_str_eq(list, "b1 b0");
    put_ok(s, a, "", "a3");
    list_ids(s, NULL, b, "sub", "s1", list, sizeof list);
    ck_assert_str_eq(list, "a2 a1 b2 b1 b0");
    /* a thread still in layout 1 after that (an older writer): it loads, and
     * its next checkpoint write migrates it first */
    downgrade(prefix, b, 4);
    convo_history *h;
    convo_error err;
    ck_assert_int_eq(convo_load(s, b, NULL, &h, &err), 0);
    convo_history_free(h);
    put_ok(s, b, "", "b3");
    assert_hget(meta_b, "v", "4");
    list_ids(s, b, NULL, NULL, NULL, list, sizeof list);
    ck_assert_str_eq(list, "b3 s1 b2 b1 b0");
    list_ids(s, NULL, b, "", "b3", list, sizeof list);
    ck_assert_str_eq(list, "a3 a2 a1 s1 b2 b1 b0");
    list_ids(s, NULL, a, "", "a3", list, sizeof list);
    ck_assert_str_eq(list, "a2 a1 s1 b2 b1 b0");
    delete_ok(s, a);
    delete_ok(s, b);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

/* Layout 2 (no "l" members) is migrated on open: a rewrite then finds the
 * checkpoints past keep. A thread put back in layout 2 afterwards (an older
 * writer) is migrated by the rewrite that meets it, and one whose checkpoint
 * lost its member (an older convo's put) is indexed again first. */
START_TEST(test_layout2_migrated)
{
    char prefix[256], meta[512], store_key[512];
    convo_store *s = open_store("two", NULL, NULL, prefix, sizeof prefix);
    const char *t = "two-t", *plain = "two-plain";
    convo_error err;
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(put(s, t, "", "c3", 1, 2, &err), 0); /* log_length 3 */
    put_ok(s, t, "sub", "c0");                             /* log_length 0 */
    ck_assert_int_eq(convo_append(s, plain, msgs, NULL, 2, NULL, NULL, &err), 0);
    convo_close(s);
    ck_assert_int_eq(eval_thread(downgrade2_lua, prefix, t), 2);
    eval_thread(downgrade2_lua, prefix, plain);
    snprintf(store_key, sizeof store_key, "%s:store", prefix);
    freeReplyObject(on_key(store_key, "HSET %s v 2", store_key));
    key_of(meta, sizeof meta, prefix, t, 2);
    assert_hget(meta, "v", "2");

    s = open_store("two", NULL, NULL, prefix, sizeof prefix);
    assert_hget(meta, "v", "4");
    assert_hget(store_key, "v", cluster ? "9" : "8");
    ck_assert_int_eq(loglen_members(prefix, t), 2);
    ck_assert_int_eq(generation_of(s, t), 0);
    ck_assert_int_eq(generation_of(s, plain), 0);
    char plain_meta[512];
    key_of(plain_meta, sizeof plain_meta, prefix, plain, 2);
    assert_hget(plain_meta, "v", "4");
    ck_assert_int_eq(rewrite(s, t, 2, 0, &err), CONVO_ECONFLICT);
    ck_assert_msg(strstr(err.message, "c3") != NULL, "%s", err.message);

    /* back in layout 2 behind the store's back: the rewrite migrates it */
    ck_assert_int_eq(eval_thread(downgrade2_lua, prefix, t), 2);
    ck_assert_int_eq(rewrite(s, t, 2, 0, &err), CONVO_ECONFLICT);
    ck_assert_msg(strstr(err.message, "c3") != NULL, "%s", err.message);
    assert_hget(meta, "v", "4");
    ck_assert_int_eq(loglen_members(prefix, t), 2);
    /* a checkpoint without its member in layout 3: indexed before the rewrite */
    char cpidx[512];
    key_of(cpidx, sizeof cpidx, prefix, t, 5);
    redisReply *r = on_key(cpidx, "ZREMRANGEBYLEX %s %b %b", cpidx, "[l\0000000000000000003",
                           (size_t)19, "(l\1", (size_t)3);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert_int_eq(loglen_members(prefix, t), 1);
    ck_assert_int_eq(rewrite(s, t, 2, 0, &err), CONVO_ECONFLICT);
    ck_assert_msg(strstr(err.message, "c3") != NULL, "%s", err.message);
    /* a second member for a checkpoint (with a wrong length) and one for none */
    r = on_key(cpidx, "ZADD %s 0 %b 0 %b", cpidx, "l\0000000000000000001\0\0c3", (size_t)22,
               "l\0000000000000000009\0\0gone", (size_t)24);
    ck_assert_int_eq(r->integer, 2);
    freeReplyObject(r);
    ck_assert_int_eq(rewrite(s, t, 2, 0, &err), CONVO_ECONFLICT);
    ck_assert_msg(strstr(err.message, "c3") != NULL, "%s", err.message);
    ck_assert_int_eq(loglen_members(prefix, t), 2);
    /* dropped with it: record, members, writes */
    ck_assert_int_eq(rewrite(s, t, 2, 1, &err), 0);
    ck_assert_int_eq(loglen_members(prefix, t), 1);
    ck_assert_int_eq(hexists(prefix, t, 4, "\0c3", 3), 0);
    ck_assert_int_eq(hexists(prefix, t, 4, "sub\0c0", 6), 1);
    ck_assert_int_eq(generation_of(s, t), 1);
    delete_ok(s, t);
    delete_ok(s, plain);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

/* A copy with checkpoints (copy.lua) of a source in layout 2 (no "l"
 * members: an older writer), or of one whose checkpoint lost its member: the
 * source is indexed first, and the copy holds every checkpoint with its member. */
START_TEST(test_copy_old_layout_source)
{
    char prefix[256], meta[512], cpidx[512];
    convo_store *s = open_store("cpy", NULL, NULL, prefix, sizeof prefix);
    const char *t = "cpy-t";
    convo_error err;
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(put(s, t, "", "c3", 1, 2, &err), 0); /* log_length 3 */
    put_ok(s, t, "sub", "c0");                             /* log_length 0 */
    ck_assert_int_eq(eval_thread(downgrade2_lua, prefix, t), 2);
    key_of(meta, sizeof meta, prefix, t, 2);
    assert_hget(meta, "v", "2");
    convo_fork_opts o = CONVO_FORK_OPTS_INIT;
    o.with_checkpoints = 1;
    ck_assert_msg(convo_thread_fork_ex(s, t, "cpy-a", -1, &o, &err) == 0, "%s", err.message);
    assert_hget(meta, "v", "4");
    ck_assert_int_eq(loglen_members(prefix, "cpy-a"), 2);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "cpy-a", "", "c3", &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 3);
    convo_checkpoint_free(cp);
    /* c3 loses its member (an older convo's put): indexed again before the copy */
    key_of(cpidx, sizeof cpidx, prefix, t, 5);
    redisReply *r = on_key(cpidx, "ZREMRANGEBYLEX %s %b %b", cpidx, "[l\0000000000000000003",
                           (size_t)19, "(l\1", (size_t)3);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert_int_eq(loglen_members(prefix, t), 1);
    ck_assert_msg(convo_thread_fork_ex(s, t, "cpy-b", -1, &o, &err) == 0, "%s", err.message);
    ck_assert_int_eq(loglen_members(prefix, "cpy-b"), 2);
    ck_assert_int_eq(loglen_members(prefix, t), 2);
    delete_ok(s, t);
    delete_ok(s, "cpy-a");
    delete_ok(s, "cpy-b");
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

/* A thread of layout 2 with a checkpoint record that does not decode: the
 * open migrates the others and leaves it (and P:store) behind; the calls that
 * need it migrated fail with CONVO_ECORRUPT and write nothing; it still loads. */
START_TEST(test_layout2_corrupt_record)
{
    char prefix[256], store_key[512], cp_key[512], meta[512], good_meta[512];
    convo_store *s = open_store("bad", NULL, NULL, prefix, sizeof prefix);
    const char *t = "bad-t", *good = "bad-good";
    convo_error err;
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    put_ok(s, t, "", "c1");
    put_ok(s, good, "", "c1");
    convo_close(s);
    eval_thread(downgrade2_lua, prefix, t);
    eval_thread(downgrade2_lua, prefix, good);
    key_of(cp_key, sizeof cp_key, prefix, t, 4);
    freeReplyObject(on_key(cp_key, "HSET %s %b %b", cp_key, "\0c1", (size_t)3, "\xc1", (size_t)1));
    snprintf(store_key, sizeof store_key, "%s:store", prefix);
    freeReplyObject(on_key(store_key, "HSET %s v 2", store_key));
    s = open_store("bad", NULL, NULL, prefix, sizeof prefix);
    key_of(meta, sizeof meta, prefix, t, 2);
    key_of(good_meta, sizeof good_meta, prefix, good, 2);
    assert_hget(good_meta, "v", "4");
    assert_hget(meta, "v", "2");
    assert_hget(store_key, "v", "2");
    bytes before = snapshot(prefix, t);
    ck_assert_int_eq(rewrite(s, t, 1, 1, &err), CONVO_ECORRUPT);
    ck_assert_msg(strstr(err.message, "could not be decoded") != NULL, "%s", err.message);
    same_snapshot(&before, prefix, t, "rewrite of a thread that cannot be migrated");
    ck_assert_int_eq(put(s, t, "", "c2", 0, 0, &err), CONVO_ECORRUPT);
    same_snapshot(&before, prefix, t, "put to a thread that cannot be migrated");
    ck_assert_int_eq(generation_of(s, t), 0);
    /* a generation that is not a number */
    convo_history *h;
    freeReplyObject(on_key(good_meta, "HSET %s g x1", good_meta));
    ck_assert_int_eq(convo_load(s, good, NULL, &h, &err), CONVO_ECORRUPT);
    freeReplyObject(on_key(good_meta, "HSET %s g 123456789012345678901234", good_meta));
    ck_assert_int_eq(convo_load(s, good, NULL, &h, &err), CONVO_ECORRUPT);
    freeReplyObject(on_key(good_meta, "HSET %s g 7", good_meta));
    ck_assert_int_eq(generation_of(s, good), 7);
    free(before.p);
    delete_ok(s, t);
    delete_ok(s, good);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

void redis_layout_add_old_tests(TCase *tc)
{
    tcase_add_test(tc, test_old_layout);
    tcase_add_test(tc, test_layout2_migrated);
    tcase_add_test(tc, test_copy_old_layout_source);
    tcase_add_test(tc, test_layout2_corrupt_record);
}
