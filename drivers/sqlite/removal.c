/* removal.c — the SQLite driver's checkpoints removed and copied: the rows of a
 * key range deleted with their pending writes (their children then name them by
 * id), the checkpoints beyond a log length dropped or settled after a rewrite of
 * the tail, prune (keep the newest N of each namespace), delete (a thread's, or
 * a run's), and a thread's checkpoints copied to another thread. Split from
 * checkpoints.c (put, writes, get, list), whose place look-ups it shares
 * (sq_cp_find, sq_cp_last_order). */
#include "config.h"
#include "sqlite_int.h"
#include "compact.h"
#include "pending.h"
#include <stdlib.h>
#include <string.h>

/* Deletes the checkpoints whose keys lie in [lo, hi] with their pending
 * writes (in their rows; not their values: see statements/blob-unused.sql); a checkpoint
 * that names one of them as its parent by place names it by id from then on. */
int sq_checkpoints_delete(sq_conn *c, int64_t lo, int64_t hi, convo_error *err)
{
    sq_list_memo_clear(c);
    int rc = sq_run_with_ints(c, ST_CP_ORPHANS, 3, lo, hi, PARENT_NEAR,
                              "naming parents by id", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_CP_DELETE, 2, lo, hi, 0, "deleting checkpoints", err);
    return rc;
}

/* sq_lists_settle()'s test for the checkpoints that refer to more than
 * *(int64_t *)arg messages. */
static int beyond(void *arg, int64_t key, int64_t log_length)
{
    (void)key;
    return log_length > *(const int64_t *)arg;
}

static int by_key(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Keys, sorted, of checkpoints about to go. */
typedef struct key_set {
    int64_t *keys;
    size_t n;
} key_set;

static int in_set(void *arg, int64_t key, int64_t log_length)
{
    const key_set *set = arg;
    (void)log_length;
    return bsearch(&key, set->keys, set->n, sizeof key, by_key) != NULL;
}

/* Before the checkpoints keys[0..n) of thread num go. */
static int settle_keys(sq_conn *c, int64_t num, int64_t *keys, size_t n, convo_error *err)
{
    key_set set = {keys, n};
    qsort(keys, n, sizeof *keys, by_key);
    return sq_lists_settle(c, num, in_set, &set, err);
}

/* A rewrite keeping keep messages of thread num: the checkpoints that refer to
 * more are a conflict naming one of them, or with drop removed with their
 * channel lists, pending writes and the values no other checkpoint uses. */
int sq_checkpoints_beyond(sq_conn *c, int64_t num, int64_t keep, int drop, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_REACH_GET, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    if ((rc = sq_stmt_step(c, st, "reading the thread's log bound", err)) < 0)
        return rc;
    int64_t bound = rc ? sqlite3_column_int64(st, 0) : 0;
    if (rc)
        sq_stmt_done(st);
    if (bound <= keep) /* one seek: no checkpoint refers to more */
        return 0;
    if ((rc = sq_stmt_get(c, ST_CP_BEYOND, &st, err)) != 0)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_int64(st, 2, keep);
    if ((rc = sq_stmt_step(c, st, "reading checkpoints", err)) <= 0)
        return rc < 0 ? rc : sq_run_with_ints(c, ST_REACH_SET, 1, num, 0, 0,
                                              "setting the thread's log bound", err);
    if (!drop) {
        char id[SQ_UUID_TEXT + 1];
        rc = convo__error(err, CONVO_ECONFLICT, NULL,
                          "checkpoint %s (namespace '%s') refers to %lld messages; the rewrite "
                          "keeps %lld: nothing written (drop_checkpoints removes such "
                          "checkpoints)",
                          sq_column_id(st, 1, id), (const char *)sqlite3_column_text(st, 0),
                          (long long)sqlite3_column_int64(st, 2), (long long)keep);
        sq_stmt_done(st);
        return rc;
    }
    sq_stmt_done(st);
    rc = sq_lists_settle(c, num, beyond, &keep, err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_CP_ORPHANS_BEYOND, 3, num, keep, PARENT_NEAR,
                              "naming parents by id", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_CP_DELETE_BEYOND, 2, num, keep, 0, "deleting checkpoints",
                              err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_REACH_SET, 1, num, 0, 0, "setting the thread's log bound",
                              err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_BLOB_UNUSED, 3, num, key_of(num, 0), key_of(num, MAX_LENGTH),
                              "deleting unused channel values", err);
    return rc;
}

/* How many checkpoints of each namespace have been seen so far. */
typedef struct ns_count {
    char *ns;
    size_t seen;
} ns_count;

typedef struct prune_plan {
    ns_count *ns;
    size_t nns;
    int64_t *doomed; /* keys of the checkpoints to remove */
    size_t ndoomed, cap;
} prune_plan;

static void prune_plan_free(prune_plan *p)
{
    for (size_t i = 0; i < p->nns; i++)
        free(p->ns[i].ns);
    free(p->ns);
    free(p->doomed);
}

/* Counts one more checkpoint of ns; returns how many were seen before it, or
 * (size_t)-1 when out of memory. */
static size_t ns_seen(prune_plan *p, const char *ns)
{
    for (size_t i = 0; i < p->nns; i++)
        if (strcmp(p->ns[i].ns, ns) == 0)
            return p->ns[i].seen++;
    ns_count *grown = realloc(p->ns, (p->nns + 1) * sizeof *grown);
    if (!grown)
        return (size_t)-1;
    p->ns = grown;
    if (!(p->ns[p->nns].ns = strdup(ns)))
        return (size_t)-1;
    p->ns[p->nns++].seen = 1;
    return 0;
}

static int doom(prune_plan *p, int64_t key)
{
    if (p->ndoomed == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        int64_t *grown = realloc(p->doomed, cap * sizeof *grown);
        if (!grown)
            return CONVO_ENOMEM;
        p->doomed = grown;
        p->cap = cap;
    }
    p->doomed[p->ndoomed++] = key;
    return 0;
}

/* Newest first, the checkpoints of thread num past the keep_last newest of
 * their namespace. Decided before anything is deleted. */
static int prune_decide(sq_conn *c, int64_t num, size_t keep_last, prune_plan *p,
                        convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_KEYS, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, 0));
    sqlite3_bind_int64(st, 2, key_of(num, MAX_LENGTH));
    while ((rc = sq_stmt_step(c, st, "reading checkpoints", err)) == 1) {
        const char *ns = (const char *)sqlite3_column_text(st, 1);
        size_t newer = ns ? ns_seen(p, ns) : (size_t)-1;
        if (newer == (size_t)-1 || (newer >= keep_last && doom(p, sqlite3_column_int64(st, 0)))) {
            sq_stmt_done(st);
            return no_memory(err);
        }
    }
    return rc;
}

