/* redis-index.c — the Redis driver's thread index (layout 4) seen by a plain
 * hiredis client, on one server or on a Redis Cluster: a filtered page reads
 * none of the threads that do not match (their keys are removed behind the
 * store's back, which a listing that read them would notice and clean), the
 * unfiltered one reads them (so the check can fail); expired (ttl) and
 * deleted threads are not listed and their entries go; entries that say
 * otherwise than their thread (a lost index write) are skipped and repaired;
 * a store of layout 3 is migrated on open (created_at / updated_at from its
 * first / last message) and keys declared later index the threads stored;
 * on a cluster an append moves its :r entries beside its script (the masters'
 * ZADDs counted) and falls back to the index write after it where it must.
 * Usage: tests/redis_index URL PREFIX (as tests/redis_layout); every key it
 * writes starts with PREFIX. */
#include "redis_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHARDS 16 /* the cluster's global sets (drivers/redis/ix.c) */

/* The sets of one declared value: by activity, creation and id. */
static const char *value_kinds(void)
{
    return "rci";
}

/* The set of a value a recent-order page starts from. */
static char recent_kind(void)
{
    return 'r';
}

/* P:store's v: 9 on a cluster, 8 on one server (tests/redis-window.c). */
static const char *store_layout(void)
{
    return cluster ? "9" : "8";
}

/* ------------------------------------------------------------ helpers */

/* The tag of shard i on a cluster: the smallest number of slot 1024 i + 512. */
static void shard_tag(int i, char *n, size_t size)
{
    for (unsigned k = 0;; k++) {
        snprintf(n, size, "%u", k);
        if ((crc16(n, strlen(n)) & 16383) == 1024u * (unsigned)i + 512u)
            return;
    }
}

/* The shard of thread id (layout 9): its slot's range of 1024 (the ids of
 * these tests are their own tags). */
static int shard_of(const char *id)
{
    return (int)(crc16(id, strlen(id)) & 16383) / 1024;
}

/* The keys of every thread's set of a kind ('r', 'c', 'i'): P:ix:r on one
 * server; on a cluster the 16 shards P:ix:{N}:s:r. Returns how many. */
static int global_keys(const char *prefix, char kind, char keys[SHARDS][512])
{
    if (!cluster) {
        snprintf(keys[0], sizeof keys[0], "%s:ix:%c", prefix, kind);
        return 1;
    }
    for (int i = 0; i < SHARDS; i++) {
        char n[16];
        shard_tag(i, n, sizeof n);
        snprintf(keys[i], sizeof keys[i], "%s:ix:{%s}:s:%c", prefix, n, kind);
    }
    return SHARDS;
}

/* Entries in every thread's set of kind. */
static long long global_count(const char *prefix, char kind)
{
    char keys[SHARDS][512];
    long long total = 0;
    for (int i = 0, n = global_keys(prefix, kind, keys); i < n; i++)
        total += int_on(keys[i], "ZCARD %s", keys[i]);
    return total;
}

/* Is id in every thread's set of kind? */
static int in_global(const char *prefix, char kind, const char *id)
{
    char keys[SHARDS][512];
    int found = 0;
    for (int i = 0, n = global_keys(prefix, kind, keys); i < n; i++) {
        redisReply *r = on_key(keys[i], "ZSCORE %s %s", keys[i], id);
        found |= r->type == REDIS_REPLY_STRING;
        freeReplyObject(r);
    }
    return found;
}

/* The key of the set of threads whose user_id is the string user, on a
 * cluster the one of thread id's shard (layout 9: P:ix:{N}:v:F V:kind). */
static void user_key(char *out, size_t size, const char *prefix, const char *user, char kind,
                     const char *id)
{
    char n[16];
    if (!cluster) {
        snprintf(out, size, "%s:ix:{\"user_id\"\"%s\"}:%c", prefix, user, kind);
        return;
    }
    shard_tag(shard_of(id), n, sizeof n);
    snprintf(out, size, "%s:ix:{%s}:v:\"user_id\"\"%s\":%c", prefix, n, user, kind);
}

/* Entries in the sets of threads whose user_id is user (all shards). */
static long long user_count(const char *prefix, const char *user, char kind)
{
    char key[512], id[16];
    long long total = 0;
    for (int i = 0; i < (cluster ? SHARDS : 1); i++) {
        for (int k = 0;; k++) { /* a thread id of shard i */
            snprintf(id, sizeof id, "%d", k);
            if (shard_of(id) == i)
                break;
        }
        user_key(key, sizeof key, prefix, user, kind, id);
        total += int_on(key, "ZCARD %s", key);
    }
    return total;
}

static void thread_key(char *out, size_t size, const char *prefix, const char *id,
                       const char *suffix)
{
    snprintf(out, size, "%s:{%s}:%s", prefix, id, suffix);
}

