/* dump.c — tests of convo_export / convo_import / convo_copy: `tests/dump URL...`
 * copies a populated set of threads along the chain of stores given and checks
 * that every message (bytes, seq, role, created_at), extra object, checkpoint,
 * channel value and pending write arrives identical; truncated and corrupted
 * dumps leave each thread whole or absent; a large copy stays in bounded memory. */
#define _GNU_SOURCE /* memmem */
#include <check.h>
#include <convo.h>
#include "dumpbuf.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static char **urls;
static int nurls;
static char prefix[48];
static char ids[6][96];
#define NTHREADS 5

static convo_store *open_url(const char *url)
{
    convo_store *s = NULL;
    convo_error err;
    ck_assert_msg(convo_open(&s, url, &err) == 0, "open %s: %s", url, err.message);
    return s;
}

static void append_ok(convo_store *s, const char *t, const char **msgs, size_t n)
{
    convo_error err;
    ck_assert_msg(convo_append(s, t, msgs, NULL, n, NULL, NULL, &err) == 0, "append: %s",
                  err.message);
}

static void put_cp(convo_store *s, const char *t, const char *ns, const char *id,
                   const char *parent, const char *version, const char *value, int64_t log)
{
    convo_blob v = {"json", value, strlen(value)};
    static const char bin[] = {0, 1, 2, (char)0xfe, 0};
    convo_blob b = {"msgpack", bin, sizeof bin};
    convo_channel_in ch[] = {{"counter", version, value ? &v : NULL}, {"blob", "1", &b}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = t;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{\"source\":\"loop\",\"step\":1,\"tags\":[\"a\"]}";
    cp.body = (convo_blob){"json", "{\"v\":1}", 7};
    cp.channels = ch;
    cp.nchannels = 2;
    cp.log_length = log;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    ck_assert_msg(rc == 0, "put: %s", err.message);
}

/* Five threads: plain, long (crosses chunk boundaries), extra only, with checkpoints
 * and writes, and one with odd bytes. */
static void populate(convo_store *s)
{
    /* fresh ids for every call: persistent stores keep what earlier tests wrote */
    static int generation;
    generation++;
    for (int i = 0; i < NTHREADS; i++)
        snprintf(ids[i], sizeof ids[i], "%s-%d-%d-%d", prefix, (int)getpid(), generation, i);
    const char *a[] = {"{\"role\":\"user\",\"content\":\"hi\"}",
                       "{ \"role\" : \"assistant\" ,\"content\":\"h\\u00e9llo \xe2\x9c\x93\"  }"};
    append_ok(s, ids[0], a, 2);
    convo_error err;
    ck_assert_int_eq(convo_save_extra(s, ids[0], "{\"a.b\":{\"$c\":null},\"n\":1.5}", &err), 0);
    char buf[128];
    const char *one[1] = {buf};
    for (int i = 0; i < 2500; i += 1) {
        snprintf(buf, sizeof buf, "{\"role\":\"%s\",\"i\":%d}", i % 2 ? "assistant" : "user", i);
        append_ok(s, ids[1], one, 1);
    }
    ck_assert_int_eq(convo_save_extra(s, ids[2], "{\"only\":\"extra\"}", &err), 0);
    append_ok(s, ids[3], a, 2);
    put_cp(s, ids[3], "", "c1", NULL, "1", "10", 1);
    put_cp(s, ids[3], "", "c2", "c1", "2", "20", 2);
    put_cp(s, ids[3], "sub", "s1", NULL, "1", "30", 0);
    convo_write_in w[] = {{0, "counter", {"json", "1", 1}}, {-3, "__interrupt__", {"json", "{}", 2}}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, ids[3], "", "c2", "task", "p", w, 2, &err), 0);
    const char *odd[] = {"{\"role\":\"tool_result\",\"x\":\"\\u0000\",\"big\":123456789012345678901234567890.0}"};
    append_ok(s, ids[4], odd, 1);
}

static void compare_history(convo_store *want, convo_store *got, const char *t)
{
    convo_history *a, *b;
    convo_error err;
    int ra = convo_load(want, t, NULL, &a, &err);
    int rb = convo_load(got, t, NULL, &b, &err);
    ck_assert_int_eq(ra, rb);
    if (ra != 0)
        return;
    ck_assert_int_eq(convo_history_count(a), convo_history_count(b));
    ck_assert_int_eq(convo_history_length(a), convo_history_length(b));
    for (size_t i = 0; i < convo_history_count(a); i++) {
        size_t la, lb;
        const char *ma = convo_history_message(a, i, &la), *mb = convo_history_message(b, i, &lb);
        ck_assert_int_eq(la, lb);
        ck_assert_mem_eq(ma, mb, la);
        ck_assert_int_eq(convo_history_seq(a, i), convo_history_seq(b, i));
        ck_assert_int_eq(convo_history_created_at(a, i), convo_history_created_at(b, i));
        ck_assert_str_eq(convo_history_role(a, i), convo_history_role(b, i));
    }
    json_t *ea = json_loads(convo_history_extra(a), 0, NULL);
    json_t *eb = json_loads(convo_history_extra(b), 0, NULL);
    ck_assert_msg(json_equal(ea, eb), "extra differs: %s vs %s", convo_history_extra(a),
                  convo_history_extra(b));
    json_decref(ea);
    json_decref(eb);
    convo_history_free(a);
    convo_history_free(b);
}

static void compare_blob(convo_blob a, convo_blob b)
{
    ck_assert((a.type == NULL) == (b.type == NULL));
    if (a.type) {
        ck_assert_str_eq(a.type, b.type);
        ck_assert_int_eq(a.len, b.len);
        ck_assert_mem_eq(a.bytes, b.bytes, a.len);
    }
}

static void compare_checkpoint(const convo_checkpoint *a, const convo_checkpoint *b)
{
    ck_assert_str_eq(convo_checkpoint_ns(a), convo_checkpoint_ns(b));
    ck_assert_str_eq(convo_checkpoint_id(a), convo_checkpoint_id(b));
    const char *pa = convo_checkpoint_parent_id(a), *pb = convo_checkpoint_parent_id(b);
    ck_assert((pa == NULL) == (pb == NULL));
    if (pa)
        ck_assert_str_eq(pa, pb);
    json_t *ma = json_loads(convo_checkpoint_metadata(a), 0, NULL);
    json_t *mb = json_loads(convo_checkpoint_metadata(b), 0, NULL);
    ck_assert(json_equal(ma, mb));
    json_decref(ma);
    json_decref(mb);
    compare_blob(convo_checkpoint_body(a), convo_checkpoint_body(b));
    ck_assert_int_eq(convo_checkpoint_log_length(a), convo_checkpoint_log_length(b));
    ck_assert_int_eq(convo_checkpoint_channel_count(a), convo_checkpoint_channel_count(b));
    for (size_t i = 0; i < convo_checkpoint_channel_count(a); i++) {
        const char *va, *vb;
        convo_blob xa, xb;
        ck_assert_str_eq(convo_checkpoint_channel(a, i, &va, &xa),
                         convo_checkpoint_channel(b, i, &vb, &xb));
        ck_assert_str_eq(va, vb);
        compare_blob(xa, xb);
    }
    ck_assert_int_eq(convo_checkpoint_write_count(a), convo_checkpoint_write_count(b));
    for (size_t i = 0; i < convo_checkpoint_write_count(a); i++) {
        const char *pa2, *pb2, *ca, *cb;
        int64_t ia, ib;
        convo_blob xa, xb;
        ck_assert_str_eq(convo_checkpoint_write(a, i, &pa2, &ia, &ca, &xa),
                         convo_checkpoint_write(b, i, &pb2, &ib, &cb, &xb));
        ck_assert_str_eq(pa2, pb2);
        ck_assert_int_eq(ia, ib);
        ck_assert_str_eq(ca, cb);
        compare_blob(xa, xb);
    }
}

static void compare_checkpoints(convo_store *want, convo_store *got, const char *t)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = t;
    convo_checkpoint_set *a, *b;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_list(want, &o, &a, &err), 0);
    ck_assert_msg(convo_checkpoint_list(got, &o, &b, &err) == 0, "list: %s", err.message);
    ck_assert_int_eq(convo_checkpoint_set_count(a), convo_checkpoint_set_count(b));
    for (size_t i = 0; i < convo_checkpoint_set_count(a); i++)
        compare_checkpoint(convo_checkpoint_set_get(a, i), convo_checkpoint_set_get(b, i));
    convo_checkpoint_set_free(a);
    convo_checkpoint_set_free(b);
}

