/* conformance.h — what the conformance suite's tests share: the store URL
 * under test, the per-run thread id prefix, and assertion helpers written
 * against the public API only (convo.h), with jansson to compare JSON. */
#ifndef CONVO_CONFORMANCE_H
#define CONVO_CONFORMANCE_H

#include <check.h>
#include <convo.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The store under test, fixed for the whole run. */
extern const char *conf_url;
/* Random per run, so runs sharing a server never see each other's threads. */
extern char conf_prefix[64];
/* 1 when every convo_open of conf_url is a new, empty store (memory:, sqlite::memory:):
 * tests that need two handles or two processes on the same data skip then. */
extern int conf_private;
/* The store opened by the fixture of every test case. */
extern convo_store *conf_store;

/* Tests that need two handles or processes on the same data stop here on stores
 * where every open is new (memory:); Check has no "skipped" state. */
#define SKIP_IF_PRIVATE()                                                                      \
    do {                                                                                       \
        if (conf_private)                                                                      \
            return;                                                                            \
    } while (0)

/* A thread id unique to this run and test: "<prefix>/<function>/<name>". */
#define TID(buf, name) conf_tid((buf), sizeof(buf), __func__, (name))
void conf_tid(char *buf, size_t size, const char *fn, const char *name);

convo_store *conf_open(void);
convo_store *conf_open_ex(const convo_store_opts *opts);

/* rc must be `code`, and err must carry the code and a non-empty one-line message. */
#define ASSERT_FAILS(rc, err, code) conf_assert_fails((rc), &(err), (code), __FILE__, __LINE__)
void conf_assert_fails(int rc, const convo_error *err, int code, const char *file, int line);
#define ASSERT_OK(rc, err)                                                                    \
    ck_assert_msg((rc) == 0, "expected success, got %d (%s): %s", (rc), convo_strerror(rc),  \
                  (err).message)

/* text parsed as JSON (any value); asserts it is JSON. */
json_t *conf_parse_json(const char *text);
/* Appends NUL-terminated messages; asserts success and returns the first seq. */
int64_t conf_append(convo_store *s, const char *tid, const char *const *msgs, size_t n);
/* Loads with opts (NULL = all); asserts success. */
convo_history *conf_load(convo_store *s, const char *tid, const convo_load_opts *opts);
/* Messages in the thread, or -1 when it does not exist. */
int64_t conf_length(convo_store *s, const char *tid);
/* The thread's extra must equal the JSON object `expected` (key order ignored). */
void conf_assert_extra(convo_store *s, const char *tid, const char *expected);
/* Message i of h must be exactly `bytes` (len bytes) with role `role` and seq `seq`. */
void conf_assert_message(const convo_history *h, size_t i, const char *bytes, size_t len,
                         const char *role, int64_t seq);

/* convo_save_extra(s, tid, patch), asserted to succeed. */
void conf_save_extra_ok(convo_store *s, const char *tid, const char *patch);
/* dst's messages must be src's first `upto` (bytes, roles, seqs). */
void conf_assert_same_prefix(convo_store *s, const char *src, const char *dst, int64_t upto);
/* Messages of every shape a driver must give back byte for byte (conf_rt_n of them). */
extern const char *const conf_rt_msgs[];
extern const char *const conf_rt_roles[]; /* their roles */
extern const size_t conf_rt_n;

/* The highest code point usable in an id: threads under it sort after everything else. */
#define CONF_HIGH "\xf4\x8f\xbf\xbd"
/* got and expected (JSON texts) must be equal, key order ignored; what names got. */
void conf_assert_json_eq(const char *got, const char *expected, const char *what);
/* convo_append with an idempotency key (or NULL) and an expected length (or -1). */
int conf_append_opts(convo_store *s, const char *t, const char *const *m, size_t n,
                     const char *key, int64_t expected, convo_append_result *res,
                     convo_error *err);
/* r must say: first seq `first`, `count` messages, replayed or not. */
void conf_assert_result(const convo_append_result *r, int64_t first, size_t count, int replayed);
/* Three messages of three roles. */
extern const char *const conf_three[];
/* Checks one page of a listing; returns how many of its ids start with prefix
 * (counting stops at the first that does not) and sets *left when one did not. */
size_t conf_check_page(const convo_thread_page *p, const char *after, size_t limit,
                       const char *prefix, int *left);
/* The threads under prefix, listed `limit` at a time, must be exactly expected (n, any order). */
void conf_assert_listed(convo_store *s, const char *prefix, char **expected, size_t n,
                        size_t limit);
/* Thread ids starting with prefix, listed page by page from `after` = prefix
 * with page size `limit`, checking every page's invariants on the way.
 * Returns a malloc'd array (free with conf_ids_free) and its size in *n. */
char **conf_list_prefix(convo_store *s, const char *prefix, size_t limit, size_t *n);
void conf_ids_free(char **ids, size_t n);

/* An in-memory dump for convo_export / convo_import (free data when done). */
typedef struct conf_buf {
    char *data;
    size_t len, pos;
} conf_buf;
int conf_buf_write(void *ctx, const void *b, size_t n);
long conf_buf_read(void *ctx, void *b, size_t n);

/* A test case of the suite with the fixture that opens conf_store. */
TCase *conf_tcase(Suite *s, const char *name);
/* conformance_rewrite.c: convo_replace_tail and the thread generation. */
void conf_add_rewrite_tests(Suite *s);
/* conformance_thread_ops.c: extra, the id listing, delete and fork. */
void conf_add_thread_tests(Suite *s);
/* conformance_store.c: errors, URLs, then concurrency, then persistence. */
void conf_add_store_tests(Suite *s);
/* conformance_concurrency.c: concurrent writers, in threads and in processes. */
void conf_add_concurrency_tests(Suite *s);
/* conformance_idempotency.c: idempotency keys and the expected length of appends. */
void conf_add_idempotency_tests(Suite *s);
/* conformance_items.c: log references (convo_items_in). */
void conf_add_items_tests(Suite *s);
/* conformance_known.c: reads leaving out the log a caller holds (convo_checkpoint_get_ex). */
void conf_add_known_tests(Suite *s);
/* conformance_list_items.c: lists without their channels' items (list opts v4). */
void conf_add_list_items_tests(Suite *s);
/* conformance_list_only.c: lists of one channel and its writes, for a walk (list opts v5). */
void conf_add_list_only_tests(Suite *s);
/* conformance_prefix.c: channel lists given as a log prefix and what follows (v5 puts). */
void conf_add_prefix_tests(Suite *s);
/* conformance_threads.c: the thread index (convo_thread_list_ex). */
void conf_add_thread_index_tests(Suite *s);
/* conformance_copy.c: copy_thread (fork with checkpoints), checkpoint delete, prune. */
void conf_add_copy_tests(Suite *s);

#endif