/* The ids of a page (limit 100), joined by spaces; *rows gets the page. */
static void list(convo_store *s, const char *where, int order, char *out, size_t size,
                 convo_thread_page **rows)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.order = order;
    o.limit = 1000;
    convo_thread_page *p;
    convo_error err;
    int rc = convo_thread_list_ex(s, &o, &p, &err);
    ck_assert_msg(rc == 0, "list %s: %d %s", where ? where : "", rc, err.message);
    out[0] = '\0';
    for (size_t i = 0; i < convo_thread_page_count(p); i++)
        snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? " " : "",
                 convo_thread_page_id(p, i));
    if (rows)
        *rows = p;
    else
        convo_thread_page_free(p);
}

/* ------------------------------------------------------------ tests */

/* A page of one user reads that user's threads only: the 300 others have lost
 * their keys (as if expired) and a listing that read one would remove its
 * entry; the filtered listing leaves all 300, the unfiltered one removes them. */
START_TEST(test_filtered_page_reads_only_matches)
{
    char prefix[256], out[8192], key[512];
    convo_store *s = open_store("used", NULL, user_keys, prefix, sizeof prefix);
    char id[64];
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof id, "o%d", i);
        char user[16];
        snprintf(user, sizeof user, "u%d", 2 + i % 30);
        user_thread(s, id, user);
    }
    user_thread(s, "a", "u1");
    user_thread(s, "b", "u1");
    user_thread(s, "c", "u1");
    ck_assert_int_eq(user_count(prefix, "u1", recent_kind()), 3);
    ck_assert_int_eq(global_count(prefix, 'r'), 303);
    for (int i = 0; i < 300; i++) { /* meta and extra, the only keys they have */
        snprintf(id, sizeof id, "o%d", i);
        thread_key(key, sizeof key, prefix, id, "meta");
        ck_assert_int_eq(int_on(key, "DEL %s", key), 1);
        thread_key(key, sizeof key, prefix, id, "extra");
        ck_assert_int_eq(int_on(key, "DEL %s", key), 1);
    }
    for (int order = CONVO_ORDER_RECENT; order <= CONVO_ORDER_ID; order++) {
        list(s, "{\"user_id\":\"u1\"}", order, out, sizeof out, NULL);
        ck_assert_str_eq(out, order == CONVO_ORDER_ID ? "a b c" : "c b a");
    }
    ck_assert_int_eq(global_count(prefix, 'r'), 303);
    ck_assert_int_eq(global_count(prefix, 'c'), 303);
    /* the control: a listing that reads them notices and removes their entries */
    list(s, NULL, CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "c b a");
    ck_assert_int_eq(global_count(prefix, 'r'), 3);
    ck_assert_int_eq(global_count(prefix, 'c'), 3);
    /* a filter on a key that is not declared is served by a scan: still right */
    list(s, "{\"user_id\":\"u1\",\"other\":null}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "");
    convo_close(s);
}
END_TEST

/* Expired threads are not listed, and their entries go when a listing passes. */
START_TEST(test_ttl_not_listed)
{
    char prefix[256], out[1024], key[512];
    convo_store *s = open_store("ttl", "ttl=2", user_keys, prefix, sizeof prefix);
    user_thread(s, "old", "u1");
    user_thread(s, "swept", "u3");
    usleep(1200 * 1000);
    user_thread(s, "new", "u1");
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "new old");
    usleep(1000 * 1000); /* old is past its 2 s; new has 1 s left for what follows */
    thread_key(key, sizeof key, prefix, "old", "meta");
    ck_assert_int_eq(int_on(key, "EXISTS %s", key), 0);
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "new");
    user_key(key, sizeof key, prefix, "u1", 'r', "old");
    redisReply *r = on_key(key, "ZSCORE %s old", key);
    ck_assert_int_eq(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    list(s, NULL, CONVO_ORDER_CREATED, out, sizeof out, NULL);
    ck_assert_str_eq(out, "new");
    ck_assert(!in_global(prefix, 'c', "old"));
    list(s, NULL, CONVO_ORDER_ID, out, sizeof out, NULL); /* P:threads, or the 'i' shards */
    ck_assert_str_eq(out, "new");
    if (!cluster) {
        snprintf(key, sizeof key, "%s:threads", prefix);
        redisReply *z = on_key(key, "ZSCORE %s old", key);
        ck_assert_int_eq(z->type, REDIS_REPLY_NIL);
        freeReplyObject(z);
    }
    /* no listing passed u3's entries: convo_sweep removes them */
    ck_assert_int_eq(user_count(prefix, "u3", 'c'), 1);
    uint64_t removed;
    convo_error err;
    /* new written again: 2 s more for the sweep (under ASan on a loaded machine
     * the lists and the sweep above took the last of its first 2 s) */
    user_thread(s, "new", "u1");
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0);
    ck_assert_int_eq(user_count(prefix, "u3", 'c'), 0);
    ck_assert(!in_global(prefix, 'r', "swept"));
    ck_assert(in_global(prefix, 'r', "new"));
    convo_close(s);
}
END_TEST