static void compare_all(convo_store *want, convo_store *got)
{
    for (int i = 0; i < NTHREADS; i++) {
        compare_history(want, got, ids[i]);
        compare_checkpoints(want, got, ids[i]);
    }
}

static const char *const *id_list(void)
{
    static const char *list[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        list[i] = ids[i];
    return list;
}

START_TEST(test_chain)
{
    convo_store *first = open_url(urls[0]);
    populate(first);
    convo_store *prev = first;
    for (int i = 1; i < nurls; i++) {
        convo_store *next = open_url(urls[i]);
        convo_dump_stats st;
        convo_error err;
        int rc = convo_copy(prev, next, id_list(), NTHREADS, NULL, &st, &err);
        ck_assert_msg(rc == 0, "copy %s -> %s: %s", convo_store_driver(prev),
                      convo_store_driver(next), err.message);
        ck_assert_int_eq(st.threads, NTHREADS);
        ck_assert_int_eq(st.messages, 2505);
        compare_all(first, next);
        if (prev != first)
            convo_close(prev);
        prev = next;
    }
    if (prev != first)
        convo_close(prev);
    convo_close(first);
}
END_TEST

static membuf dump_of_populated(convo_store **src)
{
    *src = open_url("memory:");
    populate(*src);
    membuf m = {0};
    convo_error err;
    ck_assert_int_eq(convo_export(*src, NULL, 0, mem_write, &m, NULL, NULL, &err), 0);
    return m;
}

START_TEST(test_import_twice)
{
    convo_store *src;
    membuf m = dump_of_populated(&src);
    convo_store *dst = open_url(urls[_i]);
    convo_dump_stats st;
    convo_error err;
    m.pos = 0;
    ck_assert_msg(convo_import(dst, mem_read, &m, NULL, &st, &err) == 0, "%s", err.message);
    ck_assert_int_eq(st.skipped, 0);
    m.pos = 0;
    ck_assert_msg(convo_import(dst, mem_read, &m, NULL, &st, &err) == 0, "%s", err.message);
    ck_assert_int_eq(st.skipped, 2505);
    compare_all(src, dst);
    free(m.data);
    convo_close(src);
    convo_close(dst);
}
END_TEST

/* No staged copy (".convo-import-...") is left in the store. */
static void no_staging_left(convo_store *dst)
{
    convo_thread_page *p;
    ck_assert_int_eq(convo_thread_list(dst, ".convo-import", 1, &p, NULL), 0);
    const char *first = convo_thread_page_count(p) ? convo_thread_page_id(p, 0) : "";
    ck_assert_msg(strncmp(first, ".convo-import-", 14) != 0, "left behind: %s", first);
    convo_thread_page_free(p);
}

/* After a failed import, every thread is either identical or absent. */
static void whole_or_absent(convo_store *src, convo_store *dst)
{
    no_staging_left(dst);
    for (int i = 0; i < NTHREADS; i++) {
        convo_history *h;
        convo_error err;
        int rc = convo_load(dst, ids[i], NULL, &h, &err);
        convo_history_free(h);
        if (rc == CONVO_ENOTFOUND)
            continue;
        ck_assert_int_eq(rc, 0);
        compare_history(src, dst, ids[i]);
    }
}

START_TEST(test_truncated)
{
    convo_store *src;
    membuf m = dump_of_populated(&src);
    size_t cuts[] = {0, 1, 7, m.len / 5, m.len / 3, m.len / 2, m.len * 3 / 4, m.len - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        membuf t = {m.data, cuts[c], m.len, 0};
        convo_store *dst = open_url(urls[_i]);
        convo_error err;
        int rc = convo_import(dst, mem_read, &t, NULL, NULL, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "cut at %zu: rc %d", cuts[c], rc);
        ck_assert_msg(strstr(err.message, "byte") != NULL, "no offset in: %s", err.message);
        whole_or_absent(src, dst);
        for (int i = 0; i < NTHREADS; i++)
            convo_thread_delete(dst, ids[i], NULL);
        convo_close(dst);
    }
    free(m.data);
    convo_close(src);
}
END_TEST

START_TEST(test_corrupted)
{
    convo_store *src;
    membuf m = dump_of_populated(&src);
    srand(42);
    for (int k = 0; k < 12; k++) {
        size_t at = k == 0 ? 0 : (size_t)rand() % m.len;
        membuf t = {malloc(m.len), m.len, m.len, 0};
        memcpy(t.data, m.data, m.len);
        t.data[at] ^= (char)(1 + rand() % 255);
        convo_store *dst = open_url(urls[_i]);
        convo_error err;
        int rc = convo_import(dst, mem_read, &t, NULL, NULL, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "flip at %zu: rc %d %s", at, rc, err.message);
        ck_assert_msg(strstr(err.message, "byte") != NULL, "no offset in: %s", err.message);
        whole_or_absent(src, dst);
        for (int i = 0; i < NTHREADS; i++)
            convo_thread_delete(dst, ids[i], NULL);
        convo_close(dst);
        free(t.data);
    }
    free(m.data);
    convo_close(src);
}
END_TEST

START_TEST(test_not_a_dump)
{
    convo_store *dst = open_url(urls[_i]);
    membuf t = {"{\"role\":\"user\"}\n", 16, 16, 0};
    convo_error err;
    ck_assert_int_eq(convo_import(dst, mem_read, &t, NULL, NULL, &err), CONVO_ECORRUPT);
    membuf empty = {"", 0, 0, 0};
    ck_assert_int_eq(convo_import(dst, mem_read, &empty, NULL, NULL, &err), CONVO_ECORRUPT);
    convo_close(dst);
}
END_TEST

/* ---- a dump edited frame by frame: [0x92, bin(record), uint64 checksum] ---- */

/* The frame at m->data + at: its record's offset and length, and the frame's size. */
static size_t frame_at(const membuf *m, size_t at, size_t *rec, size_t *rec_len)
{
    const unsigned char *p = (const unsigned char *)m->data + at;
    size_t width = p[1] == 0xc4 ? 1 : p[1] == 0xc5 ? 2 : 4, n = 0;
    ck_assert(p[0] == 0x92);
    for (size_t k = 0; k < width; k++)
        n = (n << 8) | p[2 + k];
    *rec = at + 2 + width;
    *rec_len = n;
    unsigned c = p[2 + width + n];
    size_t sum = c <= 0x7f ? 1 : c == 0xcc ? 2 : c == 0xcd ? 3 : c == 0xce ? 5 : 9;
    return 2 + width + n + sum;
}

/* The dump m without the frames that mention `drop`, and with its end record
 * replaced by `end` (when not NULL). */
static membuf edited(const membuf *m, const char *drop, const void *end, size_t end_len)
{
    membuf out = {0};
    for (size_t at = 0; at < m->len;) {
        size_t rec, len, size = frame_at(m, at, &rec, &len);
        int last = at + size == m->len;
        if (last && end)
            add_frame(&out, end, end_len);
        else if (!drop || !memmem(m->data + rec, len, drop, strlen(drop)))
            mem_write(&out, m->data + at, size);
        at += size;
    }
    return out;
}

static void import_refused(int u, const membuf *dump, int want)
{
    convo_store *dst = open_url(urls[u]);
    membuf t = *dump;
    t.pos = 0;
    convo_error err;
    int rc = convo_import(dst, mem_read, &t, NULL, NULL, &err);
    ck_assert_msg(rc == want, "import: rc %d (%s), want %d", rc, rc ? err.message : "", want);
    for (int i = 0; i < NTHREADS; i++)
        convo_thread_delete(dst, ids[i], NULL);
    convo_close(dst);
}

/* The end record's counts are checked: a wrong count, or a thread cut out whole. */
START_TEST(test_end_counts)
{
    convo_store *src;
    membuf m = dump_of_populated(&src);
    membuf same = edited(&m, NULL, NULL, 0);
    ck_assert_int_eq(same.len, m.len);
    import_refused(_i, &same, 0);
    /* ["end", 4, 2505]: one thread fewer than the dump holds */
    static const unsigned char end4[] = {0x93, 0xa3, 'e', 'n', 'd', 0x04, 0xcd, 0x09, 0xc9};
    static const unsigned char end5[] = {0x93, 0xa3, 'e', 'n', 'd', 0x05, 0xcd, 0x09, 0xc9};
    static const unsigned char end5m[] = {0x93, 0xa3, 'e', 'n', 'd', 0x05, 0xcd, 0x09, 0xca};
    membuf good = edited(&m, NULL, end5, sizeof end5);
    import_refused(_i, &good, 0); /* the edit itself is sound */
    membuf fewer = edited(&m, NULL, end4, sizeof end4);
    import_refused(_i, &fewer, CONVO_ECORRUPT);
    membuf more = edited(&m, NULL, end5m, sizeof end5m);
    import_refused(_i, &more, CONVO_ECORRUPT);
    membuf cut = edited(&m, ids[2], NULL, 0); /* the extra-only thread, removed whole */
    ck_assert(cut.len < m.len);
    import_refused(_i, &cut, CONVO_ECORRUPT);
    free(same.data);
    free(good.data);
    free(fewer.data);
    free(more.data);
    free(cut.data);
    free(m.data);
    convo_close(src);
}
END_TEST

/* A message's time comes back exactly as imported, or the store refuses it
 * (CONVO_EINVAL, nothing stored): never another time (PostgreSQL turned
 * INT64_MIN into the year 294247). */
START_TEST(test_import_times)
{
    const int64_t times[] = {INT64_MIN, INT64_MIN + 1, -62135596800000000 /* year 1 */ - 1,
                             -1, 0, 1732500000123456, 253402300799999999 /* 9999 */,
                             INT64_MAX - 1, INT64_MAX};
    convo_store *dst = open_url(urls[_i]);
    for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
        char thread[96];
        snprintf(thread, sizeof thread, "%s-time-%zu", prefix, k);
        membuf m = dump_with_time(thread, times[k]);
        convo_error err;
        int rc = convo_import(dst, mem_read, &m, NULL, NULL, &err);
        convo_history *h = NULL;
        int lrc = convo_load(dst, thread, NULL, &h, NULL);
        if (rc == 0) {
            ck_assert_int_eq(lrc, 0);
            ck_assert_msg(convo_history_created_at(h, 0) == times[k],
                          "%s: imported %lld, loaded %lld", convo_store_driver(dst),
                          (long long)times[k], (long long)convo_history_created_at(h, 0));
        } else {
            ck_assert_msg(rc == CONVO_EINVAL, "%s: time %lld: rc %d (%s)",
                          convo_store_driver(dst), (long long)times[k], rc, err.message);
            ck_assert_int_eq(lrc, CONVO_ENOTFOUND);
        }
        if (k == 4 || k == 5)
            ck_assert_int_eq(rc, 0); /* 1970 and 2024 fit every store */
        convo_history_free(h);
        convo_thread_delete(dst, thread, NULL);
        free(m.data);
    }
    convo_close(dst);
}
END_TEST

