/* redis-layout.c — the Redis driver's layouts and its tail rewrite, seen by a
 * plain hiredis client, on one server or on a Redis Cluster: a checkpoint put
 * with messages that conflicts leaves every key as it was (index entry, deadline
 * and the store's order included); a store of layout 1 (checkpoints numbered per
 * thread) is migrated when opened, or a thread by its next checkpoint write, and
 * then lists across threads in put order; a store of layout 2 gets its "l"
 * members (checkpoints by log length) on open, a thread left behind by the
 * rewrite that meets it; a refused rewrite writes nothing, one that drops
 * checkpoints removes the values only they listed; what a rewrite costs; a
 * put with log references swaps in its own script, writes nothing when its
 * condition fails and leaves a record it cannot decode alone.
 * Usage: tests/redis_layout URL PREFIX. URL is redis://HOST:PORT or
 * redis+cluster://... (the nodes from $CONVO_TEST_REDIS_CLUSTER_PORTS); every
 * key it writes starts with PREFIX and is deleted when the checks pass. */
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_NODES 16

static const char *base_url, *base_prefix;
static int cluster;
static redisContext *nodes[MAX_NODES];
static int nnodes;

static const char *const suffixes[] = {"msgs", "idem", "meta", "extra",
                                       "cp",   "cpidx", "blobs", "writes"};

/* ------------------------------------------------------------ helpers */

static void connect_nodes(void)
{
    char hosts[512];
    if (cluster) {
        const char *ports = getenv("CONVO_TEST_REDIS_CLUSTER_PORTS");
        ck_assert_msg(ports && *ports, "CONVO_TEST_REDIS_CLUSTER_PORTS is not set");
        snprintf(hosts, sizeof hosts, "%s", ports);
    } else {
        /* redis://HOST:PORT[/...]: the test servers have no password */
        const char *hp = base_url + strlen("redis://");
        const char *colon = strchr(hp, ':');
        ck_assert_msg(colon && !strchr(hp, '@'), "unsupported URL %s", base_url);
        snprintf(hosts, sizeof hosts, "%d", atoi(colon + 1));
    }
    for (char *p = strtok(hosts, " "); p && nnodes < MAX_NODES; p = strtok(NULL, " ")) {
        redisContext *c = redisConnect("127.0.0.1", atoi(p));
        ck_assert_msg(c && !c->err, "connect to port %s: %s", p, c ? c->errstr : "oom");
        nodes[nnodes++] = c;
    }
}

static void disconnect_nodes(void)
{
    while (nnodes > 0)
        redisFree(nodes[--nnodes]);
}

/* The node that serves key: the one node, or the master that does not answer MOVED. */
static redisContext *node_for(const char *key)
{
    for (int i = 0; i < nnodes; i++) {
        redisReply *r = redisCommand(nodes[i], "EXISTS %s", key);
        ck_assert_msg(r != NULL, "EXISTS %s: %s", key, nodes[i]->errstr);
        int moved = r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED", 5) == 0;
        freeReplyObject(r);
        if (!moved)
            return nodes[i];
    }
    ck_abort_msg("no node serves %s", key);
    return NULL;
}

/* A command on the node of `key`, which must also be its first key. */
static redisReply *on_key(const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisContext *c = node_for(key);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "%s on %s: %s", fmt, key, c->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s on %s: %s", fmt, key, r->str);
    return r;
}

static void key_of(char *out, size_t size, const char *prefix, const char *id, int kind)
{
    snprintf(out, size, "%s:{%s}:%s", prefix, id, suffixes[kind]);
}

static unsigned crc16(const char *p, size_t n)
{
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)p[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
        crc &= 0xffff;
    }
    return crc;
}

/* The thread index key holding id (plain ids: the tag is the id): P:threads,
 * or on a cluster P:threads:{N}, N the smallest number hashing to id's slot. */
static void index_key_of(char *out, size_t size, const char *prefix, const char *id)
{
    if (!cluster) {
        snprintf(out, size, "%s:threads", prefix);
        return;
    }
    unsigned slot = crc16(id, strlen(id)) & 16383;
    char n[16];
    for (unsigned i = 0;; i++) {
        snprintf(n, sizeof n, "%u", i);
        if ((crc16(n, strlen(n)) & 16383) == slot)
            break;
    }
    snprintf(out, size, "%s:threads:{%s}", prefix, n);
}