/* A deleted thread leaves no entry behind on one server (the delete script
 * removes them); on a cluster they go with the next listing that passes them. */
START_TEST(test_delete_removes_entries)
{
    char prefix[256], out[1024];
    convo_store *s = open_store("del", NULL, user_keys, prefix, sizeof prefix);
    user_thread(s, "gone", "u1");
    user_thread(s, "kept", "u1");
    convo_error err;
    ck_assert_int_eq(convo_thread_delete(s, "gone", &err), 0);
    if (!cluster) {
        ck_assert(!in_global(prefix, 'r', "gone"));
        ck_assert(!in_global(prefix, 'c', "gone"));
        for (const char *k = value_kinds(); *k; k++)
            ck_assert_int_eq(user_count(prefix, "u1", *k), 1);
    }
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "kept");
    ck_assert_int_eq(user_count(prefix, "u1", recent_kind()), 1);
    list(s, NULL, CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "kept");
    ck_assert(!in_global(prefix, 'r', "gone"));
    convo_close(s);
}
END_TEST

/* Entries that say otherwise than their thread (a cluster's index write lost
 * by a crash) are skipped and repaired: an old value's entry goes, a wrong
 * time is set right (on a cluster; one server writes them atomically). */
START_TEST(test_stale_entries_repaired)
{
    char prefix[256], out[1024], key[512], meta[512];
    convo_store *s = open_store("stale", NULL, user_keys, prefix, sizeof prefix);
    user_thread(s, "t", "u1");
    user_thread(s, "x", "u1");
    convo_error err;
    ck_assert_int_eq(convo_save_extra(s, "t", "{\"user_id\":\"u2\"}", &err), 0);
    /* the entries of the old value, as if never removed */
    for (const char *k = value_kinds(); *k; k++) {
        user_key(key, sizeof key, prefix, "u1", *k, "t");
        freeReplyObject(on_key(key, "ZADD %s %s t", key, *k == 'i' ? "0" : "1"));
    }
    for (int order = CONVO_ORDER_RECENT; order <= CONVO_ORDER_ID; order++) {
        list(s, "{\"user_id\":\"u1\"}", order, out, sizeof out, NULL);
        ck_assert_str_eq(out, "x");
    }
    for (const char *k = value_kinds(); *k; k++) {
        ck_assert_int_eq(user_count(prefix, "u1", *k), 1);
        ck_assert_int_eq(user_count(prefix, "u2", *k), 1);
    }
    list(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "t");
    if (cluster) { /* a write whose index update was lost: t's entry says 1 */
        user_key(key, sizeof key, prefix, "u2", 'r', "t");
        freeReplyObject(on_key(key, "ZADD %s 1 t", key));
        list(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
        ck_assert_str_eq(out, ""); /* not at its old place; set right for the next */
        list(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
        ck_assert_str_eq(out, "t");
        thread_key(meta, sizeof meta, prefix, "t", "meta");
        redisReply *u = on_key(meta, "HGET %s u", meta);
        redisReply *sc = on_key(key, "ZSCORE %s t", key);
        ck_assert_str_eq(sc->str, u->str);
        freeReplyObject(u);
        freeReplyObject(sc);
    }
    convo_close(s);
}
END_TEST

/* Down to layout 3 by hand: no c/u in meta, no index, P:store v 3 and no
 * declared keys. The open that declares user_id migrates every thread:
 * created_at / updated_at from the first / last message (now, for a thread
 * without messages), the index entries, v 4. */
static const char downgrade_lua[] =
    "redis.call('HDEL', KEYS[3], 'c', 'u')\n"
    "redis.call('HDEL', KEYS[4], 'c', 'u', 'p')\n" /* layout 8 on one server */
    "redis.call('HSET', KEYS[3], 'v', '3')\n"
    "return 1\n";

static void downgrade(const char *prefix, const char *id)
{
    static const char *const suffixes[] = {"msgs", "idem", "meta", "extra",
                                           "cp",   "cpidx", "blobs", "writes"};
    char k[8][512];
    for (int i = 0; i < 8; i++)
        thread_key(k[i], sizeof k[i], prefix, id, suffixes[i]);
    freeReplyObject(on_key(k[0], "EVAL %s 8 %s %s %s %s %s %s %s %s", downgrade_lua, k[0], k[1],
                           k[2], k[3], k[4], k[5], k[6], k[7]));
}

static void drop_index(const char *prefix)
{
    char keys[SHARDS][512], key[512];
    for (const char *kind = "rci"; *kind; kind++) {
        for (int i = 0, n = global_keys(prefix, *kind, keys); i < n; i++)
            freeReplyObject(on_key(keys[i], "DEL %s", keys[i]));
        for (const char *u = "12"; *u; u++) {
            char user[4] = {'u', *u, 0};
            for (const char *const *id = (const char *const[]){"talk", "quiet", "other", NULL};
                 *id; id++) {
                user_key(key, sizeof key, prefix, user, *kind, *id);
                freeReplyObject(on_key(key, "DEL %s", key));
            }
        }
    }
    snprintf(key, sizeof key, "%s:store", prefix);
    freeReplyObject(on_key(key, "HSET %s v 3", key));
    freeReplyObject(on_key(key, "HDEL %s ik", key));
}

START_TEST(test_layout3_migrated)
{
    char prefix[256], out[1024], meta[512];
    convo_store *s = open_store("mig", NULL, NULL, prefix, sizeof prefix);
    convo_error err;
    const char *two[] = {MSG, MSG};
    ck_assert_int_eq(convo_append(s, "talk", two, NULL, 2, NULL, NULL, &err), 0);
    usleep(3000);
    ck_assert_int_eq(convo_append(s, "talk", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "talk", "{\"user_id\":\"u1\"}", &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "quiet", "{\"user_id\":\"u1\"}", &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "other", "{\"user_id\":\"u2\"}", &err), 0);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "talk", NULL, &h, &err), 0);
    int64_t first = convo_history_created_at(h, 0);
    int64_t last = convo_history_created_at(h, 2);
    ck_assert(last > first);
    convo_history_free(h);
    convo_close(s);
    downgrade(prefix, "talk");
    downgrade(prefix, "quiet");
    downgrade(prefix, "other");
    drop_index(prefix);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t before = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;

    s = open_store("mig", NULL, user_keys, prefix, sizeof prefix);
    thread_key(meta, sizeof meta, prefix, "talk", "meta");
    redisReply *v = on_key(meta, "HGET %s v", meta);
    ck_assert_str_eq(v->str, "4");
    freeReplyObject(v);
    convo_thread_page *p;
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_ID, out, sizeof out, &p);
    ck_assert_str_eq(out, "quiet talk");
    ck_assert(convo_thread_page_created_at(p, 0) >= before); /* no message: the migration's */
    ck_assert_int_eq(convo_thread_page_created_at(p, 1), first);
    ck_assert_int_eq(convo_thread_page_updated_at(p, 1), last);
    ck_assert_int_eq(convo_thread_page_length(p, 1), 3);
    convo_thread_page_free(p);
    list(s, NULL, CONVO_ORDER_CREATED, out, sizeof out, NULL);
    ck_assert_str_eq(out, "quiet other talk");
    char key[512];
    snprintf(key, sizeof key, "%s:store", prefix);
    v = on_key(key, "HMGET %s v ik", key);
    ck_assert_str_eq(v->element[0]->str, store_layout());
    ck_assert_str_eq(v->element[1]->str, "[\"user_id\"]");
    freeReplyObject(v);
    /* a write after it: updated_at moves, created_at stays */
    ck_assert_int_eq(convo_append(s, "talk", &MSG, NULL, 1, NULL, NULL, &err), 0);
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, out, sizeof out, &p);
    ck_assert_str_eq(out, "talk quiet");
    ck_assert_int_eq(convo_thread_page_created_at(p, 0), first);
    ck_assert(convo_thread_page_updated_at(p, 0) > last);
    convo_thread_page_free(p);
    convo_close(s);
}
END_TEST