/* The updated_at of thread in a first page of every thread (-1: not listed). */
static int64_t updated_at(convo_store *s, const char *thread, int64_t *created_at)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.order = CONVO_ORDER_ID;
    o.limit = 10000;
    convo_thread_page *p;
    convo_error err;
    ck_assert_msg(convo_thread_list_ex(s, &o, &p, &err) == 0, "list: %s", err.message);
    int64_t at = -1;
    for (size_t i = 0; i < convo_thread_page_count(p); i++)
        if (strcmp(convo_thread_page_id(p, i), thread) == 0) {
            at = convo_thread_page_updated_at(p, i);
            *created_at = convo_thread_page_created_at(p, i);
        }
    convo_thread_page_free(p);
    return at;
}

/* A thread imported at the last time a store holds (INT64_MAX microseconds):
 * the writes after it, to other threads, still get times at or past their
 * own creation, never one that wrapped around (SQLite gave the time after
 * every other thread's activity, INT64_MAX + 1, to the next write, also once
 * that thread was deleted). */
START_TEST(test_write_after_the_last_time)
{
    convo_store *dst = open_url(urls[_i]);
    char last[96], after[2][96];
    snprintf(last, sizeof last, "%s-last-time", prefix);
    membuf m = dump_with_time(last, INT64_MAX);
    convo_error err;
    int rc = convo_import(dst, mem_read, &m, NULL, NULL, &err);
    free(m.data);
    ck_assert_msg(rc == 0 || rc == CONVO_EINVAL, "import: %d %s", rc, err.message);
    for (int k = 0; k < 2; k++) {
        snprintf(after[k], sizeof after[k], "%s-after-last-%d", prefix, k);
        ck_assert_int_eq(convo_save_extra(dst, after[k], "{\"a\":1}", &err), 0);
        const char *msg = "{\"role\":\"user\",\"content\":\"later\"}";
        ck_assert_int_eq(convo_append(dst, after[k], &msg, NULL, 1, NULL, NULL, &err), 0);
        int64_t created = 0, updated = updated_at(dst, after[k], &created);
        ck_assert_msg(created > 0 && updated >= created, "%s: %s created %lld, updated %lld",
                      convo_store_driver(dst), after[k], (long long)created, (long long)updated);
        convo_history *h;
        ck_assert_int_eq(convo_load(dst, after[k], NULL, &h, &err), 0);
        ck_assert_int_gt(convo_history_created_at(h, 0), 0);
        convo_history_free(h);
        if (k == 0 && rc == 0) /* the next round writes with the last thread gone */
            ck_assert_int_eq(convo_thread_delete(dst, last, &err), 0);
    }
    for (int k = 0; k < 2; k++)
        convo_thread_delete(dst, after[k], NULL);
    convo_close(dst);
}
END_TEST

