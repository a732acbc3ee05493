/* threads.c — the SQLite driver's threads: the thread row (number, extra,
 * deadline), its log of messages and idempotency keys, and the calls over
 * them: append, load, save_extra, delete, list, fork and import. Every call is
 * one transaction (sq_run_tx); the statements are statements/thread-*.sql,
 * idem-*.sql and msg-*.sql. Every write that changes a thread sets its
 * updated_at in the same update of its row (the thread index, list.c). */
#include "config.h"
#include "sqlite_int.h"
#include <stdlib.h>
#include <string.h>

/* ---- rows ---- */

static int expired(const thread_row *t, int64_t now)
{
    return t->expires_at != 0 && t->expires_at <= now;
}

/* The length of thread num (one past the seq of its last message) and the
 * created_at of its last message (0 when it has none), found by one seek to
 * the end of its key range, so it costs the same at any length. */
int sq_thread_last(sq_conn *c, int64_t num, int64_t *length, int64_t *last_at,
                   convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_MSG_LAST, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, 0));
    sqlite3_bind_int64(st, 2, key_of(num, MAX_LENGTH));
    rc = sq_stmt_step(c, st, "reading a thread's length", err);
    *length = *last_at = 0;
    if (rc == 1) {
        *length = sqlite3_column_int64(st, 0) - key_of(num, 0) + 1;
        *last_at = sqlite3_column_int64(st, 1);
        sq_stmt_done(st);
        rc = 0;
    }
    return rc;
}

static int thread_length(sq_conn *c, thread_row *t, convo_error *err)
{
    return sq_thread_last(c, t->num, &t->length, &t->last_at, err);
}

/* Copies text column i of st into *out (malloc'd; NULL for SQL NULL). */
static int column_copy(sqlite3_stmt *st, int i, char **out, size_t *len, convo_error *err)
{
    const char *text = (const char *)sqlite3_column_text(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    *out = NULL;
    *len = 0;
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return 0;
    if (!text || !(*out = malloc(n + 1)))
        return no_memory(err);
    memcpy(*out, text, n);
    (*out)[n] = '\0';
    *len = n;
    return 0;
}

/* 1 and t->num, t->expires_at, t->generation, t->updated_at filled when the
 * thread exists (as seen through view), 0 when not (t zeroed: a thread created
 * from it starts at generation 0), < 0 on error. With extra non-NULL, *extra
 * gets a malloc'd copy of the extra text (NULL if none). t->length and
 * t->last_at are not read. */
int sq_thread_get(sq_conn *c, const char *id, enum thread_view view, thread_row *t,
                  char **extra, size_t *extra_len, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_GET, &st, err);
    if (extra) {
        *extra = NULL;
        *extra_len = 0;
    }
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    *t = (thread_row){0};
    if ((rc = sq_stmt_step(c, st, "reading a thread", err)) != 1)
        return rc;
    t->num = sqlite3_column_int64(st, 0);
    t->expires_at = sqlite3_column_int64(st, 1); /* NULL reads as 0 */
    t->generation = sqlite3_column_int64(st, 3);
    t->updated_at = sqlite3_column_int64(st, 4);
    rc = extra ? column_copy(st, 2, extra, extra_len, err) : 0;
    sq_stmt_done(st);
    if (rc || view == VIEW_RAW || !expired(t, convo__now_micros()))
        return rc ? rc : 1;
    if (extra) {
        free(*extra);
        *extra = NULL;
    }
    rc = view == VIEW_WRITE ? sq_thread_purge(c, t->num, err) : 0;
    *t = (thread_row){0};
    return rc;
}

/* thread_get without extra, and with the thread's length and last message time. */
int sq_thread_find(sq_conn *c, const char *id, enum thread_view view, thread_row *t,
                   convo_error *err)
{
    int rc = sq_thread_get(c, id, view, t, NULL, NULL, err);
    if (rc == 1 && (rc = thread_length(c, t, err)) == 0)
        rc = 1;
    return rc;
}

