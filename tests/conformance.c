/* conformance.c — the one conformance suite every driver must pass, run as
 * `tests/conformance URL`. It uses only the public API (convo.h) and jansson to
 * compare JSON, so the same checks hold every driver to design §2. */
#include "conformance.h"
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *conf_url;
char conf_prefix[64];
int conf_private;
convo_store *conf_store;

/* Clock skew allowed between this process and the store when checking created_at. */
#define CLOCK_SLACK_MICROS (10 * 1000000LL)

/* ------------------------------------------------------------------ helpers */

static int64_t now_micros(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void conf_tid(char *buf, size_t size, const char *fn, const char *name)
{
    int n = snprintf(buf, size, "%s/%s/%s", conf_prefix, fn, name);
    ck_assert_msg(n > 0 && (size_t)n < size, "thread id buffer too small for %s", name);
}

convo_store *conf_open_ex(const convo_store_opts *opts)
{
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open_ex(&s, conf_url, opts, &err);
    ck_assert_msg(rc == 0 && s != NULL, "convo_open failed: %d (%s): %s", rc, convo_strerror(rc),
                  err.message);
    return s;
}

convo_store *conf_open(void)
{
    return conf_open_ex(NULL);
}

void conf_assert_fails(int rc, const convo_error *err, int code, const char *file, int line)
{
    ck_assert_msg(rc == code, "%s:%d: expected %d (%s), got %d (%s): %s", file, line, code,
                  convo_strerror(code), rc, convo_strerror(rc), err->message);
    ck_assert_msg(err->code == code, "%s:%d: err.code is %d, expected %d", file, line, err->code,
                  code);
    ck_assert_msg(err->message[0] != '\0', "%s:%d: empty error message", file, line);
    ck_assert_msg(strpbrk(err->message, "\r\n") == NULL, "%s:%d: message is not one line: %s",
                  file, line, err->message);
}

int64_t conf_append(convo_store *s, const char *tid, const char *const *msgs, size_t n)
{
    convo_append_result res = {-1, 0, -1};
    convo_error err;
    int rc = convo_append(s, tid, msgs, NULL, n, NULL, &res, &err);
    ASSERT_OK(rc, err);
    ck_assert_int_eq(res.count, n);
    ck_assert_int_eq(res.replayed, 0);
    ck_assert_int_ge(res.first_seq, 0);
    return res.first_seq;
}

convo_history *conf_load(convo_store *s, const char *tid, const convo_load_opts *opts)
{
    convo_history *h = NULL;
    convo_error err;
    int rc = convo_load(s, tid, opts, &h, &err);
    ASSERT_OK(rc, err);
    ck_assert_ptr_nonnull(h);
    return h;
}

int64_t conf_length(convo_store *s, const char *tid)
{
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.limit = 1;
    o.with_extra = 0;
    convo_history *h = NULL;
    convo_error err;
    int rc = convo_load(s, tid, &o, &h, &err);
    if (rc == CONVO_ENOTFOUND)
        return -1;
    ASSERT_OK(rc, err);
    int64_t n = convo_history_length(h);
    convo_history_free(h);
    return n;
}

json_t *conf_parse_json(const char *text)
{
    json_error_t jerr;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
    ck_assert_msg(j != NULL, "not JSON (%s): %s", jerr.text, text);
    return j;
}

/* expected is JSON text; key order is ignored. */
void conf_assert_json_eq(const char *got, const char *expected, const char *what)
{
    json_t *g = conf_parse_json(got), *e = conf_parse_json(expected);
    int eq = json_equal(g, e);
    json_decref(g);
    json_decref(e);
    ck_assert_msg(eq, "%s differs:\n  got      %s\n  expected %s", what, got, expected);
}

void conf_assert_extra(convo_store *s, const char *tid, const char *expected)
{
    convo_history *h = conf_load(s, tid, NULL);
    const char *extra = convo_history_extra(h);
    ck_assert_ptr_nonnull(extra);
    json_t *obj = conf_parse_json(extra);
    ck_assert_msg(json_is_object(obj), "extra is not an object: %s", extra);
    json_decref(obj);
    conf_assert_json_eq(extra, expected, "extra");
    convo_history_free(h);
}

void conf_assert_message(const convo_history *h, size_t i, const char *bytes, size_t len,
                         const char *role, int64_t seq)
{
    ck_assert_msg(i < convo_history_count(h), "message %zu missing (count %zu)", i,
                  convo_history_count(h));
    size_t got_len = 0;
    const char *got = convo_history_message(h, i, &got_len);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(got_len == len && memcmp(got, bytes, len) == 0,
                  "message %zu not byte-exact:\n  got      (%zu) %.*s\n  expected (%zu) %.*s", i,
                  got_len, (int)(got_len > 300 ? 300 : got_len), got, len,
                  (int)(len > 300 ? 300 : len), bytes);
    ck_assert_msg(got[len] == '\0', "message %zu is not NUL-terminated", i);
    ck_assert_pstr_eq(convo_history_role(h, i), role);
    ck_assert_int_eq(convo_history_seq(h, i), seq);
}

/* Checks one page of a listing; returns how many of its ids start with prefix
 * (counting stops at the first that does not) and sets *left when one did not. */
size_t conf_check_page(const convo_thread_page *p, const char *after, size_t limit,
                       const char *prefix, int *left)
{
    size_t k = convo_thread_page_count(p), plen = strlen(prefix), in = 0;
    ck_assert_msg(k <= limit, "page of %zu ids for limit %zu", k, limit);
    const char *prev = after;
    for (size_t i = 0; i < k; i++) {
        const char *id = convo_thread_page_id(p, i);
        ck_assert_ptr_nonnull(id);
        ck_assert_msg(!prev || strcmp(prev, id) < 0, "ids not in byte order: '%s' then '%s'",
                      prev, id);
        prev = id;
        if (!*left && strncmp(id, prefix, plen) == 0)
            in++;
        else
            *left = 1;
    }
    const char *next = convo_thread_page_next(p);
    if (next)
        ck_assert_msg(k > 0 && strcmp(next, convo_thread_page_id(p, k - 1)) == 0,
                      "next '%s' is not the last id returned", next);
    return in;
}

char **conf_list_prefix(convo_store *s, const char *prefix, size_t limit, size_t *n)
{
    size_t count = 0, cap = 16;
    char **ids = malloc(cap * sizeof *ids);
    char *after = strdup(prefix);
    ck_assert(ids && after);
    for (int left = 0; !left;) {
        convo_thread_page *p = NULL;
        convo_error err;
        int rc = convo_thread_list(s, after, limit, &p, &err);
        ASSERT_OK(rc, err);
        size_t in = conf_check_page(p, after, limit, prefix, &left);
        for (size_t i = 0; i < in; i++) {
            if (count == cap)
                ck_assert((ids = realloc(ids, (cap *= 2) * sizeof *ids)) != NULL);
            ids[count++] = strdup(convo_thread_page_id(p, i));
        }
        const char *next = convo_thread_page_next(p);
        if (!next)
            left = 1;
        else if (!left) {
            free(after);
            after = strdup(next);
        }
        convo_thread_page_free(p);
    }
    free(after);
    *n = count;
    return ids;
}

void conf_ids_free(char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void conf_assert_listed(convo_store *s, const char *prefix, char **expected, size_t n,
                        size_t limit)
{
    qsort(expected, n, sizeof *expected, cmp_str);
    size_t got_n;
    char **got = conf_list_prefix(s, prefix, limit, &got_n);
    ck_assert_msg(got_n == n, "listed %zu threads under the prefix, expected %zu", got_n, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strcmp(got[i], expected[i]) == 0, "listing[%zu] is '%s', expected '%s'", i,
                      got[i], expected[i]);
    conf_ids_free(got, got_n);
}

void conf_save_extra_ok(convo_store *s, const char *tid, const char *patch)
{
    convo_error err;
    int rc = convo_save_extra(s, tid, patch, &err);
    ASSERT_OK(rc, err);
}

static void setup(void)
{
    conf_store = conf_open();
}

static void teardown(void)
{
    convo_close(conf_store);
    conf_store = NULL;
}

/* ------------------------------------------------- messages come back as sent */

const char *const conf_rt_msgs[] = {
    "{\"role\":\"user\",\"content\":\"hello\"}",
    "  {  \"content\" : \"spaces\" ,\n\t\"role\" :\"user\"  }\n ",
    "{\"z\":1,\"a\":2,\"role\":\"assistant\",\"m\":3}",
    "{\"role\":\"assistant\",\"text\":\"\\u00e9\\u65e5\\ud83d\\ude00 \\u00E9\"}",
    "{\"role\":\"user\",\"text\":\"\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80\"}",
    "{\"role\":\"tool_result\",\"a\":{\"b\":{\"c\":[1,[2,[3,{\"d\":null}]]]}},\"t\":true,\"f\":false}",
    "{\"role\":\"user\",\"c\":\"nul\\u0000inside\"}",
    "{\"role\":\"user\",\"c\":\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t\"}",
    "{\"role\":\"\xe3\x83\xa6\xe3\x83\xbc\xe3\x82\xb6\xe3\x83\xbc\"}",
    "{\"role\":\"0123456789012345678901234567890123456789012345678901234567890123\"}",
    "{\"role\":\"system\",\"$set\":{\"a.b\":1},\"\":\"empty key\",\"x.y\":[]}",
    "{\"role\":\"user\",\"n\":-9223372036854775808,\"r\":1.7976931348623157e308,\"t\":1e-400,"
    "\"z\":-0.0,\"e\":6.02E+23}",
    "{\"role\":\"tool\"}",
};
const char *const conf_rt_roles[] = {
    "user", "user", "assistant", "assistant", "user", "tool_result", "user", "user",
    "\xe3\x83\xa6\xe3\x83\xbc\xe3\x82\xb6\xe3\x83\xbc",
    "0123456789012345678901234567890123456789012345678901234567890123",
    "system", "user", "tool",
};
#define RT_N (sizeof conf_rt_msgs / sizeof *conf_rt_msgs)
const size_t conf_rt_n = RT_N;

static void assert_created_at(const convo_history *h, int64_t before, int64_t after)
{
    int64_t prev = INT64_MIN;
    for (size_t i = 0; i < convo_history_count(h); i++) {
        int64_t at = convo_history_created_at(h, i);
        ck_assert_msg(at >= before - CLOCK_SLACK_MICROS && at <= after + CLOCK_SLACK_MICROS,
                      "created_at %lld of message %zu is not near now (%lld)", (long long)at, i,
                      (long long)after);
        ck_assert_msg(at >= prev, "created_at decreases at message %zu", i);
        prev = at;
    }
}

START_TEST(test_roundtrip_bytes)
{
    char t[256];
    TID(t, "rt");
    int64_t before = now_micros();
    ck_assert_int_eq(conf_append(conf_store, t, conf_rt_msgs, RT_N), 0);
    int64_t after = now_micros();
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), RT_N);
    ck_assert_int_eq(convo_history_length(h), RT_N);
    for (size_t i = 0; i < RT_N; i++)
        conf_assert_message(h, i, conf_rt_msgs[i], strlen(conf_rt_msgs[i]), conf_rt_roles[i], (int64_t)i);
    assert_created_at(h, before, after);
    conf_assert_json_eq(convo_history_extra(h), "{}", "extra of a thread never given one");
    convo_history_free(h);
}
END_TEST

