/* mongo_util.h — what the MongoDB driver's own checks (tests/mongo.c,
 * tests/mongo_checkpoint.c, one program: tests/mongo_extra) share: the run's
 * database and each test's prefix, a raw libmongoc client to look at and forge
 * documents, and helpers that assert as they go. */
#ifndef CONVO_TESTS_MONGO_UTIL_H
#define CONVO_TESTS_MONGO_UTIL_H

#include <check.h>
#include <convo.h>
#include <jansson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>

extern const char *base_url; /* CONVO_TEST_MONGO_URL */
extern char database[40];    /* fresh for each run */
extern char prefix[40];      /* fresh for each test */
extern mongoc_client_t *raw; /* to look at and forge documents */
extern convo_error err;

int64_t now_ms(void);
void sleep_ms(long ms);
char *url_with(const char *params);
convo_store *open_store(const char *params);
int open_rc(const char *params);
mongoc_collection_t *coll(const char *suffix);
/* The raw helpers take (and destroy) their bson_t arguments. */
bson_t *raw_find(const char *suffix, bson_t *filter);
void profile_level(int level);
int64_t raw_count(const char *suffix, bson_t *filter);
void raw_insert(const char *suffix, bson_t *doc);
void raw_update(const char *suffix, bson_t *filter, bson_t *update);
void raw_delete(const char *suffix, bson_t *filter);
void new_generation(const char *id, bson_oid_t *g);
bson_t *of_thread(const char *id);
void thread_generation(const char *id, bson_oid_t *g);
int64_t append_batch(convo_store *s, const char *id, int w, int b, int n);
int64_t length_of(convo_store *s, const char *id);
int listed(convo_store *s, const char *id);
json_t *extra_of(convo_store *s, const char *id);
int64_t verify_thread(convo_store *s, const char *id);
void verify_raw_chains(void);
void verify_checkpoints(convo_store *s, const char *id);
void setup(void);
void teardown(void);
void assert_field(const bson_t *doc, const char *path, bson_type_t type);
bson_t *index_named(const char *suffix, const char *name);
char *big_message(size_t size);
bool standin(void);
void put_checkpoint(convo_store *s, const char *thread, const char *id, const char *value);
int64_t thread_docs(const char *suffix, const char *id);
void forge_thread(const char *id, const bson_oid_t *g, bool live, bool forking, int64_t created);
void forge_batch(const bson_oid_t *g, int64_t s, int n, int w);
void forge_fence(const bson_oid_t *g, int64_t at);
int64_t generation_batches(const bson_oid_t *g);
/* A checkpoint put with n messages made as append_batch makes them (see
 * mongo_util.c); verify_log_lengths checks what it stored. */
int put_log(convo_store *s, const char *thread, const char *id, int w, int b, int n,
            int64_t expected, const char *meta, convo_error *e);
int64_t unsettled(const char *thread);
int verify_log_lengths(convo_store *s, const char *id);

/* tests/mongo_checkpoint.c, tests/mongo_rewrite.c: their test cases, each with
 * setup and teardown. */
void add_checkpoint_cases(Suite *s);
void add_rewrite_cases(Suite *s);
void add_index_cases(Suite *s); /* tests/mongo_index.c */

#endif