/* The deadline a write gives a thread: now + ttl, or none (bound as NULL). */
static void bind_expiry(sq_conn *c, sqlite3_stmt *st, int i, int64_t now)
{
    if (c->ttl_us)
        sqlite3_bind_int64(st, i, now + c->ttl_us);
    else
        sqlite3_bind_null(st, i);
}

static int thread_insert(sq_conn *c, const char *id, int64_t now, const char *extra,
                         size_t extra_len, int64_t generation, int64_t *num, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_INSERT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, now);
    if (extra)
        sqlite3_bind_text64(st, 3, extra, extra_len, SQLITE_STATIC, SQLITE_UTF8);
    bind_expiry(c, st, 4, now);
    sqlite3_bind_int64(st, 5, generation);
    if ((rc = sq_stmt_run(c, st, "creating a thread", err)) != 0)
        return rc;
    *num = sqlite3_last_insert_rowid(c->db);
    if (*num > MAX_THREAD_NUM)
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "sqlite: this database has used up its %lld thread numbers",
                            (long long)MAX_THREAD_NUM);
    return 0;
}

/* A new thread, created and active now (sq_activity_next), at generation
 * t->generation, that will have `length` messages once the write is done;
 * it becomes the open entry of the activity order. t (zeroed but for the
 * generation) gets its number and times (length 0). */
static int thread_create(sq_conn *c, const char *id, const char *extra, size_t extra_len,
                         int64_t length, thread_row *t, convo_error *err)
{
    int64_t at;
    t->num = t->updated_at = t->last_at = t->length = 0;
    int rc = sq_activity_next(c, t, &at, err);
    if (rc == 0)
        rc = thread_insert(c, id, at, extra, extra_len, t->generation, &t->num, err);
    t->updated_at = at;
    return rc ? rc : sq_activity_front(c, id, t, 0, at, length, &t->entry_at, err);
}

/* A write that rewrites the row of thread t (id), at time at (from
 * sq_activity_next): updated_at becomes at and, with ttl, the deadline now +
 * ttl; without, a deadline left by a store with ttl is cleared (the thread is
 * permanent again). The thread moves in the activity order, with the length
 * it has after the write. t->last_at must have been read. */
int sq_thread_touch(sq_conn *c, const char *id, thread_row *t, int64_t at, int64_t length,
                    convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_TOUCH, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, t->num);
    sqlite3_bind_int64(st, 2, at);
    bind_expiry(c, st, 3, convo__now_micros());
    if ((rc = sq_stmt_run(c, st, "recording a write to the thread", err)) == 0)
        rc = sq_activity_front(c, id, t, 1, at, length, &t->entry_at, err);
    t->updated_at = at;
    return rc;
}

/* The deadline of a write that leaves the rest of the row alone (an append,
 * a pending write, a prune): with ttl it moves to now + ttl, without a
 * deadline left by a store with ttl is cleared; the row is only rewritten
 * when its deadline has to change. */
int sq_thread_extend(sq_conn *c, const thread_row *t, convo_error *err)
{
    if (!c->ttl_us && !t->expires_at)
        return 0;
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_SET_EXPIRY, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, t->num);
    bind_expiry(c, st, 2, convo__now_micros());
    return sq_stmt_run(c, st, "recording the thread's expiry", err);
}

/* An existing thread is touched (its row rewritten); a missing one is created
 * with no extra, at generation t->generation. */
int sq_thread_ensure(sq_conn *c, const char *id, int found, thread_row *t, convo_error *err)
{
    if (!found)
        return thread_create(c, id, NULL, 0, 0, t, err);
    int64_t at;
    int rc = sq_activity_next(c, t, &at, err);
    return rc ? rc : sq_thread_touch(c, id, t, at, t->length, err);
}

/* Gives thread t (id) its new generation, and touches it as sq_thread_touch
 * does (length: after the write), in one update of its row. */