START_TEST(test_roundtrip_one_by_one)
{
    char t[256];
    TID(t, "rt1");
    int64_t before = now_micros();
    for (size_t i = 0; i < RT_N; i++)
        ck_assert_int_eq(conf_append(conf_store, t, &conf_rt_msgs[i], 1), (int64_t)i);
    int64_t after = now_micros();
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), RT_N);
    for (size_t i = 0; i < RT_N; i++)
        conf_assert_message(h, i, conf_rt_msgs[i], strlen(conf_rt_msgs[i]), conf_rt_roles[i], (int64_t)i);
    assert_created_at(h, before, after);
    convo_history_free(h);
}
END_TEST

/* One rule for messages and extra (issue 23.4): integers fit in signed 64 bits,
 * else CONVO_EINVAL and nothing stored; numbers that pass are kept as written. */
START_TEST(test_roundtrip_big_numbers)
{
    char t[256];
    TID(t, "big");
    const char *m[] = {"{\"role\":\"user\",\"max\":9223372036854775807,"
                       "\"min\":-9223372036854775808,\"f\":3.141592653589793238462643383279,"
                       "\"r\":123456789012345678901234567890.0}"};
    const char *big[] = {"{\"role\":\"user\",\"big\":123456789012345678901234567890}",
                         "{\"role\":\"user\",\"neg\":-9223372036854775809}"};
    convo_error err;
    for (size_t i = 0; i < 2; i++)
        ck_assert_int_eq(convo_append(conf_store, t, big + i, NULL, 1, NULL, NULL, &err),
                         CONVO_EINVAL);
    ck_assert_int_eq(convo_save_extra(conf_store, t, "{\"big\":18446744073709551616}", &err),
                     CONVO_EINVAL);
    convo_history *h;
    ck_assert_int_eq(convo_load(conf_store, t, NULL, &h, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(conf_append(conf_store, t, m, 1), 0);
    h = conf_load(conf_store, t, NULL);
    conf_assert_message(h, 0, m[0], strlen(m[0]), "user", 0);
    convo_history_free(h);
}
END_TEST

/* With explicit lengths only len bytes are taken: the buffer need not end in NUL. */
START_TEST(test_roundtrip_lengths)
{
    char t[256];
    TID(t, "len");
    const char buf[] = "{\"role\":\"user\",\"c\":1}GARBAGE{\"role\":\"assistant\"}";
    const char *msgs[] = {buf, buf + 28};
    size_t lens[] = {21, 20};
    convo_append_result res;
    convo_error err;
    int rc = convo_append(conf_store, t, msgs, lens, 2, NULL, &res, &err);
    ASSERT_OK(rc, err);
    convo_history *h = conf_load(conf_store, t, NULL);
    conf_assert_message(h, 0, buf, 21, "user", 0);
    conf_assert_message(h, 1, buf + 28, 20, "assistant", 1);
    convo_history_free(h);
}
END_TEST

START_TEST(test_seq_dense_across_batches)
{
    char t[256];
    TID(t, "dense");
    const char *m[] = {"{\"role\":\"user\",\"i\":0}", "{\"role\":\"user\",\"i\":1}",
                       "{\"role\":\"user\",\"i\":2}", "{\"role\":\"user\",\"i\":3}"};
    ck_assert_int_eq(conf_append(conf_store, t, m, 1), 0);
    ck_assert_int_eq(conf_append(conf_store, t, m, 4), 1);
    ck_assert_int_eq(conf_append(conf_store, t, m + 2, 2), 5);
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), 7);
    const size_t src[] = {0, 0, 1, 2, 3, 2, 3};
    for (size_t i = 0; i < 7; i++)
        conf_assert_message(h, i, m[src[i]], strlen(m[src[i]]), "user", (int64_t)i);
    convo_history_free(h);
}
END_TEST