typedef struct prune_args {
    const char *thread_id;
    size_t keep_last;
} prune_args;

static int prune_tx(sq_conn *c, void *arg, convo_error *err)
{
    prune_args *a = arg;
    thread_row t;
    int rc = sq_thread_get(c, a->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    prune_plan p = {0};
    rc = prune_decide(c, t.num, a->keep_last, &p, err);
    if (rc == 0 && p.ndoomed)
        rc = settle_keys(c, t.num, p.doomed, p.ndoomed, err);
    for (size_t i = 0; i < p.ndoomed && rc == 0; i++)
        rc = sq_checkpoints_delete(c, p.doomed[i], p.doomed[i], err);
    if (rc == 0 && p.ndoomed)
        rc = sq_run_with_ints(c, ST_BLOB_UNUSED, 3, t.num, key_of(t.num, 0),
                              key_of(t.num, MAX_LENGTH), "deleting unused channel values", err);
    prune_plan_free(&p);
    return rc ? rc : sq_thread_extend(c, &t, err);
}

int sq_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                        convo_error *err)
{
    prune_args a = {thread_id, keep_last};
    return sq_run_tx(b, 1, prune_tx, &a, err);
}

typedef struct delete_args {
    const char *thread_id;
    const char *const *ns, *const *ids;
    size_t n;
    uint64_t removed;
} delete_args;

static int delete_tx(sq_conn *c, void *arg, convo_error *err)
{
    delete_args *a = arg;
    thread_row t;
    int rc = sq_thread_get(c, a->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc; /* no thread: nothing to remove */
    int64_t *keys = malloc((a->n ? a->n : 1) * sizeof *keys);
    size_t n = 0;
    if (!keys)
        return no_memory(err);
    for (size_t i = 0; i < a->n && rc >= 0; i++) {
        cp_place at;
        if ((rc = sq_cp_find(c, t.num, a->ns[i], a->ids[i], &at, err)) == 1)
            keys[n++] = at.key;
    }
    if (rc >= 0 && n)
        rc = settle_keys(c, t.num, keys, n, err);
    for (size_t i = 0; i < n && rc >= 0; i++) /* sorted: an id named twice goes once */
        if ((i == 0 || keys[i] != keys[i - 1]) &&
            (rc = sq_checkpoints_delete(c, keys[i], keys[i], err)) == 0)
            a->removed++;
    free(keys);
    if (rc >= 0 && a->removed)
        rc = sq_run_with_ints(c, ST_BLOB_UNUSED, 3, t.num, key_of(t.num, 0),
                              key_of(t.num, MAX_LENGTH), "deleting unused channel values", err);
    return rc < 0 ? rc : 0;
}

int sq_checkpoint_delete(convo_backend *b, const char *thread_id, const char *const *ns,
                         const char *const *ids, size_t n, uint64_t *removed, convo_error *err)
{
    delete_args a = {thread_id, ns, ids, n, 0};
    int rc = sq_run_tx(b, 1, delete_tx, &a, err);
    *removed = rc == 0 ? a.removed : 0;
    return rc;
}

/* Runs statement id with the int64 parameters ?1..?n. */
static int run_ints(sq_conn *c, enum stmt_id id, const int64_t *v, int n, const char *what,
                    convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, id, &st, err);
    for (int i = 0; rc == 0 && i < n; i++)
        sqlite3_bind_int64(st, i + 1, v[i]);
    return rc ? rc : sq_stmt_run(c, st, what, err);
}

int sq_checkpoints_copy(sq_conn *c, int64_t src, int64_t dst, int64_t upto, convo_error *err)
{
    int64_t order;
    /* a copied delta whose row before is left behind is first stored in full */
    int rc = sq_lists_settle(c, src, beyond, &upto, err);
    if (rc == 0)
        rc = sq_cp_last_order(c, &order, err);
    int64_t v[7] = {key_of(src, 0), key_of(src, MAX_LENGTH), key_of(dst, 0), dst, upto,
                    order, convo__now_micros()};
    if (rc == 0)
        rc = run_ints(c, ST_CP_COPY, v, 7, "copying checkpoints", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_CP_TAKE_ORDERS, 1, sqlite3_changes(c->db), 0, 0,
                              "taking put orders", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_REACH_SET, 1, dst, 0, 0, "setting the thread's log bound",
                              err);
    int64_t blobs[4] = {src, 0, 0, dst};
    if (rc == 0)
        rc = run_ints(c, ST_BLOB_COPY, blobs, 4, "copying channel values", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_BLOB_UNUSED, 3, dst, key_of(dst, 0), key_of(dst, MAX_LENGTH),
                              "deleting unused channel values", err);
    return rc;
}