int sq_thread_set_generation(sq_conn *c, const char *id, thread_row *t, int64_t generation,
                             int64_t length, convo_error *err)
{
    sqlite3_stmt *st;
    int64_t at;
    int rc = sq_activity_next(c, t, &at, err);
    if (rc == 0)
        rc = sq_stmt_get(c, ST_THREAD_SET_GENERATION, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, t->num);
    sqlite3_bind_int64(st, 2, generation);
    bind_expiry(c, st, 3, convo__now_micros());
    sqlite3_bind_int64(st, 4, at);
    if ((rc = sq_stmt_run(c, st, "recording the thread's generation", err)) == 0)
        rc = sq_activity_front(c, id, t, 1, at, length, &t->entry_at, err);
    t->updated_at = at;
    return rc;
}

/* The merged extra, and the touch of the thread, in one update of its row. */
static int thread_set_extra(sq_conn *c, const char *id, thread_row *t, const char *extra,
                            size_t extra_len, int64_t at, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_SET_EXTRA, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, t->num);
    sqlite3_bind_text64(st, 2, extra, extra_len, SQLITE_STATIC, SQLITE_UTF8);
    sqlite3_bind_int64(st, 3, at);
    bind_expiry(c, st, 4, convo__now_micros());
    if ((rc = sq_stmt_run(c, st, "saving extra", err)) == 0)
        rc = sq_activity_front(c, id, t, 1, at, t->length, &t->entry_at, err);
    t->updated_at = at;
    return rc;
}

/* 1 and res filled when key was used on this thread, 0 when not, < 0 on error. */
int sq_idem_find(sq_conn *c, int64_t num, const char *key, convo_append_result *res,
                     convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_IDEM_GET, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    rc = sq_stmt_step(c, st, "reading an idempotency key", err);
    if (rc == 1) {
        res->first_seq = sqlite3_column_int64(st, 0);
        res->count = (size_t)sqlite3_column_int64(st, 1);
        res->replayed = 1;
        sq_stmt_done(st);
    }
    return rc;
}

int sq_idem_put(sq_conn *c, int64_t num, const char *key, int64_t first, size_t n,
                convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_IDEM_PUT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, first);
    sqlite3_bind_int64(st, 4, (int64_t)n);
    sqlite3_bind_int64(st, 5, convo__now_micros());
    return sq_stmt_run(c, st, "storing an idempotency key", err);
}

/* Stores msgs at seqs first.. of thread num with statement id (MSG_INSERT,
 * or MSG_REPLACE over existing rows); created_at: one time per message, or
 * NULL to stamp them all with now. */
int sq_messages_put(sq_conn *c, enum stmt_id id, int64_t num, int64_t first,
                    const convo_message_in *msgs, size_t n, int64_t now,
                    const int64_t *created_at, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, id, &st, err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        sqlite3_bind_int64(st, 1, key_of(num, first + (int64_t)i));
        sqlite3_bind_text(st, 2, msgs[i].role, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, created_at ? created_at[i] : now);
        /* a BLOB, so the bytes come back exactly as given */
        sqlite3_bind_blob64(st, 4, msgs[i].len ? msgs[i].bytes : "", msgs[i].len, SQLITE_STATIC);
        rc = sq_stmt_run(c, st, "storing a message", err);
    }
    return rc;
}

int sq_length_conflict(int64_t length, int64_t expected, convo_error *err)
{
    return convo__error(err, CONVO_ECONFLICT, NULL, "thread has %lld messages, expected %lld",
                        (long long)length, (long long)expected);
}

int sq_generation_conflict(int64_t generation, int64_t expected, convo_error *err)
{
    return convo__error(err, CONVO_ECONFLICT, NULL, "thread is at generation %lld, expected %lld",
                        (long long)generation, (long long)expected);
}

/* Appends n messages after the t->length there are, to thread t, created
 * first when not found. They are stamped with the thread's next activity
 * time, and an append rewrites no more of the row than its deadline: the
 * activity order finds the thread by its last message's time (and to the
 * open entry, the thread written last, it writes nothing else). Restored
 * messages (created_at non-NULL: one time each, a dump's) keep their times and
 * the thread's row is touched, so its activity is this write's. t->length is
 * left as it was (the first new seq). */