static char *make_message(size_t len)
{
    static const char head[] = "{\"role\":\"user\",\"c\":\"", tail[] = "\"}";
    size_t fixed = sizeof head - 1 + sizeof tail - 1;
    ck_assert(len >= fixed);
    char *m = malloc(len + 1);
    ck_assert_ptr_nonnull(m);
    memcpy(m, head, sizeof head - 1);
    memset(m + sizeof head - 1, 'x', len - fixed);
    memcpy(m + len - (sizeof tail - 1), tail, sizeof tail);
    return m;
}

START_TEST(test_message_size_default_limit)
{
    char t[256];
    TID(t, "size");
    char *ok = make_message(CONVO_DEFAULT_MAX_MESSAGE_BYTES);
    char *big = make_message(CONVO_DEFAULT_MAX_MESSAGE_BYTES + 1);
    const char *batch[] = {"{\"role\":\"user\"}", big};
    convo_error err;
    ASSERT_FAILS(convo_append(conf_store, t, batch, NULL, 2, NULL, NULL, &err), err,
                 CONVO_ETOOLARGE);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
    const char *one[] = {ok};
    ck_assert_int_eq(conf_append(conf_store, t, one, 1), 0);
    convo_history *h = conf_load(conf_store, t, NULL);
    conf_assert_message(h, 0, ok, CONVO_DEFAULT_MAX_MESSAGE_BYTES, "user", 0);
    convo_history_free(h);
    free(ok);
    free(big);
}
END_TEST

static char **numbered_messages(size_t n, const char *fmt)
{
    char **m = calloc(n, sizeof *m);
    ck_assert_ptr_nonnull(m);
    for (size_t i = 0; i < n; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, fmt, i);
        ck_assert((m[i] = strdup(buf)) != NULL);
    }
    return m;
}

static void free_messages(char **m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(m[i]);
    free(m);
}