/* Keys declared for a store that has threads already: they are indexed by
 * the open that records the keys; another opener's other keys are refused. */
START_TEST(test_keys_declared_later)
{
    char prefix[256], out[1024];
    convo_store *s = open_store("later", NULL, NULL, prefix, sizeof prefix);
    user_thread(s, "a", "u1");
    user_thread(s, "b", "u2");
    ck_assert_int_eq(user_count(prefix, "u1", recent_kind()), 0);
    convo_close(s);
    s = open_store("later", NULL, user_keys, prefix, sizeof prefix);
    ck_assert_int_eq(user_count(prefix, "u1", recent_kind()), 1);
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "a");
    convo_close(s);
    const char *other[] = {"tenant", NULL};
    char url[1024];
    snprintf(url, sizeof url, "%s%sprefix=%s", base_url, strchr(base_url, '?') ? "&" : "?",
             prefix);
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = other;
    convo_store *t = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open_ex(&t, url, &so, &err), CONVO_EINVAL);
    ck_assert_msg(strstr(err.message, "user_id") != NULL, "%s", err.message);
    /* without a declaration: the recorded keys are kept up to date */
    s = open_store("later", NULL, NULL, prefix, sizeof prefix);
    user_thread(s, "c", "u1");
    ck_assert_int_eq(user_count(prefix, "u1", recent_kind()), 2);
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "c a");
    ck_assert_int_eq(user_count(prefix, "u1", recent_kind()), 2);
    convo_close(s);
}
END_TEST

/* A cluster store of layout 4 (its sets: shards by the id's hash, a value's
 * three sets by its own tag) made by hand from one of layout 9: the open
 * indexes every thread in the sets by slot range, removes layout 4's sets
 * and sets v 9; each thread is listed once, by value and by every order. */
