/* conformance.h — what the conformance suite's tests share: the store URL
 * under test, the per-run thread id prefix, and assertion helpers written
 * against the public API only (convo.h), with jansson to compare JSON. */
#ifndef CONVO_CONFORMANCE_H
#define CONVO_CONFORMANCE_H

#include <check.h>
#include <convo.h>
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
/* conformance_threads.c: the thread index (convo_thread_list_ex). */
void conf_add_thread_index_tests(Suite *s);

#endif
