/* threads.c — the PostgreSQL driver's thread calls: append and the tail
 * rewrite (each one statement, or a function of the schema for idempotency
 * keys and what that statement cannot decide), load, save_extra, delete, list
 * and fork. */
#include "config.h"
#include "pg_int.h"
#include <stdlib.h>
#include <string.h>

/* The one-statement append (ST_APPEND_PLAIN, _ONE, _MANY): an update of the
 * thread row; *done is 0 when the thread is missing, the length or generation
 * is not the expected one or the thread's deadline has passed (for
 * ST_APPEND_PLAIN: when it has a deadline at all). */
static int append_fast(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                       size_t n, int64_t at_micros, const convo_append_opts *opts, int *done,
                       convo_append_result *res, convo_error *err)
{
    char at[8], second[8], expected[8], generation[8];
    put64(at, (uint64_t)at_micros);
    int64_t into = at_micros % LISTED_SECOND_MICROS; /* below 0 before 2000 */
    put64(second, (uint64_t)(at_micros - (into < 0 ? into + LISTED_SECOND_MICROS : into)));
    put64(expected, (uint64_t)opts->expected_length);
    put64(generation, (uint64_t)opts->expected_generation);
    /* the plain statement's $5 is the second; the others' $8 */
    const char *values[8] = {thread_id, msgs[0].bytes, msgs[0].role, at, expected, b->ttl,
                             generation, second};
    int lens[8] = {(int)strlen(thread_id), (int)msgs[0].len, (int)strlen(msgs[0].role), 8, 8,
                   TTL_LEN, 8, 8};
    char *bodies = NULL, *roles = NULL;
    int rc = n > 1 ? convo__pg_encode_batch(msgs, n, &bodies, &lens[1], &roles, &lens[2])
                   : msgs[0].len >= (size_t)1 << 30 ? CONVO_ETOOLARGE : 0;
    if (rc != 0)
        return convo__pg_too_large(rc, err);
    if (n > 1) {
        values[1] = bodies;
        values[2] = roles;
    }
    /* the common call asks for no condition: a statement without them (and,
     * its message short enough to be the preview, without the cap) */
    int plain = n == 1 && opts->expected_length < 0 && opts->expected_generation < 0 &&
                !b->ttl && msgs[0].len <= PREVIEW_MAX;
    if (plain) {
        values[4] = second;
        lens[4] = 8;
    }
    PGresult *r;
    rc = convo__pg_run(b, plain ? ST_APPEND_PLAIN : n == 1 ? ST_APPEND_ONE : ST_APPEND_MANY,
                       values, lens, &r, err);
    free(bodies);
    free(roles);
    if (rc != 0)
        return rc;
    *done = PQntuples(r) == 1;
    if (*done) {
        res->first_seq = convo__pg_get_int(r, 0, 0);
        res->count = n;
        res->replayed = 0;
    }
    PQclear(r);
    return 0;
}

/* @S.append(): claims the thread (creating it, or starting it afresh when its
 * deadline has passed), checks the idempotency key, then the length and the
 * generation. */
static int append_function(convo_backend *b, const char *thread_id,
                           const convo_message_in *msgs, size_t n, const char *at,
                           const convo_append_opts *opts, convo_append_result *res,
                           convo_error *err)
{
    const char *key = opts->idempotency_key;
    char expected[8], generation[8];
    put64(expected, (uint64_t)opts->expected_length);
    put64(generation, (uint64_t)opts->expected_generation);
    int lens[8] = {(int)strlen(thread_id), 0, 0, 8, key ? (int)strlen(key) : 0, 8, 8, TTL_LEN};
    char *bodies, *roles;
    int rc = convo__pg_encode_batch(msgs, n, &bodies, &lens[1], &roles, &lens[2]);
    if (rc != 0)
        return convo__pg_too_large(rc, err);
    const char *values[8] = {thread_id, bodies, roles, at, key, expected, generation, b->ttl};
    PGresult *r;
    rc = convo__pg_run(b, ST_APPEND, values, lens, &r, err);
    free(bodies);
    free(roles);
    if (rc != 0)
        return rc;
    res->first_seq = convo__pg_get_int(r, 0, 0);
    res->count = (size_t)convo__pg_get_int(r, 0, 1);
    res->replayed = PQgetvalue(r, 0, 2)[0] != 0;
    PQclear(r);
    return 0;
}

int convo__pg_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                     size_t n, const convo_append_opts *opts, convo_append_result *res,
                     convo_error *err)
{
    int64_t at_micros = convo__now_micros() - PG_EPOCH_MICROS;
    char at[8];
    put64(at, (uint64_t)at_micros);
    int done = 0, rc = 0;
    if (!opts->idempotency_key) /* with a key, the key is looked up under the row lock */
        rc = append_fast(b, thread_id, msgs, n, at_micros, opts, &done, res, err);
    if (rc == 0 && !done)
        rc = append_function(b, thread_id, msgs, n, at, opts, res, err);
    return rc;
}

/* Fills h from the rows of ST_LOAD. CONVO_ECORRUPT unless they are exactly
 * the seqs [from, to) the options ask for, in order. */