START_TEST(test_layout4_cluster_migrated)
{
    char prefix[256], out[1024], key[512], n0[16];
    convo_store *s = open_store("l4", NULL, user_keys, prefix, sizeof prefix);
    const char *ids[] = {"a", "b", "c"}, *users[] = {"u1", "u1", "u2"};
    for (int i = 0; i < 3; i++) {
        user_thread(s, ids[i], users[i]);
        usleep(2000);
    }
    convo_close(s);
    char keys[SHARDS][512];
    for (const char *kind = "rci"; *kind; kind++)
        for (int i = 0, n = global_keys(prefix, *kind, keys); i < n; i++)
            freeReplyObject(on_key(keys[i], "DEL %s", keys[i]));
    shard_tag(0, n0, sizeof n0);
    for (int t = 0; t < 3; t++) {
        char meta[512];
        thread_key(meta, sizeof meta, prefix, ids[t], "meta");
        redisReply *m = on_key(meta, "HMGET %s c u", meta);
        const char *score[3] = {m->element[1]->str, m->element[0]->str, "0"};
        for (int k = 0; k < 3; k++) {
            user_key(key, sizeof key, prefix, users[t], "rci"[k], ids[t]);
            freeReplyObject(on_key(key, "DEL %s", key));
            snprintf(key, sizeof key, "%s:ix:{%s}:%c", prefix, n0, "rci"[k]);
            freeReplyObject(on_key(key, "ZADD %s %s %s", key, score[k], ids[t]));
            snprintf(key, sizeof key, "%s:ix:{\"user_id\"\"%s\"}:%c", prefix, users[t], "rci"[k]);
            freeReplyObject(on_key(key, "ZADD %s %s %s", key, score[k], ids[t]));
        }
        freeReplyObject(m);
    }
    snprintf(key, sizeof key, "%s:store", prefix);
    freeReplyObject(on_key(key, "HSET %s v 4", key));

    s = open_store("l4", NULL, NULL, prefix, sizeof prefix);
    redisReply *v = on_key(key, "HGET %s v", key);
    ck_assert_str_eq(v->str, "9");
    freeReplyObject(v);
    for (int k = 0; k < 3; k++) { /* layout 4's sets are gone */
        snprintf(key, sizeof key, "%s:ix:{%s}:%c", prefix, n0, "rci"[k]);
        ck_assert_int_eq(int_on(key, "EXISTS %s", key), 0);
        snprintf(key, sizeof key, "%s:ix:{\"user_id\"\"u1\"}:%c", prefix, "rci"[k]);
        ck_assert_int_eq(int_on(key, "EXISTS %s", key), 0);
    }
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
    ck_assert_str_eq(out, "b a");
    list(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_ID, out, sizeof out, NULL);
    ck_assert_str_eq(out, "c");
    list(s, NULL, CONVO_ORDER_CREATED, out, sizeof out, NULL);
    ck_assert_str_eq(out, "c b a");
    list(s, NULL, CONVO_ORDER_ID, out, sizeof out, NULL);
    ck_assert_str_eq(out, "a b c");
    ck_assert_int_eq(global_count(prefix, 'r'), 3);
    ck_assert_int_eq(user_count(prefix, "u1", 'c'), 2);
    convo_close(s);
}
END_TEST

/* A store of a newer layout than this libconvo's is refused on open, and
 * left as it is (its walk would write this version's sets over it). */
START_TEST(test_newer_layout_refused)
{
    char prefix[256], key[512], url[1024];
    convo_store *s = open_store("newer", NULL, user_keys, prefix, sizeof prefix);
    user_thread(s, "a", "u1");
    convo_close(s);
    snprintf(key, sizeof key, "%s:store", prefix);
    freeReplyObject(on_key(key, "HSET %s v 10", key));
    snprintf(url, sizeof url, "%s%sprefix=%s", base_url, strchr(base_url, '?') ? "&" : "?",
             prefix);
    convo_error err;
    ck_assert_int_eq(convo_open(&s, url, &err), CONVO_ENOTSUP);
    ck_assert_msg(strstr(err.message, "layout is 10") != NULL, "%s", err.message);
    redisReply *v = on_key(key, "HGET %s v", key);
    ck_assert_str_eq(v->str, "10");
    freeReplyObject(v);
}
END_TEST

/* ---- the cluster's appends: the :r entries beside the script ---- */

/* The score of id in the :r shard that holds it, as text ("" when none). */
static void global_r_score(const char *prefix, const char *id, char *out, size_t size)
{
    char keys[SHARDS][512];
    out[0] = '\0';
    for (int i = 0, n = global_keys(prefix, 'r', keys); i < n; i++) {
        redisReply *r = on_key(keys[i], "ZSCORE %s %s", keys[i], id);
        if (r->type == REDIS_REPLY_STRING)
            snprintf(out, size, "%s", r->str);
        freeReplyObject(r);
    }
}