/* A growable byte string. */
typedef struct bytes {
    char *p;
    size_t len;
} bytes;

static void bytes_add(bytes *b, const char *s, size_t n)
{
    b->p = realloc(b->p, b->len + n + 1);
    ck_assert_ptr_nonnull(b->p);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '|';
}

static void bytes_reply(bytes *b, const redisReply *r)
{
    char num[32];
    if (r->type == REDIS_REPLY_STRING) {
        bytes_add(b, r->str, r->len);
    } else if (r->type == REDIS_REPLY_INTEGER) {
        snprintf(num, sizeof num, "%lld", r->integer);
        bytes_add(b, num, strlen(num));
    } else {
        bytes_add(b, "(nil)", 5);
    }
    bytes_add(b, "|", 1);
}

/* Everything a write to thread id could change: each key's DUMP and
 * PEXPIRETIME, its index entry, and the store's own key P:store. */
static bytes snapshot(const char *prefix, const char *id)
{
    bytes b = {NULL, 0};
    char key[512];
    for (int k = 0; k < 8; k++) {
        key_of(key, sizeof key, prefix, id, k);
        redisReply *r = on_key(key, "DUMP %s", key);
        bytes_reply(&b, r);
        freeReplyObject(r);
        r = on_key(key, "PEXPIRETIME %s", key);
        bytes_reply(&b, r);
        freeReplyObject(r);
    }
    index_key_of(key, sizeof key, prefix, id);
    redisReply *r = on_key(key, "ZSCORE %s %s", key, id);
    bytes_reply(&b, r);
    freeReplyObject(r);
    snprintf(key, sizeof key, "%s:store", prefix);
    r = on_key(key, "DUMP %s", key);
    bytes_reply(&b, r);
    freeReplyObject(r);
    return b;
}

static void same_snapshot(const bytes *a, const char *prefix, const char *id, const char *what)
{
    bytes now = snapshot(prefix, id);
    ck_assert_msg(now.len == a->len && memcmp(now.p, a->p, a->len) == 0,
                  "%s: thread %s changed", what, id);
    free(now.p);
}

static convo_store *open_store(const char *name, const char *more, char *prefix, size_t size)
{
    char url[1024];
    snprintf(prefix, size, "%s-%s", base_prefix, name);
    snprintf(url, sizeof url, "%s%sprefix=%s%s%s", base_url, strchr(base_url, '?') ? "&" : "?",
             prefix, more ? "&" : "", more ? more : "");
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    ck_assert_msg(rc == 0, "open %s: %d %s", url, rc, err.message);
    return s;
}

static const char *const msgs[] = {"{\"role\":\"user\",\"content\":\"one\"}",
                                   "{\"role\":\"assistant\",\"content\":\"two\"}"};

/* A checkpoint with one channel value, and (n > 0) n messages appended at
 * seq `expected` in the same put. */