/* ---- export of a live store: a write function that changes the store at the
 * first flush, i.e. after the first chunk of the thread being exported ---- */

enum meddle { ADD_MORE, DELETE, REPLACE };

typedef struct live_write {
    membuf out;
    convo_store *s;
    const char *thread;
    enum meddle what;
    int done;
} live_write;

static void append_many(convo_store *s, const char *t, int n, const char *tag)
{
    static char buf[1000][320];
    const char *msgs[1000];
    for (int done = 0; done < n; done += 1000) {
        int k = n - done < 1000 ? n - done : 1000;
        for (int i = 0; i < k; i++) {
            snprintf(buf[i], sizeof buf[i], "{\"role\":\"user\",\"content\":\"%s %d %0250d\"}",
                     tag, done + i, i);
            msgs[i] = buf[i];
        }
        append_ok(s, t, msgs, (size_t)k);
    }
}

static int live_write_fn(void *ctx, const void *buf, size_t len)
{
    live_write *w = ctx;
    if (!w->done) {
        w->done = 1;
        if (w->what != ADD_MORE)
            ck_assert_int_eq(convo_thread_delete(w->s, w->thread, NULL), 0);
        if (w->what != DELETE)
            append_many(w->s, w->thread, w->what == ADD_MORE ? 1000 : 3000, "new");
    }
    return mem_write(&w->out, buf, len);
}