/* Thread id's entries in its shard's and its user's :r sets hold meta's u. */
static void ck_r_entries(const char *prefix, const char *id, const char *user)
{
    char meta[512], key[512], g[64];
    thread_key(meta, sizeof meta, prefix, id, "meta");
    redisReply *u = on_key(meta, "HGET %s u", meta);
    ck_assert_int_eq(u->type, REDIS_REPLY_STRING);
    global_r_score(prefix, id, g, sizeof g);
    ck_assert_str_eq(g, u->str);
    user_key(key, sizeof key, prefix, user, 'r', id);
    redisReply *v = on_key(key, "ZSCORE %s %s", key, id);
    ck_assert_msg(v->type == REDIS_REPLY_STRING, "%s not in %s", id, key);
    ck_assert_str_eq(v->str, u->str);
    freeReplyObject(u);
    freeReplyObject(v);
}

/* Calls of command (lower case) run by the cluster's masters since the last
 * reset (a replica's count follows its master's when replication gets there). */
static long long master_calls(const char *command)
{
    char field[64];
    snprintf(field, sizeof field, "cmdstat_%s:calls=", command);
    long long total = 0;
    for (int i = 0; i < nnodes; i++) {
        redisReply *role = redisCommand(nodes[i], "ROLE");
        ck_assert_msg(role && role->type == REDIS_REPLY_ARRAY && role->elements > 0, "ROLE");
        int master = strcmp(role->element[0]->str, "master") == 0;
        freeReplyObject(role);
        if (!master)
            continue;
        redisReply *r = redisCommand(nodes[i], "INFO commandstats");
        ck_assert_msg(r && r->type == REDIS_REPLY_STRING, "INFO commandstats");
        const char *p = strstr(r->str, field);
        if (p)
            total += atoll(p + strlen(field));
        freeReplyObject(r);
    }
    return total;
}

static void reset_stats(void)
{
    for (int i = 0; i < nnodes; i++)
        freeReplyObject(redisCommand(nodes[i], "CONFIG RESETSTAT"));
}

/* A common append of a thread the store wrote lately moves its two :r entries
 * beside its script (2 ZADDs: its shard's, its user's), where ?index_beside=0
 * writes all six after it; both leave the entries at meta's u. */
START_TEST(test_append_entries_beside)
{
    char prefix[256];
    convo_error err;
    for (int beside = 1; beside >= 0; beside--) {
        convo_store *s = open_store(beside ? "beside" : "after", beside ? NULL : "index_beside=0",
                                    user_keys, prefix, sizeof prefix);
        user_thread(s, "t", "u1");
        long long before = (reset_stats(), master_calls("zadd"));
        for (int i = 0; i < 10; i++)
            ck_assert_int_eq(convo_append(s, "t", &MSG, NULL, 1, NULL, NULL, &err), 0);
        long long calls = master_calls("zadd") - before;
        ck_assert_int_eq(calls, beside ? 10 * 2 : 10 * 6);
        ck_r_entries(prefix, "t", "u1");
        convo_close(s);
    }
}
END_TEST

/* A chat app appends to many threads in turn: each append of 300 threads
 * written round-robin still moves its entries beside its script (2 ZADDs),
 * the store remembering every one's keys (a table of 1,024 usable slots by
 * the id hash's low bits made about a quarter of them fall back each time). */
START_TEST(test_append_beside_many_threads)
{
    char prefix[256], id[32];
    convo_error err;
    convo_store *s = open_store("many", NULL, user_keys, prefix, sizeof prefix);
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof id, "chat-%d", i);
        user_thread(s, id, i % 2 ? "u1" : "u2");
    }
    long long before = (reset_stats(), master_calls("zadd"));
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof id, "chat-%d", i);
        ck_assert_int_eq(convo_append(s, id, &MSG, NULL, 1, NULL, NULL, &err), 0);
    }
    ck_assert_int_eq(master_calls("zadd") - before, 300 * 2);
    ck_r_entries(prefix, "chat-299", "u1");
    convo_close(s);
}
END_TEST

/* The first append of a thread the store made without messages (save_extra)
 * runs one script, the one that may create, not the common one first (which
 * would answer CONVO_CREATE); the next one runs the common one alone. */
START_TEST(test_first_append_one_script)
{
    char prefix[256];
    convo_error err;
    convo_store *s = open_store("first", NULL, user_keys, prefix, sizeof prefix);
    ck_assert_int_eq(convo_save_extra(s, "t", "{\"user_id\":\"u1\"}", &err), 0);
    for (int i = 0; i < 2; i++) {
        long long before = (reset_stats(), master_calls("evalsha"));
        ck_assert_int_eq(convo_append(s, "t", &MSG, NULL, 1, NULL, NULL, &err), 0);
        ck_assert_int_eq(master_calls("evalsha") - before, 1);
        ck_r_entries(prefix, "t", "u1");
    }
    convo_close(s);
}
END_TEST