int sq_log_append(sq_conn *c, const char *thread_id, int found, thread_row *t,
                  const convo_message_in *msgs, size_t n, const int64_t *created_at,
                  convo_error *err)
{
    if (t->length + (int64_t)n > MAX_LENGTH)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "sqlite: a thread holds at most %lld messages", (long long)MAX_LENGTH);
    int64_t at = 0;
    int rc = found ? sq_activity_next(c, t, &at, err)
                   : thread_create(c, thread_id, NULL, 0, (int64_t)n, t, err);
    if (!found)
        at = t->updated_at;
    if (rc == 0)
        rc = sq_messages_put(c, ST_MSG_INSERT, t->num, t->length, msgs, n, at, created_at, err);
    if (rc == 0 && created_at) {
        int64_t last = created_at[n - 1];
        rc = sq_thread_touch(c, thread_id, t, last > at ? last : at, t->length + (int64_t)n, err);
        t->last_at = last;
    } else if (rc == 0 && found) {
        if ((rc = sq_thread_extend(c, t, err)) == 0)
            rc = sq_activity_front(c, thread_id, t, 1, at, t->length + (int64_t)n,
                                   &t->entry_at, err);
        t->last_at = at;
    }
    return rc;
}

/* Removes thread num and everything keyed by it. */
int sq_thread_purge(sq_conn *c, int64_t num, convo_error *err)
{
    int64_t lo = key_of(num, 0), hi = key_of(num, MAX_LENGTH);
    int rc = sq_index_forget(c, num, err); /* first: it reads the row and the last message */
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_MSG_DELETE, 2, lo, hi, 0, "deleting messages", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_IDEM_DELETE, 1, num, 0, 0, "deleting idempotency keys", err);
    if (rc == 0)
        rc = sq_checkpoints_delete(c, lo, hi, err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_REACH_DELETE, 1, num, 0, 0, "deleting a log bound", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_BLOB_DELETE, 1, num, 0, 0, "deleting channel values", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_THREAD_DELETE, 1, num, 0, 0, "deleting a thread", err);
    return rc;
}

/* ---- append ---- */

typedef struct append_args {
    const char *thread_id;
    const convo_message_in *msgs;
    size_t n;
    const convo_append_opts *opts;
    convo_append_result *res;
} append_args;

static int append_tx(sq_conn *c, void *arg, convo_error *err)
{
    append_args *a = arg;
    const char *key = a->opts->idempotency_key;
    thread_row t;
    int found = sq_thread_find(c, a->thread_id, VIEW_WRITE, &t, err);
    if (found < 0)
        return found;
    int rc;
    if (found && key && (rc = sq_idem_find(c, t.num, key, a->res, err)) != 0)
        return rc < 0 ? rc : 0; /* a retry: report the original batch */
    if (a->opts->expected_length >= 0 && a->opts->expected_length != t.length)
        return sq_length_conflict(t.length, a->opts->expected_length, err);
    if (a->opts->expected_generation >= 0 && a->opts->expected_generation != t.generation)
        return sq_generation_conflict(t.generation, a->opts->expected_generation, err);
    rc = sq_log_append(c, a->thread_id, found, &t, a->msgs, a->n, NULL, err);
    if (rc == 0 && key)
        rc = sq_idem_put(c, t.num, key, t.length, a->n, err);
    if (rc == 0) {
        a->res->first_seq = t.length;
        a->res->count = a->n;
        a->res->replayed = 0;
    }
    return rc;
}

int sq_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
              size_t n, const convo_append_opts *opts, convo_append_result *res,
              convo_error *err)
{
    append_args a = {thread_id, msgs, n, opts, res};
    return sq_run_tx(b, 1, append_tx, &a, err);
}

/* ---- load ---- */

typedef struct load_args {
    const char *thread_id;
    const convo_load_opts *opts;
    convo_history *h;
} load_args;

