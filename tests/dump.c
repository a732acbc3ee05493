/* dump.c — tests of convo_export / convo_import / convo_copy: `tests/dump URL...`
 * copies a populated set of threads along the chain of stores given and checks
 * that every message (bytes, seq, role, created_at), extra object, checkpoint,
 * channel value and pending write arrives identical; truncated and corrupted
 * dumps leave each thread whole or absent; a large copy stays in bounded memory. */
#include <check.h>
#include <convo.h>
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
    const char *odd[] = {"{\"role\":\"tool_result\",\"x\":\"\\u0000\",\"big\":123456789012345678901234567890}"};
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

typedef struct membuf {
    char *data;
    size_t len, cap, pos;
} membuf;

static int mem_write(void *ctx, const void *buf, size_t len)
{
    membuf *m = ctx;
    if (m->len + len > m->cap) {
        m->cap = (m->len + len) * 2;
        m->data = realloc(m->data, m->cap);
    }
    memcpy(m->data + m->len, buf, len);
    m->len += len;
    return 0;
}

static long mem_read(void *ctx, void *buf, size_t len)
{
    membuf *m = ctx;
    size_t n = m->len - m->pos < len ? m->len - m->pos : len;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (long)n;
}

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

/* After a failed import, every thread is either identical or absent. */
static void whole_or_absent(convo_store *src, convo_store *dst)
{
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
    tcase_add_test(tc, test_big_copy_bounded);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