/* What the entries moved beside cannot do is done after, in the same call: an
 * entry missing (ZADD XX adds nothing) is written again; a value another store
 * changed (this one remembers the old) gets its entry at u; an append refused
 * (a conflict: nothing written) sets back the entries it moved. */
START_TEST(test_append_beside_falls_back)
{
    char prefix[256], keys[SHARDS][512];
    convo_error err;
    convo_store *s = open_store("fallback", NULL, user_keys, prefix, sizeof prefix);
    user_thread(s, "t", "u1");
    ck_assert_int_eq(convo_append(s, "t", &MSG, NULL, 1, NULL, NULL, &err), 0);
    for (int i = 0, n = global_keys(prefix, 'r', keys); i < n; i++)
        freeReplyObject(on_key(keys[i], "ZREM %s t", keys[i]));
    ck_assert(!in_global(prefix, 'r', "t"));
    ck_assert_int_eq(convo_append(s, "t", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_r_entries(prefix, "t", "u1");

    convo_store *other = open_store("fallback", NULL, user_keys, prefix, sizeof prefix);
    ck_assert_int_eq(convo_save_extra(other, "t", "{\"user_id\":\"u2\"}", &err), 0);
    usleep(2000); /* the append's time differs from the save_extra's */
    ck_assert_int_eq(convo_append(s, "t", &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_r_entries(prefix, "t", "u2");
    convo_close(other);

    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.expected_length = 999;
    usleep(2000);
    ck_assert_int_eq(convo_append(s, "t", &MSG, NULL, 1, &o, NULL, &err), CONVO_ECONFLICT);
    ck_r_entries(prefix, "t", "u2");
    convo_close(s);
}
END_TEST

/* ---- a page over the shards: k / 16 + 3 of each, what is complete kept ---- */

static int by_text(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* One user's newest 12 threads all in shard 0, 12 older ones elsewhere: a
 * page of 10 reads 4 of each shard (k = 11), so shard 0's 4th is the cut and
 * the batches go on from it; every page is the exact order, in each order
 * (without the cut the first page would take shard 0's 4
 * and 6 older threads of other shards). */
START_TEST(test_shard_cut_pages)
{
    char prefix[256], id[32], want[4][2048] = {{0}};
    const char *order_names[] = {"recent", "created", "id"};
    convo_store *s = open_store("cut", NULL, user_keys, prefix, sizeof prefix);
    char ids[24][32];
    int n = 0;
    for (int k = 0; n < 12; k++) { /* older, not in shard 0 */
        snprintf(id, sizeof id, "o%d", k);
        if (shard_of(id) != 0)
            snprintf(ids[n++], sizeof ids[0], "%s", id);
    }
    for (int k = 0; n < 24; k++) { /* newer, all in shard 0 */
        snprintf(id, sizeof id, "n%d", k);
        if (shard_of(id) == 0)
            snprintf(ids[n++], sizeof ids[0], "%s", id);
    }
    for (int i = 0; i < 24; i++) {
        user_thread(s, ids[i], "u1");
        usleep(1000);
    }
    for (int i = 23; i >= 0; i--) /* recent and created: newest first */
        snprintf(want[0] + strlen(want[0]), sizeof want[0] - strlen(want[0]), "%s%s",
                 i < 23 ? " " : "", ids[i]);
    memcpy(want[1], want[0], sizeof want[0]);
    char sorted[24][32];
    memcpy(sorted, ids, sizeof sorted);
    qsort(sorted, 24, sizeof sorted[0], by_text);
    for (int i = 0; i < 24; i++)
        snprintf(want[2] + strlen(want[2]), sizeof want[2] - strlen(want[2]), "%s%s",
                 i ? " " : "", sorted[i]);
    for (int order = CONVO_ORDER_RECENT; order <= CONVO_ORDER_ID; order++) {
        char got[2048] = "", cursor[512] = "";
        for (int pages = 0; pages < 5; pages++) {
            convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
            o.where_json = "{\"user_id\":\"u1\"}";
            o.order = order;
            o.limit = 10;
            o.after = cursor[0] ? cursor : NULL;
            convo_thread_page *p;
            convo_error err;
            ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
            size_t rows = convo_thread_page_count(p);
            for (size_t i = 0; i < rows; i++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", got[0] ? " " : "",
                         convo_thread_page_id(p, i));
            snprintf(cursor, sizeof cursor, "%s", rows ? convo_thread_page_cursor(p, rows - 1) : "");
            convo_thread_page_free(p);
            if (rows < 10)
                break;
        }
        ck_assert_msg(strcmp(got, want[order - CONVO_ORDER_RECENT]) == 0, "%s: %s, not %s",
                      order_names[order - CONVO_ORDER_RECENT], got,
                      want[order - CONVO_ORDER_RECENT]);
    }
    convo_close(s);
}
END_TEST

/* ---- the cluster's page read again: one round trip (its guess) ---- */

/* Read events of the masters so far, and how many masters. */
static long long master_reads(int *masters)
{
    long long total = 0;
    *masters = 0;
    for (int i = 0; i < nnodes; i++) {
        redisReply *role = redisCommand(nodes[i], "ROLE");
        ck_assert_msg(role && role->type == REDIS_REPLY_ARRAY && role->elements > 0, "ROLE");
        int master = strcmp(role->element[0]->str, "master") == 0;
        freeReplyObject(role);
        if (!master)
            continue;
        redisReply *r = redisCommand(nodes[i], "INFO stats");
        ck_assert_msg(r && r->type == REDIS_REPLY_STRING, "INFO stats");
        const char *p = strstr(r->str, "total_reads_processed:");
        ck_assert(p != NULL);
        total += atoll(p + strlen("total_reads_processed:"));
        ++*masters;
        freeReplyObject(r);
    }
    return total;
}

/* The fewest read events of the masters a page of user u1 took over 5 tries
 * of 10 pages (other clients only add reads; so do our ROLE and INFO). */
static double master_reads_per_page(convo_store *s, int *masters)
{
    double best = 1e9;
    char out[4096];
    for (int t = 0; t < 5; t++) {
        long long r0 = master_reads(masters);
        for (int i = 0; i < 10; i++)
            list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, out, sizeof out, NULL);
        double per = (double)(master_reads(masters) - r0 - 2 * *masters) / 10; /* ROLE, INFO */
        best = per < best ? per : best;
    }
    return best;
}

/* A page read again reads its rows in the candidates' round trip (the value's
 * 16 shards over the masters: one read event each at most), where a store
 * with ?page_guess=0 takes two; and its pages are that store's whatever
 * changed between them: a thread moved in, one deleted, one given to another
 * user, one written. */
START_TEST(test_page_guess_cluster)
{
    char prefix[256], a[4096], b[4096], id[32];
    convo_error err;
    convo_store *s = open_store("guess", NULL, user_keys, prefix, sizeof prefix);
    convo_store *plain = open_store("guess", "page_guess=0", user_keys, prefix, sizeof prefix);
    for (int i = 0; i < 24; i++) {
        snprintf(id, sizeof id, "g%02d", i);
        user_thread(s, id, i % 4 ? "u1" : "u2");
    }
    list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, a, sizeof a, NULL);
    int masters;
    double guessed = master_reads_per_page(s, &masters);
    double unguessed = master_reads_per_page(plain, &masters);
    ck_assert_msg(guessed <= masters, "%.1f read events a page on %d masters", guessed, masters);
    ck_assert_msg(unguessed > guessed + 1, "%.1f without the guess, %.1f with", unguessed,
                  guessed);
    user_thread(s, "g-new", "u1");
    ck_assert_int_eq(convo_thread_delete(plain, "g01", &err), 0);
    ck_assert_int_eq(convo_save_extra(plain, "g02", "{\"user_id\":\"u2\"}", &err), 0);
    ck_assert_int_eq(convo_append(plain, "g03", &MSG, NULL, 1, NULL, NULL, &err), 0);
    for (int i = 0; i < 2; i++) {
        list(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, a, sizeof a, NULL);
        list(plain, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, b, sizeof b, NULL);
        ck_assert_str_eq(a, b);
    }
    ck_assert(strncmp(a, "g03 g-new ", 10) == 0);
    ck_assert(strstr(a, "g01") == NULL && strstr(a, "g02") == NULL);
    convo_close(plain);
    convo_close(s);
}
END_TEST

int main(int argc, char **argv)
{
    int status = redis_test_args(argc, argv, "redis-index", NULL);
    if (status >= 0)
        return status;
    Suite *su = suite_create("redis-index");
    TCase *tc = tcase_create(cluster ? "cluster" : "server");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, connect_nodes, disconnect_nodes);
    tcase_add_test(tc, test_filtered_page_reads_only_matches);
    tcase_add_test(tc, test_ttl_not_listed);
    tcase_add_test(tc, test_delete_removes_entries);
    tcase_add_test(tc, test_stale_entries_repaired);
    tcase_add_test(tc, test_layout3_migrated);
    tcase_add_test(tc, test_keys_declared_later);
    tcase_add_test(tc, test_newer_layout_refused);
    if (cluster) {
        tcase_add_test(tc, test_append_entries_beside);
        tcase_add_test(tc, test_append_beside_falls_back);
        tcase_add_test(tc, test_append_beside_many_threads);
        tcase_add_test(tc, test_layout4_cluster_migrated);
        tcase_add_test(tc, test_page_guess_cluster);
        tcase_add_test(tc, test_shard_cut_pages);
        tcase_add_test(tc, test_first_append_one_script);
    }
    suite_add_tcase(su, tc);
    return redis_test_run(su);
}