static int load_rows(const PGresult *r, const convo_load_opts *opts, convo_history *h)
{
    int64_t length = convo__pg_get_int(r, 0, 0), from, to;
    convo__history_set_length(h, length);
    convo__history_set_generation(h, convo__pg_get_int(r, 0, 6));
    convo__load_range(opts, length, &from, &to);
    if (opts->with_extra && !PQgetisnull(r, 0, 1)) {
        size_t n;
        char *x = convo__pg_compact_json(r, 0, 1, &n);
        int rc = x ? convo__history_set_extra(h, x, n) : CONVO_ENOMEM;
        free(x);
        if (rc != 0)
            return CONVO_ENOMEM;
    }
    int rows = PQgetisnull(r, 0, 2) ? 0 : PQntuples(r); /* one NULL row: empty range */
    if (rows != to - from)
        return CONVO_ECORRUPT;
    if (convo__history_reserve(h, (size_t)rows) != 0)
        return CONVO_ENOMEM;
    for (int i = 0; i < rows; i++) {
        int64_t seq = convo__pg_get_int(r, i, 2), at = convo__pg_get_int(r, i, 4) + PG_EPOCH_MICROS;
        if (seq != from + i)
            return CONVO_ECORRUPT;
        if (convo__history_add(h, PQgetvalue(r, i, 5), (size_t)PQgetlength(r, i, 5),
                               PQgetvalue(r, i, 3), seq, at) != 0)
            return CONVO_ENOMEM;
    }
    return 0;
}

int convo__pg_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                   convo_history **out, convo_error *err)
{
    char from[8], limit[8], tail[8], with_extra = opts->with_extra ? 1 : 0;
    put64(from, (uint64_t)opts->from_seq);
    put64(limit, (uint64_t)opts->limit);
    put64(tail, (uint64_t)opts->tail);
    const char *values[5] = {thread_id, from, limit, tail, &with_extra};
    const int lens[5] = {(int)strlen(thread_id), 8, 8, 8, 1};
    PGresult *r;
    int rc = convo__pg_run(b, ST_LOAD, values, lens, &r, err);
    if (rc != 0)
        return rc;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    }
    convo_history *h = convo__history_new();
    rc = h ? load_rows(r, opts, h) : CONVO_ENOMEM;
    if (rc != 0) {
        PQclear(r);
        convo_history_free(h);
        if (rc == CONVO_ECORRUPT)
            return convo__error(err, rc, NULL, "postgres: messages missing or out of order");
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    PQclear(r);
    *out = h;
    return 0;
}

int convo__pg_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                         void *patch_obj, convo_error *err)
{
    (void)patch_obj;
    char max[8], at[8];
    put64(max, (uint64_t)b->limits.max_extra_bytes);
    put64(at, (uint64_t)(convo__now_micros() - PG_EPOCH_MICROS));
    const char *values[5] = {thread_id, patch, max, at, b->ttl};
    const int lens[5] = {(int)strlen(thread_id), (int)strlen(patch), 8, 8, TTL_LEN};
    PGresult *r;
    int rc = convo__pg_run(b, ST_SAVE_EXTRA, values, lens, &r, err);
    if (rc == 0)
        PQclear(r);
    return rc;
}

int convo__pg_thread_delete(convo_backend *b, const char *thread_id, convo_error *err)
{
    const char *values[1] = {thread_id};
    const int lens[1] = {(int)strlen(thread_id)};
    PGresult *r;
    int rc = convo__pg_run(b, ST_DELETE, values, lens, &r, err);
    if (rc != 0)
        return rc;
    int found = PQgetvalue(r, 0, 0)[0] != 0;
    PQclear(r);
    return found ? 0 : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
}

int convo__pg_thread_list(convo_backend *b, const char *after, size_t limit,
                          convo_thread_page **out, convo_error *err)
{
    char lim[8];
    put64(lim, (uint64_t)limit + 1); /* one more tells whether there is a next page */
    const char *values[2] = {after ? after : "", lim};
    const int lens[2] = {(int)strlen(values[0]), 8};
    PGresult *r;
    int rc = convo__pg_run(b, ST_LIST, values, lens, &r, err);
    if (rc != 0)
        return rc;
    convo_thread_page *p = convo__thread_page_new();
    size_t rows = (size_t)PQntuples(r), shown = rows > limit ? limit : rows;
    for (size_t i = 0; p && rc == 0 && i < shown; i++)
        rc = convo__thread_page_add(p, PQgetvalue(r, (int)i, 0),
                                    (size_t)PQgetlength(r, (int)i, 0));
    if (p && rc == 0 && rows > limit)
        rc = convo__thread_page_set_next(p, PQgetvalue(r, (int)limit - 1, 0));
    PQclear(r);
    if (!p || rc != 0) {
        convo_thread_page_free(p);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    *out = p;
    return 0;
}

/* thread_fork.sql or thread_copy.sql: the same parameters. */
static int fork_run(convo_backend *b, int statement, const char *src, const char *dst,
                    int64_t upto, int64_t expected_generation, convo_error *err)
{
    char up[8], generation[8], at[8];
    put64(up, (uint64_t)upto);
    put64(generation, (uint64_t)expected_generation);
    put64(at, (uint64_t)(convo__now_micros() - PG_EPOCH_MICROS));
    const char *values[6] = {src, dst, up, generation, at, b->ttl};
    const int lens[6] = {(int)strlen(src), (int)strlen(dst), 8, 8, 8, TTL_LEN};
    PGresult *r;
    /* copy: versions; a source with segments is unsealed first (schema 42) */
    int rc = convo__pg_run_unsealed(b, src, statement, 6, values, lens, PG_RUN_STORED, &r, err);
    if (rc == 0)
        PQclear(r);
    return rc;
}

int convo__pg_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err)
{
    return fork_run(b, ST_FORK, src, dst, upto, expected_generation, err);
}