static int put(convo_store *s, const char *id, const char *ns, const char *cp_id, size_t n,
               int64_t expected, convo_error *err)
{
    convo_blob v = {"json", "7", 1};
    convo_channel_in ch[] = {{"c", "1", &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = id;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = cp_id;
    cp.channels = ch;
    cp.nchannels = 1;
    cp.messages = msgs;
    cp.nmessages = n;
    cp.expected_length = expected;
    cp.log_length = n ? expected + (int64_t)n : 0;
    return convo_checkpoint_put(s, &cp, err);
}

static void put_ok(convo_store *s, const char *id, const char *ns, const char *cp_id)
{
    convo_error err;
    int rc = put(s, id, ns, cp_id, 0, 0, &err);
    ck_assert_msg(rc == 0, "put %s %s: %d %s", id, cp_id, rc, err.message);
}

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

static void delete_ok(convo_store *s, const char *id)
{
    convo_error err;
    int rc = convo_thread_delete(s, id, &err);
    ck_assert_msg(rc == 0, "delete %s: %d %s", id, rc, err.message);
}

static void drop_store_key(const char *prefix)
{
    char key[512];
    snprintf(key, sizeof key, "%s:store", prefix);
    freeReplyObject(on_key(key, "DEL %s", key));
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

/* The number of "l" members (checkpoints indexed by log length) of a thread. */
static long long loglen_members(const char *prefix, const char *id)
{
    char key[512];
    key_of(key, sizeof key, prefix, id, 5);
    redisReply *r = on_key(key, "ZLEXCOUNT %s %b %b", key, "[l\0", (size_t)3, "(l\1", (size_t)3);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

static int64_t generation_of(convo_store *s, const char *id)
{
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, id, NULL, &h, &err);
    ck_assert_msg(rc == 0, "load %s: %d %s", id, rc, err.message);
    int64_t g = convo_history_generation(h);
    convo_history_free(h);
    return g;
}

static int rewrite(convo_store *s, const char *id, int64_t keep, int drop, convo_error *err)
{
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = drop;
    convo_rewrite_result r;
    return convo_replace_tail(s, id, keep, msgs, NULL, 1, &o, &r, err);
}

/* A checkpoint whose channel c is at version v with value `value`. */
static void put_value(convo_store *s, const char *id, const char *cp_id, const char *v,
                      const char *value, int64_t log_length)
{
    convo_blob b = {"json", value, strlen(value)};
    convo_channel_in ch[] = {{"c", v, &b}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = id;
    cp.checkpoint_id = cp_id;
    cp.channels = ch;
    cp.nchannels = 1;
    cp.log_length = log_length;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    ck_assert_msg(rc == 0, "put %s: %d %s", cp_id, rc, err.message);
    convo_write_in w = {0, "c", {"json", "1", 1}};
    rc = convo_checkpoint_put_writes(s, id, "", cp_id, "task", "", &w, 1, &err);
    ck_assert_msg(rc == 0, "put_writes %s: %d %s", cp_id, rc, err.message);
}

static int hexists(const char *prefix, const char *id, int kind, const char *field, size_t len)
{
    char key[512];
    key_of(key, sizeof key, prefix, id, kind);
    redisReply *r = on_key(key, "HEXISTS %s %b", key, field, len);
    int n = (int)r->integer;
    freeReplyObject(r);
    return n;
}

/* ------------------------------------------------------------ tests */

START_TEST(test_put_log_conflict_writes_nothing)
{
    char prefix[256];
    convo_store *s = open_store("conflict", "ttl=3600", prefix, sizeof prefix);
    convo_error err;
    const char *t = "t";
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(put(s, t, "", "c1", 1, 2, &err), 0); /* length 3 now */
    /* another store, opened before the snapshot: the first open that finds
     * threads records the layout in P:store */
    char other[256];
    convo_store *s2 = open_store("conflict", "ttl=3600", other, sizeof other);
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

START_TEST(test_old_layout)
{
    char prefix[256], list[512], meta_a[512], meta_b[512], store_key[512];
    convo_store *s = open_store("old", NULL, prefix, sizeof prefix);
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
    s = open_store("old", NULL, prefix, sizeof prefix);
    assert_hget(meta_a, "v", "4");
    assert_hget(meta_b, "v", "4");
    assert_hget(store_key, "v", cluster ? "4" : "7");
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
    convo_store *s = open_store("two", NULL, prefix, sizeof prefix);
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

    s = open_store("two", NULL, prefix, sizeof prefix);
    assert_hget(meta, "v", "4");
    assert_hget(store_key, "v", cluster ? "4" : "7");
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
    convo_store *s = open_store("cpy", NULL, prefix, sizeof prefix);
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
    convo_store *s = open_store("bad", NULL, prefix, sizeof prefix);
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
    s = open_store("bad", NULL, prefix, sizeof prefix);
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

/* A rewrite refused (checkpoint, length, generation, keep) leaves every key as
 * it was; one that runs sets one deadline on every key. */
START_TEST(test_rewrite_conflict_writes_nothing)
{
    char prefix[256];
    convo_store *s = open_store("rw", "ttl=3600", prefix, sizeof prefix);
    const char *t = "rw";
    convo_error err;
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(put(s, t, "", "c1", 1, 2, &err), 0); /* length 3, log_length 3 */
    bytes before = snapshot(prefix, t);
    ck_assert_int_eq(rewrite(s, t, 1, 0, &err), CONVO_ECONFLICT);
    same_snapshot(&before, prefix, t, "rewrite refused by a checkpoint");
    ck_assert_int_eq(rewrite(s, t, 4, 1, &err), CONVO_EINVAL);
    same_snapshot(&before, prefix, t, "rewrite past the end");
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.expected_generation = 1;
    o.drop_checkpoints = 1;
    convo_rewrite_result res;
    ck_assert_int_eq(convo_replace_tail(s, t, 1, NULL, NULL, 0, &o, &res, &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "3 messages at generation 0"));
    same_snapshot(&before, prefix, t, "rewrite at another generation");
    o.expected_generation = 0;
    o.expected_length = 2;
    ck_assert_int_eq(convo_replace_tail(s, t, 1, NULL, NULL, 0, &o, &res, &err), CONVO_ECONFLICT);
    same_snapshot(&before, prefix, t, "rewrite at another length");
    /* the idempotency hash, checkpoints and all: one deadline, renewed */
    char key[512];
    for (int k = 0; k < 8; k++) {
        key_of(key, sizeof key, prefix, t, k);
        freeReplyObject(on_key(key, "PEXPIRE %s 100000", key));
    }
    o.expected_length = 3;
    o.idempotency_key = "k";
    ck_assert_int_eq(convo_replace_tail(s, t, 1, msgs, NULL, 1, &o, &res, &err), 0);
    ck_assert_int_eq(res.removed, 2);
    ck_assert_int_eq(res.generation, 1);
    long long at = -1;
    for (int k = 0; k < 8; k++) {
        key_of(key, sizeof key, prefix, t, k);
        redisReply *r = on_key(key, "PEXPIRETIME %s", key);
        if (r->integer != -2) { /* keys emptied by the drop are gone */
            ck_assert_int_gt(r->integer, 0);
            ck_assert_msg(at < 0 || at == r->integer, "two deadlines: %lld, %lld", at,
                          r->integer);
            at = r->integer;
        }
        freeReplyObject(r);
        r = on_key(key, "PTTL %s", key);
        ck_assert(r->integer == -2 || r->integer > 3590 * 1000LL);
        freeReplyObject(r);
    }
    free(before.p);
    delete_ok(s, t);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

/* Dropping checkpoints removes the values only they listed: a version put
 * again afterwards (LangGraph.js numbers versions 1, 2, 3...) stores its new
 * value instead of finding the dropped one (values are written once). */
START_TEST(test_rewrite_drop_values)
{
    char prefix[256];
    convo_store *s = open_store("vals", NULL, prefix, sizeof prefix);
    const char *t = "vals";
    convo_error err;
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    put_value(s, t, "a", "1", "\"one\"", 1);
    put_value(s, t, "b", "1", "\"one\"", 2); /* shares version 1 with a */
    put_value(s, t, "c", "2", "\"two\"", 2);
    put_value(s, t, "d", "2", "\"two\"", 2);
    ck_assert_int_eq(rewrite(s, t, 1, 1, &err), 0); /* drops b, c, d */
    ck_assert_int_eq(hexists(prefix, t, 4, "\0a", 2), 1);
    ck_assert_int_eq(hexists(prefix, t, 4, "\0b", 2), 0);
    ck_assert_int_eq(hexists(prefix, t, 6, "\0c\0" "1", 4), 1);
    ck_assert_int_eq(hexists(prefix, t, 6, "\0c\0" "2", 4), 0);
    ck_assert_int_eq(hexists(prefix, t, 7, "\0b\0task\0" "0", 9), 0);
    ck_assert_int_eq(hexists(prefix, t, 7, "\0a\0task\0" "0", 9), 1);
    ck_assert_int_eq(loglen_members(prefix, t), 1);
    put_value(s, t, "e", "2", "\"TWO\"", 2);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, t, "", "e", &cp, &err), 0);
    const char *version;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &version, &v), "c");
    ck_assert_msg(v.type && v.len == 5 && memcmp(v.bytes, "\"TWO\"", 5) == 0, "value %.*s",
                  (int)v.len, (const char *)v.bytes);
    convo_checkpoint_free(cp);
    delete_ok(s, t);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

/* A fork racing rewrites: the source's messages and generation are read in
 * one snapshot, so every fork holds the messages of exactly the generation it
 * got (here each rewrite writes its generation into its messages), never a
 * mix. On a cluster source and copies live in other slots (two steps). */
typedef struct fork_race {
    convo_store *s;
    const char *src;
    int rounds;
    volatile int done;
} fork_race;

static void *rewriter(void *arg)
{
    fork_race *f = arg;
    for (int g = 1; g <= f->rounds; g++) {
        char m[3][64];
        const char *mp[3];
        for (int i = 0; i < 3; i++) {
            snprintf(m[i], sizeof m[i], "{\"role\":\"assistant\",\"content\":\"g%d\"}", g);
            mp[i] = m[i];
        }
        convo_error err;
        int rc = convo_replace_tail(f->s, f->src, 1, mp, NULL, 3, NULL, NULL, &err);
        ck_assert_msg(rc == 0, "rewrite: %d %s", rc, err.message);
    }
    f->done = 1;
    return NULL;
}

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
    convo_store *s = open_store("refs", NULL, prefix, sizeof prefix);
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
    convo_store *s = open_store("refs-conflict", "ttl=3600", prefix, sizeof prefix);
    convo_error err;
    put_input(s, "t");
    convo_store *s2 = open_store("refs-conflict", "ttl=3600", other, sizeof other);
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
    convo_store *s = open_store("refs-corrupt", NULL, prefix, sizeof prefix);
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

START_TEST(test_fork_races_rewrites)
{
    char prefix[256];
    convo_store *s = open_store("fork", NULL, prefix, sizeof prefix);
    convo_store *s2 = open_store("fork", NULL, prefix, sizeof prefix);
    const char *first[] = {"{\"role\":\"user\",\"content\":\"q\"}",
                           "{\"role\":\"assistant\",\"content\":\"g0\"}",
                           "{\"role\":\"assistant\",\"content\":\"g0\"}",
                           "{\"role\":\"assistant\",\"content\":\"g0\"}"};
    convo_error err;
    ck_assert_int_eq(convo_append(s, "fork-src", first, NULL, 4, NULL, NULL, &err), 0);
    fork_race f = {s2, "fork-src", 150, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, rewriter, &f), 0);
    int forks = 0, generations_seen = 0, joined = 0;
    int64_t last = -1;
    for (;;) {
        if (f.done && forks >= 10 && !joined) { /* one more after the last rewrite */
            pthread_join(th, NULL);
            joined = 1;
        } else if (joined) {
            break;
        }
        char dst[32];
        snprintf(dst, sizeof dst, "fork-dst-%d", forks++);
        ck_assert_int_eq(convo_thread_fork(s, "fork-src", dst, -1, &err), 0);
        convo_history *h;
        ck_assert_int_eq(convo_load(s, dst, NULL, &h, &err), 0);
        int64_t g = convo_history_generation(h);
        char want[64];
        snprintf(want, sizeof want, "{\"role\":\"assistant\",\"content\":\"g%lld\"}", (long long)g);
        ck_assert_uint_eq(convo_history_count(h), 4);
        for (size_t i = 1; i < 4; i++) {
            size_t len;
            const char *got = convo_history_message(h, i, &len);
            ck_assert_msg(len == strlen(want) && memcmp(got, want, len) == 0,
                          "fork %s at generation %lld holds %.*s", dst, (long long)g, (int)len,
                          got);
        }
        generations_seen += g != last;
        last = g;
        convo_history_free(h);
        ck_assert_int_eq(convo_thread_delete(s, dst, NULL), 0);
    }
    ck_assert_int_eq(last, 150);
    ck_assert_msg(generations_seen > 2, "only %d generations seen in %d forks", generations_seen,
                  forks);
    delete_ok(s, "fork-src");
    drop_store_key(prefix);
    convo_close(s2);
    convo_close(s);
}
END_TEST

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What regenerating the last answer (keep length - 1, one message) costs
 * against a one-message append, each the median of 1,000 taken in turns (a
 * shared machine's load changes all the time), on a thread without
 * checkpoints and on one with 2,000 (a rewrite reads only those past keep).
 * Prints the ratios; fails above 3. */
static double rewrite_cost(convo_store *s, const char *t, const char *a, int64_t keep,
                           double *append_us, double *rewrite_us)
{
    enum { N = 1000 };
    static double ta[N], tr[N];
    convo_rewrite_result res;
    convo_error err;
    for (int i = 0; i < 2 * N; i++) { /* either first in turn: what comes after a
                                          * script waits on its after-work */
        double t0 = seconds_now();
        if (i % 2 == i / N) {
            ck_assert_int_eq(convo_append(s, a, &msgs[1], NULL, 1, NULL, NULL, &err), 0);
            ta[i / 2] = seconds_now() - t0;
        } else {
            int rc = convo_replace_tail(s, t, keep, &msgs[1], NULL, 1, NULL, &res, &err);
            ck_assert_msg(rc == 0, "rewrite: %d %s", rc, err.message);
            tr[i / 2] = seconds_now() - t0;
        }
    }
    qsort(ta, N, sizeof ta[0], by_value);
    qsort(tr, N, sizeof tr[0], by_value);
    *append_us = ta[N / 2] * 1e6;
    *rewrite_us = tr[N / 2] * 1e6;
    return tr[N / 2] / ta[N / 2];
}

START_TEST(test_rewrite_cost)
{
    char prefix[256];
    convo_store *s = open_store("cost", NULL, prefix, sizeof prefix);
    const char *t = "cost-rw", *a = "cost-app";
    convo_error err;
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_append(s, a, msgs, NULL, 1, NULL, NULL, &err), 0);
    double au, ru, plain = rewrite_cost(s, t, a, 9, &au, &ru);
    printf("redis-layout (%s): a rewrite of the last answer costs %.2f appends (medians %.1f us "
           "and %.1f us)", cluster ? "cluster" : "server", plain, ru, au);
    for (int i = 0; i < 2000; i++) {
        char id[32];
        snprintf(id, sizeof id, "cp-%04d", i);
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = t;
        cp.checkpoint_id = id;
        cp.log_length = i % 10;
        ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), 0);
    }
    double with = rewrite_cost(s, t, a, 9, &au, &ru);
    printf(", %.2f with 2,000 checkpoints (%.1f us and %.1f us)\n", with, ru, au);
    ck_assert_int_eq(generation_of(s, t), 2000);
    ck_assert_msg(plain < 3 && with < 3, "a rewrite costs %.2f / %.2f appends", plain, with);
    delete_ok(s, t);
    delete_ok(s, a);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s URL PREFIX\n", argv[0]);
        return 2;
    }
    base_url = argv[1];
    base_prefix = argv[2];
    cluster = strncmp(base_url, "redis+cluster://", 16) == 0;
    Suite *su = suite_create("redis-layout");
    TCase *tc = tcase_create(cluster ? "cluster" : "server");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, connect_nodes, disconnect_nodes);
    tcase_add_test(tc, test_put_log_conflict_writes_nothing);
    tcase_add_test(tc, test_old_layout);
    tcase_add_test(tc, test_layout2_migrated);
    tcase_add_test(tc, test_copy_old_layout_source);
    tcase_add_test(tc, test_layout2_corrupt_record);
    tcase_add_test(tc, test_rewrite_conflict_writes_nothing);
    tcase_add_test(tc, test_rewrite_drop_values);
    tcase_add_test(tc, test_fork_races_rewrites);
    tcase_add_test(tc, test_refs_swapped_in_the_put);
    tcase_add_test(tc, test_refs_conflict_writes_nothing);
    tcase_add_test(tc, test_refs_undecodable_record_left_alone);
    tcase_add_test(tc, test_rewrite_cost);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
