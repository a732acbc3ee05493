/* postgres.h — what the files of tests/postgres_extra share: the test server,
 * schemas unique to a run, a libpq connection behind the driver's back
 * (tests/postgres.c), and old layouts with their data
 * (tests/postgres_schema.c); each file's function that adds its test cases. */
#ifndef CONVO_TESTS_POSTGRES_H
#define CONVO_TESTS_POSTGRES_H

#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <stdint.h>

/* The driver's schema version, and every version a schema it made records. */
#define PG_SCHEMA_VERSION 42
#define PG_SCHEMA_VERSIONS "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42"

extern const char *base_url; /* CONVO_TEST_POSTGRES_URL */
extern unsigned run_id;
extern const char *msg1;     /* a user message */
/* What a version 5 store held, written with its own functions. */
extern const char v5_data[];

/* base_url with more query parameters ("a=b&c=d"); a static buffer of 4. */
const char *url_with(const char *params);
/* A schema name unique to this run ("pgx_RUN_name"); a static buffer of 4. */
const char *schema_name(const char *name);
/* base_url with schema=schema_name(name) and more parameters (or NULL). */
const char *schema_url(const char *name, const char *more);
convo_store *open_ok(const char *url);
/* A plain libpq connection to the test server, for looking behind the driver. */
PGconn *admin(void);
/* Runs sql; the first value of the first row as a malloc'd string, or NULL. */
char *query1(PGconn *pg, const char *sql);
long query_long(PGconn *pg, const char *sql);
void drop_schema(const char *name);
/* sql with @S replaced by the quoted schema, run on pg (or the test fails). */
void exec_in_schema(PGconn *pg, const char *schema, const char *sql);
/* An empty schema brought to `version` by the migrations' .sql files. */
void schema_at_version(const char *name, int version);
/* Every row of every table of schema `name` as text, one table a line, in the
 * columns of version 5 (layout 0), 6 (1), 7 to 17 (2), 18 (3), 19 to 23 (4) or 24 (5). */
char *rows_as_text(PGconn *pg, const char *name, int layout);
/* Rows left in any table for thread in schema `name`. */
long rows_of(PGconn *pg, const char *name, const char *thread);
/* 1 when thread_list shows thread. */
int list_has(convo_store *s, const char *thread);

int append1(convo_store *s, const char *thread, convo_error *err);
/* The thread's length, its seqs checked dense. */
int64_t length_of(convo_store *s, const char *thread);
/* A checkpoint with one channel value ("ch" version "v1"). */
void put_checkpoint(convo_store *s, const char *thread, const char *id);
/* Waits (up to 5 s) until a session of application `app` waits for a lock. */
void wait_for_lock_wait(const char *app);
double seconds_now(void);
/* The text of drivers/postgres/FILE, malloc'd (tests/postgres_refs.c). */
char *statement_text(const char *file);

/* tests/postgres_url.c: URL parameters, schema names, passwords in no message. */
void postgres_add_url_tests(Suite *s);
/* tests/postgres_ttl.c: ttl, deadlines and sweep; HOT appends. */
void postgres_add_ttl_tests(Suite *s);
/* tests/postgres_data.c: bytes kept, corrupt checkpoints, SQLSTATEs, one transaction. */
void postgres_add_data_tests(Suite *s);
/* tests/postgres_concurrency.c: races across processes, a shared pool. */
void postgres_add_concurrency_tests(Suite *s);
/* tests/postgres_failures.c: lost connections, timeouts, the restart case. */
void postgres_add_failure_tests(Suite *s);
/* tests/postgres_races.c: an append racing a pop, rewrite or delete; processes on one thread. */
void postgres_add_race_tests(Suite *s);
/* tests/postgres_cost.c: an append next to a raw INSERT. */
void postgres_add_cost_tests(Suite *s);
/* tests/postgres_corrupt.c: rows that do not decode are CONVO_ECORRUPT, reads and writes. */
void postgres_add_corrupt_tests(Suite *s);
/* tests/postgres_schema.c: schema versions, migrations, the .sql files. */
void postgres_add_schema_tests(Suite *s);
/* tests/postgres_rewrite.c: the tail rewrite and the generation (v8). */
void postgres_add_rewrite_tests(Suite *s);
/* tests/postgres_index.c: the thread index (v11). */
void postgres_add_index_tests(Suite *s);
/* tests/postgres_refs.c: the put with log references (v14, v15). */
void postgres_add_refs_tests(Suite *s);
/* tests/postgres_append.c: which statement an append runs. */
void postgres_add_append_tests(Suite *s);
/* tests/postgres_dense.c: checkpoints stored densely (v18, v19, v21). */
void postgres_add_dense_tests(Suite *s);
/* tests/postgres_compact.c: versions as one value, metadata as json text (v23). */
void postgres_add_compact_tests(Suite *s);
/* tests/postgres_inline.c: small channel values in the checkpoint row (v29). */
void postgres_add_inline_tests(Suite *s);
/* tests/postgres_packed.c: pending writes as packed elements (v30). */
void postgres_add_packed_tests(Suite *s);
/* tests/postgres_swaps.c: a put's swaps update each row once (v35). */
void postgres_add_swaps_tests(Suite *s);
/* tests/postgres_meta.c: metadata with LangGraph's fragments as bytes (v36). */
void postgres_add_meta_tests(Suite *s);
/* tests/postgres_repeats.c: versions without the repeats (v37). */
void postgres_add_repeats_tests(Suite *s);
/* tests/postgres_lookup.c: a put's look-up beyond its parent bounded (v38). */
void postgres_add_lookup_tests(Suite *s);
/* tests/postgres_writes_short.c: pending writes with short fields (v39). */
void postgres_add_writes_short_tests(Suite *s);
/* tests/postgres_readback.c */
void postgres_add_readback_tests(Suite *s);
/* tests/postgres_fill.c: the B-trees in put and append order at fillfactor 100 (v40). */
void postgres_add_fill_tests(Suite *s);
/* tests/postgres_cold.c: channel_vals_proc(), the PL/pgSQL channel_vals() (v41). */
void postgres_add_cold_tests(Suite *s);
/* tests/postgres_preview.c: the thread row's copies of its last message and extra (v20). */
void postgres_add_preview_tests(Suite *s);
/* tests/postgres_expiry.c: threads_by_expiry only where a ttl opener opened (v26). */
void postgres_add_expiry_tests(Suite *s);
/* tests/postgres_segments.c: sealed checkpoint segments (v42). */
void postgres_add_segments_tests(Suite *s);

#endif