int convo__pg_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err)
{
    return fork_run(b, ST_COPY, src, dst, upto, expected_generation, err);
}

/* The rewrite's parameters: those of replace_tail.sql; replace_tail_fast.sql
 * takes a subset. */
typedef struct rewrite_params {
    char keep[8], at[8], expected[8], generation[8], drop;
    char *bodies, *roles;
    const char *values[10];
    int lens[10];
} rewrite_params;

static int rewrite_params_init(convo_backend *b, rewrite_params *p, const char *thread_id,
                               int64_t keep, const convo_message_in *msgs, size_t n,
                               const convo_rewrite_opts *opts)
{
    const char *key = opts->idempotency_key;
    put64(p->keep, (uint64_t)keep);
    put64(p->at, (uint64_t)(convo__now_micros() - PG_EPOCH_MICROS));
    put64(p->expected, (uint64_t)opts->expected_length);
    put64(p->generation, (uint64_t)opts->expected_generation);
    p->drop = opts->drop_checkpoints ? 1 : 0;
    const int lens[10] = {(int)strlen(thread_id), 8, 0, 0, 8, key ? (int)strlen(key) : 0, 8, 8,
                          1, TTL_LEN};
    memcpy(p->lens, lens, sizeof lens);
    int rc = convo__pg_encode_batch(msgs, n, &p->bodies, &p->lens[2], &p->roles, &p->lens[3]);
    if (rc != 0)
        return rc;
    const char *values[10] = {thread_id, p->keep,     p->bodies, p->roles, p->at,
                              key,       p->expected, p->generation, &p->drop, b->ttl};
    memcpy(p->values, values, sizeof values);
    return 0;
}

/* replace_tail_fast.sql: *done is 0 when it matched nothing (replace_tail.sql
 * then says why, or does it). */
static int rewrite_fast(convo_backend *b, const rewrite_params *p, int64_t keep, size_t n,
                        int *done, convo_rewrite_result *res, convo_error *err)
{
    const char *values[8] = {p->values[0], p->values[1], p->values[2], p->values[3],
                             p->values[4], p->values[6], p->values[7], p->values[9]};
    const int lens[8] = {p->lens[0], p->lens[1], p->lens[2], p->lens[3],
                         p->lens[4], p->lens[6], p->lens[7], p->lens[9]};
    PGresult *r;
    int rc = convo__pg_run_stored(b, ST_REPLACE_TAIL_FAST, values, lens, &r, err);
    if (rc != 0)
        return rc;
    *done = PQntuples(r) == 1;
    if (*done) {
        res->first_seq = keep;
        res->count = n;
        res->removed = convo__pg_get_int(r, 0, 0);
        res->generation = convo__pg_get_int(r, 0, 1);
        res->replayed = 0;
    }
    PQclear(r);
    return 0;
}

/* The tail rewrite: without an idempotency key replace_tail_fast.sql, one
 * statement; with one, or when that statement matched nothing,
 * @S.replace_tail(), one transaction under the thread's row lock
 * (migrate-8.sql says what it checks, in the order of driver.h). */
int convo__pg_replace_tail(convo_backend *b, const char *thread_id, int64_t keep,
                           const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                           convo_rewrite_result *res, convo_error *err)
{
    rewrite_params p;
    int rc = rewrite_params_init(b, &p, thread_id, keep, msgs, n, opts), done = 0;
    if (rc != 0)
        return convo__pg_too_large(rc, err);
    if (!opts->idempotency_key)
        rc = rewrite_fast(b, &p, keep, n, &done, res, err);
    PGresult *r = NULL;
    if (rc == 0 && !done)
        rc = convo__pg_run_unsealed(b, thread_id, ST_REPLACE_TAIL, 10, p.values, p.lens,
                                    PG_RUN_STORED, &r, err);
    free(p.bodies);
    free(p.roles);
    if (rc != 0 || done)
        return rc;
    res->first_seq = convo__pg_get_int(r, 0, 0);
    res->count = (size_t)convo__pg_get_int(r, 0, 1);
    res->removed = convo__pg_get_int(r, 0, 2);
    res->generation = convo__pg_get_int(r, 0, 3);
    res->replayed = PQgetvalue(r, 0, 4)[0] != 0;
    PQclear(r);
    return 0;
}