/* Adds messages [from, to) of thread num to h, checking that none is missing. */
static int load_range(sq_conn *c, int64_t num, int64_t from, int64_t to, convo_history *h,
                      convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_MSG_RANGE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, from));
    sqlite3_bind_int64(st, 2, key_of(num, to));
    int64_t seq = from;
    while ((rc = sq_stmt_step(c, st, "loading messages", err)) == 1) {
        const char *role = (const char *)sqlite3_column_text(st, 1);
        const void *body = sqlite3_column_blob(st, 3);
        size_t len = (size_t)sqlite3_column_bytes(st, 3);
        if (sqlite3_column_int64(st, 0) != key_of(num, seq) || !role) {
            sq_stmt_done(st);
            return convo__error(err, CONVO_ECORRUPT, NULL,
                                "sqlite: message %lld of the thread is missing or damaged",
                                (long long)seq);
        }
        if (convo__history_add(h, body ? body : "", len, role, seq,
                               sqlite3_column_int64(st, 2)) != 0) {
            sq_stmt_done(st);
            return no_memory(err);
        }
        seq++;
    }
    if (rc == 0 && seq != to)
        rc = convo__error(err, CONVO_ECORRUPT, NULL,
                          "sqlite: thread should have %lld messages but has %lld", (long long)to,
                          (long long)seq);
    return rc;
}

static int load_tx(sq_conn *c, void *arg, convo_error *err)
{
    load_args *a = arg;
    thread_row t;
    char *extra = NULL;
    size_t extra_len = 0;
    int rc = sq_thread_get(c, a->thread_id, VIEW_READ, &t, a->opts->with_extra ? &extra : NULL,
                           &extra_len, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    rc = extra && convo__history_set_extra(a->h, extra, extra_len) != 0 ? no_memory(err) : 0;
    free(extra);
    if (rc == 0)
        rc = thread_length(c, &t, err);
    if (rc)
        return rc;
    int64_t from, to;
    convo__load_range(a->opts, t.length, &from, &to);
    convo__history_set_length(a->h, t.length);
    convo__history_set_generation(a->h, t.generation);
    if (convo__history_reserve(a->h, (size_t)(to - from)) != 0)
        return no_memory(err);
    return from < to ? load_range(c, t.num, from, to, a->h, err) : 0;
}

int sq_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
            convo_history **out, convo_error *err)
{
    load_args a = {thread_id, opts, convo__history_new()};
    if (!a.h)
        return no_memory(err);
    int rc = sq_run_tx(b, 0, load_tx, &a, err);
    if (rc) {
        convo_history_free(a.h);
        return rc;
    }
    *out = a.h;
    return 0;
}

/* ---- extra ---- */

typedef struct extra_args {
    convo_backend *b;
    const char *thread_id;
    const char *patch;
    const struct json_t *patch_obj;
} extra_args;

/* Reads, merges and writes back in one write transaction, so concurrent
 * patches with different keys all survive; the index rows of the keys the
 * patch sets follow in the same transaction. */
static int save_extra_tx(sq_conn *c, void *arg, convo_error *err)
{
    extra_args *a = arg;
    thread_row t;
    char *current, *merged;
    size_t current_len = 0, merged_len;
    int found = sq_thread_get(c, a->thread_id, VIEW_WRITE, &t, &current, &current_len, err);
    if (found < 0)
        return found;
    int rc = convo__extra_merge(current, current_len, a->patch, a->b->limits.max_extra_bytes,
                                &merged, &merged_len, err);
    free(current);
    if (rc)
        return rc;
    if (!found)
        rc = thread_create(c, a->thread_id, merged, merged_len, 0, &t, err);
    else {
        int64_t at;
        if ((rc = thread_length(c, &t, err)) == 0 && (rc = sq_activity_next(c, &t, &at, err)) == 0)
            rc = thread_set_extra(c, a->thread_id, &t, merged, merged_len, at, err);
    }
    free(merged);
    return rc ? rc : sq_index_extra(c, t.num, t.entry_at, t.length, a->patch_obj, err);
}

int sq_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                  void *patch_obj, convo_error *err)
{
    extra_args a = {b, thread_id, patch, patch_obj};
    return sq_run_tx(b, 1, save_extra_tx, &a, err);
}

/* ---- threads ---- */