START_TEST(test_batch_default_limit)
{
    char t[256];
    TID(t, "batch");
    size_t n = CONVO_DEFAULT_MAX_BATCH_MESSAGES;
    char **m = numbered_messages(n + 1, "{\"role\":\"user\",\"i\":%zu}");
    convo_error err;
    ASSERT_FAILS(convo_append(conf_store, t, (const char *const *)m, NULL, n + 1, NULL, NULL, &err),
                 err, CONVO_ETOOLARGE);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
    ck_assert_int_eq(conf_append(conf_store, t, (const char *const *)m, n), 0);
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), n);
    for (size_t i = 0; i < n; i++)
        conf_assert_message(h, i, m[i], strlen(m[i]), "user", (int64_t)i);
    convo_history_free(h);
    free_messages(m, n + 1);
}
END_TEST

/* ------------------------------------------------------------- load options */

struct load_case {
    int64_t from, limit, tail;
    int64_t first, count;
};

static const struct load_case load_cases[] = {
    {0, 0, 0, 0, 10},  {3, 0, 0, 3, 7},   {0, 4, 0, 0, 4},  {3, 4, 0, 3, 4},
    {8, 4, 0, 8, 2},   {0, 0, 3, 7, 3},   {0, 2, 3, 7, 2},  {8, 0, 3, 8, 2},
    {2, 0, 3, 7, 3},   {0, 0, 20, 0, 10}, {0, 0, 10, 0, 10}, {10, 0, 0, 10, 0},
    {100, 0, 0, 100, 0}, {0, 100, 0, 0, 10}, {9, 1, 0, 9, 1}, {0, 1, 1, 9, 1},
    {5, 0, 20, 5, 5},  {3, INT64_MAX, 0, 3, 7}, {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, 0},
    {0, INT64_MAX, INT64_MAX, 0, 10},
};

START_TEST(test_load_options)
{
    char t[256];
    TID(t, "opts");
    char **m = numbered_messages(10, "{\"role\":\"user\",\"i\":%zu}");
    ck_assert_int_eq(conf_append(conf_store, t, (const char *const *)m, 10), 0);
    for (size_t c = 0; c < sizeof load_cases / sizeof *load_cases; c++) {
        const struct load_case *lc = &load_cases[c];
        convo_load_opts o = CONVO_LOAD_OPTS_INIT;
        o.from_seq = lc->from;
        o.limit = lc->limit;
        o.tail = lc->tail;
        convo_history *h = conf_load(conf_store, t, &o);
        ck_assert_msg((int64_t)convo_history_count(h) == lc->count,
                      "from %lld limit %lld tail %lld: %zu messages, expected %lld",
                      (long long)lc->from, (long long)lc->limit, (long long)lc->tail,
                      convo_history_count(h), (long long)lc->count);
        ck_assert_int_eq(convo_history_length(h), 10);
        for (int64_t i = 0; i < lc->count; i++)
            conf_assert_message(h, (size_t)i, m[lc->first + i], strlen(m[lc->first + i]), "user",
                                lc->first + i);
        convo_history_free(h);
    }
    free_messages(m, 10);
}
END_TEST

START_TEST(test_load_without_extra)
{
    char t[256];
    TID(t, "noextra");
    const char *m[] = {"{\"role\":\"user\"}"};
    conf_append(conf_store, t, m, 1);
    conf_save_extra_ok(conf_store, t, "{\"k\":1}");
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.with_extra = 0;
    convo_history *h = conf_load(conf_store, t, &o);
    ck_assert_int_eq(convo_history_count(h), 1);
    ck_assert_ptr_nonnull(convo_history_extra(h));
    convo_history_free(h);
    conf_assert_extra(conf_store, t, "{\"k\":1}");
}
END_TEST