/* Exports a 2,500-message thread while `what` happens to it after its first chunk. */
static int export_live(int u, enum meddle what, int all, live_write *w, convo_dump_stats *st,
                       convo_error *err)
{
    static int n;
    static char thread[96];
    /* '!' sorts first: a whole-store export meets this thread before any other */
    snprintf(thread, sizeof thread, "!%s-live-%d", prefix, n++);
    *w = (live_write){.s = open_url(urls[u]), .thread = thread, .what = what};
    append_many(w->s, thread, 2500, "old");
    const char *one[] = {thread};
    return convo_export(w->s, all ? NULL : one, all ? 0 : 1, live_write_fn, w, NULL, st, err);
}

static void live_done(live_write *w)
{
    convo_thread_delete(w->s, w->thread, NULL);
    convo_close(w->s);
    free(w->out.data);
}

/* A thread twice in one dump is refused; so is a dump whose thread the store
 * holds with other messages (both used to be skipped silently, exit 0). */
START_TEST(test_import_repeated_or_different)
{
    convo_store *dst = open_url(urls[_i]);
    char thread[96];
    snprintf(thread, sizeof thread, "%s-repeated", prefix);
    const char *twice[] = {thread, thread};
    membuf m = dump_of(twice, 2, 1732500000000000, "{\"role\":\"user\"}");
    convo_error err;
    int rc = convo_import(dst, mem_read, &m, NULL, NULL, &err);
    ck_assert_msg(rc == CONVO_ECORRUPT, "repeated: rc %d", rc);
    ck_assert_ptr_nonnull(strstr(err.message, "appears twice"));
    free(m.data);
    convo_thread_delete(dst, thread, NULL);
    const char *mine[] = {"{\"role\":\"user\",\"mine\":1}"};
    append_ok(dst, thread, mine, 1);
    const char *one[] = {thread};
    m = dump_of(one, 1, 1732500000000000, "{\"role\":\"user\"}");
    convo_dump_stats st;
    rc = convo_import(dst, mem_read, &m, NULL, &st, &err);
    ck_assert_msg(rc == CONVO_ECONFLICT, "other content: rc %d, %llu skipped", rc,
                  (unsigned long long)st.skipped);
    ck_assert_ptr_nonnull(strstr(err.message, "exists with other messages (seq 0"));
    convo_history *h;
    ck_assert_int_eq(convo_load(dst, thread, NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_length(h), 1);
    ck_assert_str_eq(convo_history_message(h, 0, NULL), mine[0]);
    convo_history_free(h);
    free(m.data);
    convo_thread_delete(dst, thread, NULL);
    convo_close(dst);
}
END_TEST

/* Every driver's error names the thread (issue 23.4: "thread has 1 messages, the
 * dump continues at 0", "thread not found" said which by no name). */
static void assert_names(const convo_error *err, const char *thread)
{
    char want[128];
    snprintf(want, sizeof want, "thread %s", thread);
    const char *at = strstr(err->message, want);
    ck_assert_msg(at && strchr(" :", at[strlen(want)]), "does not name %s: %s", thread,
                  err->message);
}

START_TEST(test_errors_name_the_thread)
{
    convo_store *src = open_url("memory:"), *dst = open_url(urls[_i]);
    char thread[96], nosuch[96];
    snprintf(thread, sizeof thread, "%s-named", prefix);
    snprintf(nosuch, sizeof nosuch, "%s-nosuch", prefix);
    const char *two[] = {"{\"role\":\"user\"}", "{\"role\":\"assistant\"}"};
    const char *mine[] = {"{\"role\":\"user\",\"mine\":1}"};
    append_ok(src, thread, two, 2);
    append_ok(dst, thread, mine, 1);
    membuf m = {0};
    convo_error err;
    ck_assert_int_eq(convo_export(src, NULL, 0, mem_write, &m, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_import(dst, mem_read, &m, NULL, NULL, &err), CONVO_ECONFLICT);
    assert_names(&err, thread);
    const char *missing[] = {nosuch};
    membuf out = {0};
    ck_assert_int_eq(convo_export(dst, missing, 1, mem_write, &out, NULL, NULL, &err),
                     CONVO_ENOTFOUND);
    assert_names(&err, nosuch);
    ck_assert_int_eq(convo_copy(dst, src, missing, 1, NULL, NULL, &err), CONVO_ENOTFOUND);
    assert_names(&err, nosuch);
    free(m.data);
    free(out.data);
    convo_thread_delete(dst, thread, NULL);
    convo_close(src);
    convo_close(dst);
}
END_TEST

/* A store may hold messages with integers past 64 bits from before they were
 * refused (issue 23.4): import restores them as they were. */
START_TEST(test_import_keeps_old_big_integers)
{
    convo_store *dst = open_url(urls[_i]);
    char thread[96];
    snprintf(thread, sizeof thread, "%s-old-big", prefix);
    const char *one[] = {thread};
    const char *msg = "{\"role\":\"user\",\"big\":123456789012345678901234567890}";
    membuf m = dump_of(one, 1, 1732500000000000, msg);
    convo_error err;
    ck_assert_msg(convo_import(dst, mem_read, &m, NULL, NULL, &err) == 0, "%s", err.message);
    convo_history *h;
    ck_assert_int_eq(convo_load(dst, thread, NULL, &h, &err), 0);
    ck_assert_str_eq(convo_history_message(h, 0, NULL), msg);
    convo_history_free(h);
    free(m.data);
    convo_thread_delete(dst, thread, NULL);
    convo_close(dst);
}
END_TEST

START_TEST(test_export_named_twice)
{
    convo_store *src = open_url(urls[_i]);
    char thread[96];
    snprintf(thread, sizeof thread, "%s-named-twice", prefix);
    const char *m[] = {"{\"role\":\"user\"}"};
    append_ok(src, thread, m, 1);
    const char *twice[] = {thread, thread};
    membuf out = {0};
    convo_error err;
    ck_assert_int_eq(convo_export(src, twice, 2, mem_write, &out, NULL, NULL, &err), CONVO_EINVAL);
    ck_assert_int_eq(out.len, 0);
    convo_thread_delete(src, thread, NULL);
    convo_close(src);
}
END_TEST

/* ---- another writer during an import ---- */

typedef struct meddling_read {
    membuf in;
    convo_store *dst;
    const char *thread;
    int done;
} meddling_read;

/* Gives the dump in 64 KiB reads; when half of it is read (the first chunk of
 * messages applied, more to come) another writer appends to the thread. */
static long meddling_read_fn(void *ctx, void *buf, size_t len)
{
    meddling_read *r = ctx;
    if (!r->done && r->in.pos >= r->in.len / 2) {
        r->done = 1;
        const char *m[] = {"{\"role\":\"user\",\"content\":\"other writer\"}"};
        append_ok(r->dst, r->thread, m, 1);
    }
    return mem_read(&r->in, buf, len < 65536 ? len : 65536);
}

/* A failed import removes only what it wrote: the other writer's acknowledged
 * message stays (the import used to delete the whole thread). */
START_TEST(test_import_other_writer)
{
    convo_store *src = open_url("memory:");
    char thread[96];
    snprintf(thread, sizeof thread, "%s-other-writer", prefix);
    append_many(src, thread, 2500, "imported");
    meddling_read r = {.dst = open_url(urls[_i]), .thread = thread};
    const char *one[] = {thread};
    convo_error err;
    ck_assert_int_eq(convo_export(src, one, 1, mem_write, &r.in, NULL, NULL, &err), 0);
    int rc = convo_import(r.dst, meddling_read_fn, &r, NULL, NULL, &err);
    ck_assert(r.done);
    ck_assert_msg(rc == CONVO_ECONFLICT, "import: rc %d (%s)", rc, rc ? err.message : "");
    convo_history *h;
    ck_assert_int_eq(convo_load(r.dst, thread, NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_length(h), 1);
    ck_assert_ptr_nonnull(strstr(convo_history_message(h, 0, NULL), "other writer"));
    convo_history_free(h);
    no_staging_left(r.dst);
    convo_thread_delete(r.dst, thread, NULL);
    convo_close(r.dst);
    convo_close(src);
    free(r.in.data);
}
END_TEST

START_TEST(test_export_appended_meanwhile)
{
    live_write w;
    convo_dump_stats st;
    convo_error err;
    int rc = export_live(_i, ADD_MORE, 0, &w, &st, &err);
    ck_assert_msg(rc == 0, "export: %s", err.message);
    ck_assert(w.done);
    ck_assert_int_eq(st.messages, 2500); /* its length when its export began */
    convo_store *dst = open_url("memory:");
    w.out.pos = 0;
    ck_assert_msg(convo_import(dst, mem_read, &w.out, NULL, NULL, &err) == 0, "%s", err.message);
    convo_history *h;
    ck_assert_int_eq(convo_load(dst, w.thread, NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_length(h), 2500);
    ck_assert_ptr_nonnull(strstr(convo_history_message(h, 2499, NULL), "old 2499"));
    convo_history_free(h);
    convo_close(dst);
    live_done(&w);
}
END_TEST

START_TEST(test_export_replaced_meanwhile)
{
    live_write w;
    convo_error err;
    int rc = export_live(_i, REPLACE, 0, &w, NULL, &err);
    ck_assert_msg(rc == CONVO_ECONFLICT, "export: rc %d", rc);
    ck_assert_ptr_nonnull(strstr(err.message, "export again"));
    live_done(&w);
}
END_TEST

START_TEST(test_export_all_deleted_meanwhile)
{
    live_write w;
    convo_error err;
    int rc = export_live(_i, DELETE, 1, &w, NULL, &err);
    ck_assert_msg(rc == CONVO_ECONFLICT, "export: rc %d", rc);
    live_done(&w);
}
END_TEST

/* Every allocation of an export failing in turn (the test-only hook
 * CONVO_TEST_EXPORT_NOMEM): each run fails with CONVO_ENOMEM or, once the hook
 * is past the last allocation, writes the whole dump; never a short dump with
 * exit 0, never a loop. A store of 1,001 threads (two pages of the listing)
 * and a thread of 257 checkpoints (two pages of checkpoint keys). */
START_TEST(test_export_nomem)
{
    convo_store *s = open_url("memory:");
    convo_error err;
    char id[32];
    for (int i = 0; i < 1001; i++) {
        snprintf(id, sizeof id, "t%04d", i);
        ck_assert_int_eq(convo_save_extra(s, id, "{\"k\":1}", &err), 0);
    }
    char cp[16], parent[16];
    for (int i = 0; i < 257; i++) {
        snprintf(cp, sizeof cp, "c%04d", i);
        put_cp(s, "t0000", "", cp, i ? parent : NULL, "1", "10", 0);
        memcpy(parent, cp, sizeof cp);
    }
    membuf whole = {0};
    unsetenv("CONVO_TEST_EXPORT_NOMEM");
    ck_assert_int_eq(convo_export(s, NULL, 0, mem_write, &whole, NULL, NULL, &err), 0);
    int n;
    for (n = 1;; n++) {
        char v[16];
        snprintf(v, sizeof v, "%d", n);
        setenv("CONVO_TEST_EXPORT_NOMEM", v, 1);
        membuf m = {0};
        int rc = convo_export(s, NULL, 0, mem_write, &m, NULL, NULL, &err);
        if (rc == 0) {
            ck_assert_msg(m.len == whole.len && memcmp(m.data, whole.data, m.len) == 0,
                          "allocation %d failing: exit 0 with %zu of %zu bytes", n, m.len,
                          whole.len);
            free(m.data);
            break;
        }
        ck_assert_msg(rc == CONVO_ENOMEM, "allocation %d failing: rc %d (%s)", n, rc,
                      err.message);
        free(m.data);
    }
    unsetenv("CONVO_TEST_EXPORT_NOMEM");
    fprintf(stderr, "export: %d allocations made to fail in turn\n", n - 1);
    ck_assert_int_gt(n, 500);
    free(whole.data);
    convo_close(s);
}
END_TEST

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* CONVO_DUMP_BIG=N copies an N-message thread between the first and last URL
 * and reports the peak RSS growth; it must stay under a fixed bound. */
START_TEST(test_big_copy_bounded)
{
    const char *env = getenv("CONVO_DUMP_BIG");
    size_t total = env ? strtoul(env, NULL, 10) : 200000;
    convo_store *src = open_url(urls[0]), *dst = open_url(urls[nurls - 1]);
    char thread[96];
    snprintf(thread, sizeof thread, "%s-big", prefix);
    char **msgs = calloc(1000, sizeof *msgs);
    for (int i = 0; i < 1000; i++) {
        msgs[i] = malloc(300);
        snprintf(msgs[i], 300, "{\"role\":\"user\",\"content\":\"message %d %0200d\"}", i, i);
    }
    convo_error err;
    for (size_t done = 0; done < total; done += 1000)
        ck_assert_int_eq(convo_append(src, thread, (const char *const *)msgs, NULL, 1000, NULL,
                                      NULL, &err), 0);
    for (int i = 0; i < 1000; i++)
        free(msgs[i]);
    free(msgs);
    long before = peak_rss_kb();
    const char *one[] = {thread};
    convo_dump_stats st;
    ck_assert_msg(convo_copy(src, dst, one, 1, NULL, &st, &err) == 0, "%s", err.message);
    long growth = peak_rss_kb() - before;
    fprintf(stderr, "copy of %zu messages %s -> %s: peak RSS grew by %ld KiB\n", total,
            convo_store_driver(src), convo_store_driver(dst), growth);
    ck_assert_int_eq(st.messages, total);
    ck_assert_msg(growth < 64 * 1024, "peak RSS grew by %ld KiB", growth);
    convo_thread_delete(src, thread, NULL);
    convo_thread_delete(dst, thread, NULL);
    convo_close(src);
    convo_close(dst);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s URL URL [URL ...]\n", argv[0]);
        return 2;
    }
    urls = argv + 1;
    nurls = argc - 1;
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    snprintf(prefix, sizeof prefix, "dump-%08x", (unsigned)rand());
    Suite *suite = suite_create("dump");
    TCase *tc = tcase_create("dump");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_chain);
    /* the import checks run against every store of the chain */
    tcase_add_loop_test(tc, test_import_twice, 0, nurls);
    tcase_add_loop_test(tc, test_truncated, 0, nurls);
    tcase_add_loop_test(tc, test_corrupted, 0, nurls);
    tcase_add_loop_test(tc, test_not_a_dump, 0, nurls);
    tcase_add_loop_test(tc, test_end_counts, 0, nurls);
    tcase_add_loop_test(tc, test_import_times, 0, nurls);
    tcase_add_loop_test(tc, test_write_after_the_last_time, 0, nurls);
    tcase_add_loop_test(tc, test_import_other_writer, 0, nurls);
    tcase_add_loop_test(tc, test_import_repeated_or_different, 0, nurls);
    tcase_add_loop_test(tc, test_export_named_twice, 0, nurls);
    tcase_add_loop_test(tc, test_errors_name_the_thread, 0, nurls);
    tcase_add_loop_test(tc, test_import_keeps_old_big_integers, 0, nurls);
    tcase_add_loop_test(tc, test_export_appended_meanwhile, 0, nurls);
    tcase_add_loop_test(tc, test_export_replaced_meanwhile, 0, nurls);
    tcase_add_loop_test(tc, test_export_all_deleted_meanwhile, 0, nurls);
    tcase_add_test(tc, test_export_nomem);
    tcase_add_test(tc, test_big_copy_bounded);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