typedef struct delete_args {
    const char *thread_id;
    int expired; /* the thread had expired: its remains were removed, yet it was not there */
} delete_args;

static int delete_tx(sq_conn *c, void *arg, convo_error *err)
{
    delete_args *a = arg;
    thread_row t;
    int rc = sq_thread_get(c, a->thread_id, VIEW_RAW, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    a->expired = expired(&t, convo__now_micros());
    return sq_thread_purge(c, t.num, err);
}

int sq_thread_delete(convo_backend *b, const char *thread_id, convo_error *err)
{
    delete_args a = {thread_id, 0};
    int rc = sq_run_tx(b, 1, delete_tx, &a, err);
    if (rc == 0 && a.expired)
        rc = convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    return rc;
}

typedef struct list_args {
    const char *after;
    size_t limit;
    convo_thread_page *p;
} list_args;

static int list_tx(sq_conn *c, void *arg, convo_error *err)
{
    list_args *a = arg;
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_LIST, &st, err);
    if (rc)
        return rc;
    /* every id is non-empty, so "" sorts before all of them */
    sqlite3_bind_text(st, 1, a->after ? a->after : "", -1, SQLITE_STATIC);
    /* one row more than asked tells whether a next page exists */
    sqlite3_bind_int64(st, 2, (int64_t)a->limit + 1);
    sqlite3_bind_int64(st, 3, convo__now_micros());
    size_t rows = 0;
    while ((rc = sq_stmt_step(c, st, "listing threads", err)) == 1) {
        if (++rows > a->limit)
            continue;
        const char *id = (const char *)sqlite3_column_text(st, 0);
        if (!id || convo__thread_page_add(a->p, id, (size_t)sqlite3_column_bytes(st, 0)) != 0) {
            sq_stmt_done(st);
            return no_memory(err);
        }
    }
    if (rc == 0 && rows > a->limit &&
        convo__thread_page_set_next(a->p, convo_thread_page_id(a->p, a->limit - 1)) != 0)
        rc = no_memory(err);
    return rc;
}

int sq_thread_list(convo_backend *b, const char *after, size_t limit,
                   convo_thread_page **out, convo_error *err)
{
    list_args a = {after, limit, convo__thread_page_new()};
    if (!a.p)
        return no_memory(err);
    int rc = sq_run_tx(b, 0, list_tx, &a, err);
    if (rc) {
        convo_thread_page_free(a.p);
        return rc;
    }
    *out = a.p;
    return 0;
}

typedef struct fork_args {
    const char *src, *dst;
    int64_t upto, expected_generation;
} fork_args;

/* The source must be at the expected generation, the destination new and upto
 * within the source (whose length it fills). */
static int fork_check(sq_conn *c, const fork_args *a, thread_row *s, convo_error *err)
{
    thread_row d;
    if (a->expected_generation >= 0 && a->expected_generation != s->generation)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "source thread is at generation %lld, expected %lld",
                            (long long)s->generation, (long long)a->expected_generation);
    int rc = thread_length(c, s, err);
    if (rc == 0 && (rc = sq_thread_find(c, a->dst, VIEW_WRITE, &d, err)) > 0)
        rc = convo__error(err, CONVO_ECONFLICT, NULL, "destination thread already exists");
    if (rc == 0 && a->upto > s->length)
        rc = convo__error(err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%lld)",
                          (long long)a->upto, (long long)s->length);
    return rc;
}

/* One write transaction: a rewrite of the source comes wholly before or after,
 * so the copy is of one generation, which the destination takes. */