START_TEST(test_load_bad_options)
{
    char t[256];
    TID(t, "badopts");
    const char *m[] = {"{\"role\":\"user\"}"};
    conf_append(conf_store, t, m, 1);
    convo_history *h = (convo_history *)1;
    convo_error err;
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.from_seq = -1;
    ASSERT_FAILS(convo_load(conf_store, t, &o, &h, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(h);
    o.from_seq = 0;
    o.limit = -1;
    ASSERT_FAILS(convo_load(conf_store, t, &o, &h, &err), err, CONVO_EINVAL);
    o.limit = 0;
    o.tail = -5;
    ASSERT_FAILS(convo_load(conf_store, t, &o, &h, &err), err, CONVO_EINVAL);
    convo_load_opts v0 = CONVO_LOAD_OPTS_INIT, v99 = CONVO_LOAD_OPTS_INIT;
    v0.version = 0;
    v99.version = 99;
    ASSERT_FAILS(convo_load(conf_store, t, &v0, &h, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_load(conf_store, t, &v99, &h, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_load(conf_store, t, NULL, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_load(NULL, t, NULL, &h, &err), err, CONVO_EINVAL);
}
END_TEST

START_TEST(test_load_unknown_thread)
{
    char t[256];
    TID(t, "nope");
    convo_history *h = (convo_history *)1;
    convo_error err;
    ASSERT_FAILS(convo_load(conf_store, t, NULL, &h, &err), err, CONVO_ENOTFOUND);
    ck_assert_ptr_null(h);
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.tail = 5;
    ASSERT_FAILS(convo_load(conf_store, t, &o, &h, &err), err, CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_load(conf_store, t, NULL, &h, NULL), CONVO_ENOTFOUND);
}
END_TEST

START_TEST(test_load_empty_thread)
{
    char t[256];
    TID(t, "empty");
    conf_save_extra_ok(conf_store, t, "{}");
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), 0);
    ck_assert_int_eq(convo_history_length(h), 0);
    conf_assert_json_eq(convo_history_extra(h), "{}", "extra");
    convo_history_free(h);
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.from_seq = 3;
    o.tail = 2;
    h = conf_load(conf_store, t, &o);
    ck_assert_int_eq(convo_history_count(h), 0);
    ck_assert_int_eq(convo_history_length(h), 0);
    convo_history_free(h);
}
END_TEST

/* ------------------------------------------------------------ all or nothing */

struct bad_message {
    const char *name;
    const char *bytes; /* NULL: a NULL pointer in the batch */
    size_t len;        /* 0: strlen(bytes) */
    int code;
};

#define NUL_INSIDE "{\"role\":\"user\",\"c\":\"a\0b\"}"
static const struct bad_message bad_messages[] = {
    {"not JSON", "{\"role\":\"user\"", 0, CONVO_EINVAL},
    {"garbage after", "{\"role\":\"user\"} x", 0, CONVO_EINVAL},
    {"two objects", "{\"role\":\"user\"}{\"role\":\"user\"}", 0, CONVO_EINVAL},
    {"array", "[{\"role\":\"user\"}]", 0, CONVO_EINVAL},
    {"string", "\"user\"", 0, CONVO_EINVAL},
    {"number", "42", 0, CONVO_EINVAL},
    {"null", "null", 0, CONVO_EINVAL},
    {"empty", "", 0, CONVO_EINVAL},
    {"blank", "   ", 0, CONVO_EINVAL},
    {"missing role", "{\"content\":\"hi\"}", 0, CONVO_EINVAL},
    {"ROLE is not role", "{\"Role\":\"user\"}", 0, CONVO_EINVAL},
    {"empty role", "{\"role\":\"\"}", 0, CONVO_EINVAL},
    {"numeric role", "{\"role\":5}", 0, CONVO_EINVAL},
    {"null role", "{\"role\":null}", 0, CONVO_EINVAL},
    {"object role", "{\"role\":{\"name\":\"user\"}}", 0, CONVO_EINVAL},
    {"array role", "{\"role\":[\"user\"]}", 0, CONVO_EINVAL},
    {"bool role", "{\"role\":true}", 0, CONVO_EINVAL},
    {"role of 65 bytes",
     "{\"role\":\"01234567890123456789012345678901234567890123456789012345678901234\"}", 0,
     CONVO_EINVAL},
    {"role of 66 bytes in 33 chars",
     "{\"role\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
     "\xc3\xa9\"}",
     0, CONVO_EINVAL},
    {"duplicate role", "{\"role\":\"user\",\"role\":\"system\"}", 0, CONVO_EINVAL},
    {"invalid UTF-8", "{\"role\":\"user\",\"c\":\"\xff\xfe\"}", 0, CONVO_EINVAL},
    {"overlong UTF-8", "{\"role\":\"user\",\"c\":\"\xc0\xaf\"}", 0, CONVO_EINVAL},
    {"UTF-8 surrogate", "{\"role\":\"user\",\"c\":\"\xed\xa0\x80\"}", 0, CONVO_EINVAL},
    {"truncated UTF-8", "{\"role\":\"user\",\"c\":\"\xe6\x97\"}", 0, CONVO_EINVAL},
    {"raw control char", "{\"role\":\"user\",\"c\":\"a\x01\"}", 0, CONVO_EINVAL},
    {"NUL byte inside", NUL_INSIDE, sizeof NUL_INSIDE - 1, CONVO_EINVAL},
    {"NUL byte after", "{\"role\":\"user\"}\0", 16, CONVO_EINVAL},
    {"lone surrogate escape", "{\"role\":\"user\",\"c\":\"\\ud800\"}", 0, CONVO_EINVAL},
    {"single quotes", "{'role':'user'}", 0, CONVO_EINVAL},
    {"trailing comma", "{\"role\":\"user\",}", 0, CONVO_EINVAL},
    {"NULL pointer", NULL, 0, CONVO_EINVAL},
};
#define BAD_N (sizeof bad_messages / sizeof *bad_messages)

static int append_with_bad(convo_store *s, const char *t, const struct bad_message *bad,
                           convo_error *err)
{
    const char *batch[] = {"{\"role\":\"user\",\"c\":\"good\"}", bad->bytes,
                           "{\"role\":\"assistant\",\"c\":\"good too\"}"};
    size_t lens[] = {strlen(batch[0]),
                     bad->len ? bad->len : (bad->bytes ? strlen(bad->bytes) : 0),
                     strlen(batch[2])};
    return convo_append(s, t, batch, lens, 3, NULL, NULL, err);
}

START_TEST(test_append_invalid_writes_nothing)
{
    const struct bad_message *bad = &bad_messages[_i];
    char t[256], name[32];
    snprintf(name, sizeof name, "new%d", _i);
    TID(t, name);
    convo_error err;
    int rc = append_with_bad(conf_store, t, bad, &err);
    ck_assert_msg(rc == bad->code, "%s: got %d (%s), expected %d", bad->name, rc,
                  convo_strerror(rc), bad->code);
    ASSERT_FAILS(rc, err, bad->code);
    ck_assert_msg(conf_length(conf_store, t) == -1, "%s: a failed append created the thread",
                  bad->name);

    snprintf(name, sizeof name, "existing%d", _i);
    TID(t, name);
    const char *two[] = {"{\"role\":\"user\"}", "{\"role\":\"assistant\"}"};
    conf_append(conf_store, t, two, 2);
    rc = append_with_bad(conf_store, t, bad, &err);
    ck_assert_msg(rc == bad->code, "%s: got %d", bad->name, rc);
    ck_assert_msg(conf_length(conf_store, t) == 2, "%s: a failed append changed the length",
                  bad->name);
    ck_assert_int_eq(conf_append(conf_store, t, two, 1), 2);
}
END_TEST

START_TEST(test_append_bad_arguments)
{
    char t[256];
    TID(t, "args");
    const char *m[] = {"{\"role\":\"user\"}"};
    convo_error err;
    ASSERT_FAILS(convo_append(conf_store, t, m, NULL, 0, NULL, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_append(conf_store, t, NULL, NULL, 1, NULL, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_append(NULL, t, m, NULL, 1, NULL, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_append(conf_store, NULL, m, NULL, 1, NULL, NULL, &err), err, CONVO_EINVAL);
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.version = 0;
    ASSERT_FAILS(convo_append(conf_store, t, m, NULL, 1, &o, NULL, &err), err, CONVO_EINVAL);
    o.version = 99;
    ASSERT_FAILS(convo_append(conf_store, t, m, NULL, 1, &o, NULL, &err), err, CONVO_EINVAL);
    convo_append_opts e = CONVO_APPEND_OPTS_INIT;
    e.expected_length = -2;
    ASSERT_FAILS(convo_append(conf_store, t, m, NULL, 1, &e, NULL, &err), err, CONVO_EINVAL);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
    /* res may be NULL */
    ck_assert_int_eq(convo_append(conf_store, t, m, NULL, 1, NULL, NULL, NULL), 0);
    ck_assert_int_eq(conf_length(conf_store, t), 1);
}
END_TEST

START_TEST(test_idempotency_key_validation)
{
    char t[256];
    TID(t, "keys");
    const char *m[] = {"{\"role\":\"user\"}"};
    convo_error err;
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = "";
    ASSERT_FAILS(convo_append(conf_store, t, m, NULL, 1, &o, NULL, &err), err, CONVO_EINVAL);
    char key[300];
    memset(key, 'k', 257);
    key[257] = '\0';
    o.idempotency_key = key;
    ASSERT_FAILS(convo_append(conf_store, t, m, NULL, 1, &o, NULL, &err), err, CONVO_EINVAL);
    o.idempotency_key = "bad\xff";
    ASSERT_FAILS(convo_append(conf_store, t, m, NULL, 1, &o, NULL, &err), err, CONVO_EINVAL);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
    key[256] = '\0';
    o.idempotency_key = key;
    convo_append_result r;
    ASSERT_OK(convo_append(conf_store, t, m, NULL, 1, &o, &r, &err), err);
    ASSERT_OK(convo_append(conf_store, t, m, NULL, 1, &o, &r, &err), err);
    ck_assert_int_eq(r.replayed, 1);
    ck_assert_int_eq(conf_length(conf_store, t), 1);
}
END_TEST

/* ------------------------------------------------------------------- limits */

START_TEST(test_limit_message_bytes)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.max_message_bytes = 100;
    convo_store *s = conf_open_ex(&so);
    char t[256];
    TID(t, "msg");
    char *exact = make_message(100), *over = make_message(101);
    const char *batch[] = {exact, over};
    convo_error err;
    ASSERT_FAILS(convo_append(s, t, batch, NULL, 2, NULL, NULL, &err), err, CONVO_ETOOLARGE);
    ck_assert_int_eq(conf_length(s, t), -1);
    ck_assert_int_eq(conf_append(s, t, batch, 1), 0);
    ASSERT_FAILS(convo_append(s, t, batch, NULL, 2, NULL, NULL, &err), err, CONVO_ETOOLARGE);
    ck_assert_int_eq(conf_length(s, t), 1);
    free(exact);
    free(over);
    convo_close(s);
}
END_TEST

START_TEST(test_limit_batch_messages)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.max_batch_messages = 5;
    convo_store *s = conf_open_ex(&so);
    char t[256];
    TID(t, "batch");
    char **m = numbered_messages(6, "{\"role\":\"user\",\"i\":%zu}");
    convo_error err;
    ASSERT_FAILS(convo_append(s, t, (const char *const *)m, NULL, 6, NULL, NULL, &err), err,
                 CONVO_ETOOLARGE);
    ck_assert_int_eq(conf_length(s, t), -1);
    ck_assert_int_eq(conf_append(s, t, (const char *const *)m, 5), 0);
    ASSERT_FAILS(convo_append(s, t, (const char *const *)m, NULL, 6, NULL, NULL, &err), err,
                 CONVO_ETOOLARGE);
    ck_assert_int_eq(conf_length(s, t), 5);
    free_messages(m, 6);
    convo_close(s);
}
END_TEST

/* A patch of `len` bytes: {"KEY":"ccc..."}. */
static char *make_patch(const char *key, char c, size_t len)
{
    size_t fixed = strlen(key) + 7;
    ck_assert(len >= fixed);
    char *p = malloc(len + 1);
    ck_assert_ptr_nonnull(p);
    int n = sprintf(p, "{\"%s\":\"", key);
    memset(p + n, c, len - fixed);
    strcpy(p + len - 2, "\"}");
    return p;
}

START_TEST(test_limit_extra_bytes)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.max_extra_bytes = 100;
    convo_store *s = conf_open_ex(&so);
    char t[256];
    TID(t, "extra");
    char *too_big = make_patch("c", 'z', 120), *a = make_patch("a", 'x', 68),
         *b = make_patch("b", 'y', 68), *a2 = make_patch("a", 'w', 68);
    convo_error err;
    ASSERT_FAILS(convo_save_extra(s, t, too_big, &err), err, CONVO_ETOOLARGE);
    ck_assert_int_eq(conf_length(s, t), -1);
    conf_save_extra_ok(s, t, a);
    /* the patch alone fits; merged with "a" it would not */
    ASSERT_FAILS(convo_save_extra(s, t, b, &err), err, CONVO_ETOOLARGE);
    conf_assert_extra(s, t, a);
    /* replacing a key keeps the merged object small */
    conf_save_extra_ok(s, t, a2);
    conf_assert_extra(s, t, a2);
    free(too_big);
    free(a);
    free(b);
    free(a2);
    convo_close(s);
}
END_TEST

/* A value near the default 1 MiB limit round-trips; growing past it fails whole. */
START_TEST(test_extra_default_limit)
{
    char t[256];
    TID(t, "big");
    char *big = make_patch("big", 'b', CONVO_DEFAULT_MAX_EXTRA_BYTES - 100);
    char *more = make_patch("more", 'm', 300);
    conf_save_extra_ok(conf_store, t, big);
    conf_assert_extra(conf_store, t, big);
    convo_error err;
    ASSERT_FAILS(convo_save_extra(conf_store, t, more, &err), err, CONVO_ETOOLARGE);
    conf_assert_extra(conf_store, t, big);
    char *over = make_patch("x", 'o', CONVO_DEFAULT_MAX_EXTRA_BYTES + 1);
    ASSERT_FAILS(convo_save_extra(conf_store, t, over, &err), err, CONVO_ETOOLARGE);
    conf_save_extra_ok(conf_store, t, "{\"big\":1}");
    conf_save_extra_ok(conf_store, t, more);
    char *want = malloc(strlen(more) + 16);
    sprintf(want, "{\"big\":1,%s", more + 1);
    conf_assert_extra(conf_store, t, want);
    free(want);
    free(big);
    free(more);
    free(over);
}
END_TEST

START_TEST(test_limit_roles)
{
    const char *const roles[] = {"user", "assistant", NULL};
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.roles = roles;
    convo_store *s = conf_open_ex(&so);
    char t[256];
    TID(t, "roles");
    const char *batch[] = {"{\"role\":\"user\"}", "{\"role\":\"system\"}"};
    convo_error err;
    ASSERT_FAILS(convo_append(s, t, batch, NULL, 2, NULL, NULL, &err), err, CONVO_EINVAL);
    ck_assert_int_eq(conf_length(s, t), -1);
    const char *ok[] = {"{\"role\":\"user\"}", "{\"role\":\"assistant\"}"};
    ck_assert_int_eq(conf_append(s, t, ok, 2), 0);
    const char *near[] = {"{\"role\":\"users\"}"};
    ASSERT_FAILS(convo_append(s, t, near, NULL, 1, NULL, NULL, &err), err, CONVO_EINVAL);
    ck_assert_int_eq(conf_length(s, t), 2);
    convo_close(s);
}
END_TEST

START_TEST(test_store_opts_version)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    convo_store *s = (convo_store *)1;
    convo_error err;
    so.version = 0;
    ASSERT_FAILS(convo_open_ex(&s, conf_url, &so, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(s);
    so.version = 99;
    ASSERT_FAILS(convo_open_ex(&s, conf_url, &so, &err), err, CONVO_EINVAL);
}
END_TEST

/* ---------------------------------------------------------------- thread ids */

START_TEST(test_thread_id_invalid)
{
    char long_id[CONVO_MAX_THREAD_ID_BYTES + 2];
    memset(long_id, 'a', CONVO_MAX_THREAD_ID_BYTES + 1);
    long_id[CONVO_MAX_THREAD_ID_BYTES + 1] = '\0';
    const char *bad[] = {"", NULL, long_id, "a\x01" "b", "a\nb", "a\tb", "a\rb", "a\x7f",
                         "a\xc2\x85" "b", "\xc2\x9f", "\x1b[0m", "a\xff", "\xc0\xaf",
                         "\xed\xa0\x80", "\xe6\x97", "\xf4\x90\x80\x80"};
    char ok[256];
    TID(ok, "ok");
    conf_append(conf_store, ok, conf_three, 1);
    convo_history *h;
    convo_error err;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ASSERT_FAILS(convo_append(conf_store, bad[i], conf_three, NULL, 1, NULL, NULL, &err), err,
                     CONVO_EINVAL);
        ASSERT_FAILS(convo_load(conf_store, bad[i], NULL, &h, &err), err, CONVO_EINVAL);
        ASSERT_FAILS(convo_save_extra(conf_store, bad[i], "{}", &err), err, CONVO_EINVAL);
        ASSERT_FAILS(convo_thread_delete(conf_store, bad[i], &err), err, CONVO_EINVAL);
        ASSERT_FAILS(convo_thread_fork(conf_store, ok, bad[i], -1, &err), err, CONVO_EINVAL);
        ASSERT_FAILS(convo_thread_fork(conf_store, bad[i], ok, -1, &err), err, CONVO_EINVAL);
    }
}
END_TEST

static const char *const odd_names[] = {
    " spaces ", ":", "a:b:c", "{x}", "}{", "/", "a/b/", "\"", "'", "\\", "*", "?", "[a-z]",
    "%41", "%", "+", "#", "&", "=", "$", ".", "..", "a.b", "__", "\xc2\xa0",
    "\xe2\x80\xa8", "\xc3\xbc\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80", "-", "a,b", "a;b", "~",
    "SELECT", "' OR '1'='1", "$where", "{\"$gt\":\"\"}",
};
#define ODD_N (sizeof odd_names / sizeof *odd_names)

START_TEST(test_thread_id_roundtrip)
{
    char p[256];
    TID(p, "");
    const char *names[ODD_N + 1];
    memcpy(names, odd_names, sizeof odd_names);
    char longest[CONVO_MAX_THREAD_ID_BYTES + 1];
    size_t plen = strlen(p);
    memset(longest, 'x', CONVO_MAX_THREAD_ID_BYTES - plen);
    longest[CONVO_MAX_THREAD_ID_BYTES - plen] = '\0';
    names[ODD_N] = longest;
    char **ids = calloc(ODD_N + 1, sizeof *ids);
    for (size_t i = 0; i <= ODD_N; i++) {
        ids[i] = malloc(plen + strlen(names[i]) + 1);
        sprintf(ids[i], "%s%s", p, names[i]);
        char m[64];
        snprintf(m, sizeof m, "{\"role\":\"user\",\"i\":%zu}", i);
        const char *one[] = {m};
        ck_assert_int_eq(conf_append(conf_store, ids[i], one, 1), 0);
        conf_save_extra_ok(conf_store, ids[i], "{\"k\":1}");
    }
    ck_assert_int_eq(strlen(ids[ODD_N]), CONVO_MAX_THREAD_ID_BYTES);
    for (size_t i = 0; i <= ODD_N; i++) {
        char m[64];
        snprintf(m, sizeof m, "{\"role\":\"user\",\"i\":%zu}", i);
        convo_history *h = conf_load(conf_store, ids[i], NULL);
        ck_assert_msg(convo_history_count(h) == 1, "thread '%s' has %zu messages", names[i],
                      convo_history_count(h));
        conf_assert_message(h, 0, m, strlen(m), "user", 0);
        convo_history_free(h);
    }
    conf_assert_listed(conf_store, p, ids, ODD_N + 1, 8);
    char dst[600];
    snprintf(dst, sizeof dst, "%s%s", p, "fork{of}:\"odd\"");
    convo_error err;
    ASSERT_OK(convo_thread_fork(conf_store, ids[3], dst, -1, &err), err);
    ck_assert_int_eq(conf_length(conf_store, dst), 1);
    for (size_t i = 0; i <= ODD_N; i++)
        ASSERT_OK(convo_thread_delete(conf_store, ids[i], &err), err);
    size_t n;
    char **left = conf_list_prefix(conf_store, p, 100, &n);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(left[0], dst);
    conf_ids_free(left, n);
    conf_ids_free(ids, ODD_N + 1);
}
END_TEST

/* -------------------------------------------------------------- opening */

START_TEST(test_open_works)
{
    const char *name = convo_store_driver(conf_store);
    ck_assert_ptr_nonnull(name);
    int listed = 0;
    for (const char *const *d = convo_drivers(); *d; d++)
        listed |= strcmp(*d, name) == 0;
    ck_assert_msg(listed, "driver %s is not in convo_drivers()", name);
    convo_close(NULL);
}
END_TEST

/* --------------------------------------------------------------------- main */

static void make_prefix(void)
{
    unsigned char r[6] = {0};
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r) {
        unsigned long x = (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16);
        memcpy(r, &x, sizeof r < sizeof x ? sizeof r : sizeof x);
    }
    if (fd >= 0)
        close(fd);
    snprintf(conf_prefix, sizeof conf_prefix, "ct%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
             r[3], r[4], r[5]);
}

/* memory: (and sqlite::memory:) give a new, empty store on every open. */
static void detect_private(const char **driver)
{
    convo_store *s = NULL;
    *driver = "?";
    if (convo_open(&s, conf_url, NULL) == 0) {
        *driver = convo_store_driver(s);
        conf_private = strcmp(*driver, "memory") == 0 || strstr(conf_url, ":memory:") != NULL;
        convo_close(s);
    } else {
        conf_private = strncmp(conf_url, "memory:", 7) == 0 || strstr(conf_url, ":memory:");
    }
}

int conf_buf_write(void *ctx, const void *b, size_t n)
{
    conf_buf *m = ctx;
    char *grown = realloc(m->data, m->len + n);
    ck_assert_ptr_nonnull(grown);
    m->data = grown;
    memcpy(m->data + m->len, b, n);
    m->len += n;
    return 0;
}

long conf_buf_read(void *ctx, void *b, size_t n)
{
    conf_buf *m = ctx;
    size_t k = m->len - m->pos < n ? m->len - m->pos : n;
    memcpy(b, m->data + m->pos, k);
    m->pos += k;
    return (long)k;
}

TCase *conf_tcase(Suite *s, const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return tc;
}

static void add_data_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "roundtrip");
    tcase_add_test(tc, test_open_works);
    tcase_add_test(tc, test_roundtrip_bytes);
    tcase_add_test(tc, test_roundtrip_one_by_one);
    tcase_add_test(tc, test_roundtrip_big_numbers);
    tcase_add_test(tc, test_roundtrip_lengths);
    tcase_add_test(tc, test_seq_dense_across_batches);
    tcase_add_test(tc, test_message_size_default_limit);
    tcase_add_test(tc, test_batch_default_limit);
    tc = conf_tcase(s, "load");
    tcase_add_test(tc, test_load_options);
    tcase_add_test(tc, test_load_without_extra);
    tcase_add_test(tc, test_load_bad_options);
    tcase_add_test(tc, test_load_unknown_thread);
    tcase_add_test(tc, test_load_empty_thread);
    tc = conf_tcase(s, "validation");
    tcase_add_loop_test(tc, test_append_invalid_writes_nothing, 0, (int)BAD_N);
    tcase_add_test(tc, test_append_bad_arguments);
    tcase_add_test(tc, test_idempotency_key_validation);
    tcase_add_test(tc, test_thread_id_invalid);
    tcase_add_test(tc, test_thread_id_roundtrip);
    tc = conf_tcase(s, "limits");
    tcase_add_test(tc, test_limit_message_bytes);
    tcase_add_test(tc, test_limit_batch_messages);
    tcase_add_test(tc, test_limit_extra_bytes);
    tcase_add_test(tc, test_limit_roles);
    tcase_add_test(tc, test_extra_default_limit);
    tcase_add_test(tc, test_store_opts_version);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s URL   (e.g. memory: or sqlite:/tmp/t.db)\n", argv[0]);
        return 2;
    }
    conf_url = argv[1];
    make_prefix();
    const char *driver;
    detect_private(&driver);
    char name[64];
    snprintf(name, sizeof name, "conformance %s", driver);
    Suite *s = suite_create(name);
    add_data_tests(s);
    conf_add_idempotency_tests(s);
    conf_add_thread_tests(s);
    conf_add_store_tests(s);
    conf_add_rewrite_tests(s);
    conf_add_items_tests(s);
    conf_add_known_tests(s);
    conf_add_list_items_tests(s);
    conf_add_list_only_tests(s);
    conf_add_prefix_tests(s);
    conf_add_thread_index_tests(s);
    conf_add_copy_tests(s);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