static int fork_tx(sq_conn *c, void *arg, convo_error *err)
{
    fork_args *a = arg;
    thread_row s;
    char *extra;
    size_t extra_len = 0;
    int rc = sq_thread_get(c, a->src, VIEW_READ, &s, &extra, &extra_len, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "source thread not found");
    rc = fork_check(c, a, &s, err);
    int64_t n = a->upto < 0 ? s.length : a->upto;
    /* created and active now, past every thread (the source and so the
     * messages copied from it too, should the clock have stepped back) */
    thread_row d = {0};
    int64_t at;
    if (rc == 0)
        rc = sq_activity_next(c, &d, &at, err);
    if (rc == 0)
        rc = thread_insert(c, a->dst, at, extra, extra_len, s.generation, &d.num, err);
    free(extra);
    if (rc == 0 && n > 0)
        rc = sq_run_with_ints(c, ST_MSG_COPY, 3, key_of(s.num, 0), key_of(s.num, n),
                              key_of(d.num, 0), "copying messages", err);
    if (rc == 0)
        rc = sq_activity_front(c, a->dst, &d, 0, at, n, &d.entry_at, err);
    return rc ? rc : sq_index_copy(c, s.num, d.num, d.entry_at, n, err);
}

int sq_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                   int64_t expected_generation, convo_error *err)
{
    fork_args a = {src, dst, upto, expected_generation};
    return sq_run_tx(b, 1, fork_tx, &a, err);
}

/* The fork and then the checkpoints within the messages copied, in the same
 * write transaction: a copy is whole or not there. */
static int copy_tx(sq_conn *c, void *arg, convo_error *err)
{
    fork_args *a = arg;
    thread_row s, d;
    int rc = fork_tx(c, a, err);
    if (rc == 0 && (rc = sq_thread_get(c, a->src, VIEW_READ, &s, NULL, NULL, err)) == 1)
        rc = sq_thread_get(c, a->dst, VIEW_READ, &d, NULL, NULL, err);
    if (rc == 1)
        rc = thread_length(c, &d, err);
    else if (rc == 0) /* both were just read */
        rc = convo__error(err, CONVO_ERROR, NULL, "sqlite: a forked thread vanished");
    return rc ? rc : sq_checkpoints_copy(c, s.num, d.num, d.length, err);
}

int sq_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                   int64_t expected_generation, convo_error *err)
{
    fork_args a = {src, dst, upto, expected_generation};
    return sq_run_tx(b, 1, copy_tx, &a, err);
}

/* ---- restoring a dump ---- */

typedef struct import_args {
    const char *thread_id;
    int64_t first_seq;
    const convo_message_in *msgs;
    const int64_t *created_at;
    size_t n;
    int64_t generation;
    int *skipped;
} import_args;

/* A thread without messages takes the dump's generation when the dump starts
 * at 0; any other must be at it: a dump never continues another generation. */
static int import_generation(sq_conn *c, const import_args *a, int found, thread_row *t,
                             convo_error *err)
{
    if (t->length == 0 && a->first_seq == 0) {
        int rc = found && t->generation != a->generation
                     ? sq_thread_set_generation(c, a->thread_id, t, a->generation, 0, err)
                     : 0;
        t->generation = a->generation; /* a missing thread is created with it */
        return rc;
    }
    if (t->generation != a->generation)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread %s is at generation %lld, the dump at %lld: its tail was "
                            "rewritten since it was imported",
                            a->thread_id, (long long)t->generation, (long long)a->generation);
    return 0;
}

static int import_tx(sq_conn *c, void *arg, convo_error *err)
{
    import_args *a = arg;
    thread_row t;
    int found = sq_thread_find(c, a->thread_id, VIEW_WRITE, &t, err);
    if (found < 0)
        return found;
    int rc = import_generation(c, a, found, &t, err);
    if (rc)
        return rc;
    *a->skipped = t.length >= a->first_seq + (int64_t)a->n; /* the same dump again */
    if (*a->skipped)
        return 0;
    if (t.length != a->first_seq)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread has %lld messages, the dump continues at %lld",
                            (long long)t.length, (long long)a->first_seq);
    return sq_log_append(c, a->thread_id, found, &t, a->msgs, a->n, a->created_at, err);
}

int sq_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                     const convo_message_in *msgs, const int64_t *created_at, size_t n,
                     int64_t generation, int *skipped, convo_error *err)
{
    import_args a = {thread_id, first_seq, msgs, created_at, n, generation, skipped};
    *skipped = 0;
    return sq_run_tx(b, 1, import_tx, &a, err);
}
