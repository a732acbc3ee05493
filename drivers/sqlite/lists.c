/* lists.c — layout 9's channel lists as deltas (docs/sqlite.md, "Layout 9"):
 * a checkpoint's list is stored as what changed against the list of the row
 * just before it in its thread (same namespace), a full list at least every
 * LIST_CHAIN_MAX rows; reading one decodes that bounded chain with one
 * statement, and a row whose predecessor is about to go (prune, delete,
 * delete-by-run, a rewrite dropping checkpoints, a copy leaving it behind, a
 * re-put changing it) is stored in full first, in the same transaction. */
#include "config.h"
#include "sqlite_int.h"
#include "compact.h"
#include <stdlib.h>
#include <string.h>

static int list_corrupt(convo_error *err)
{
    return convo__error(err, CONVO_ECORRUPT, NULL,
                        "sqlite: a checkpoint's channel list does not decode against the rows "
                        "before it");
}

static int is_delta(const void *p, size_t n)
{
    return n > 0 && ((const unsigned char *)p)[0] == 0;
}

void sq_list_cache_clear(sq_list_cache *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->lists[i]);
    k->n = 0;
}

/* The rows before key back to the first full list (at most LIST_CHAIN_MAX),
 * newest first, each list copied. */
typedef struct chain {
    unsigned char *lists[LIST_CHAIN_MAX];
    size_t lens[LIST_CHAIN_MAX];
    int64_t keys[LIST_CHAIN_MAX];
    size_t n;
    int full;      /* the last one read is a full list */
    char *ns;      /* the namespace of the row just before key; NULL: none */
} chain;

static void chain_free(chain *ch)
{
    for (size_t i = 0; i < ch->n; i++)
        free(ch->lists[i]);
    free(ch->ns);
}

static int chain_read(sq_conn *c, int64_t key, chain *ch, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_CHAIN, &st, err);
    memset(ch, 0, sizeof *ch);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(key >> SEQ_BITS, 0));
    sqlite3_bind_int64(st, 2, key);
    sqlite3_bind_int(st, 3, LIST_CHAIN_MAX);
    while (!ch->full && (rc = sq_stmt_step(c, st, "reading channel lists", err)) == 1) {
        const void *p = sqlite3_column_blob(st, 2);
        size_t n = (size_t)sqlite3_column_bytes(st, 2);
        const char *ns = (const char *)sqlite3_column_text(st, 1);
        if (ch->n == 0 && !(ch->ns = strdup(ns ? ns : "")))
            rc = no_memory(err);
        else if (!(ch->lists[ch->n] = malloc(n ? n : 1)))
            rc = no_memory(err);
        if (rc < 0) {
            sq_stmt_done(st);
            return rc;
        }
        if (n)
            memcpy(ch->lists[ch->n], p, n);
        ch->lens[ch->n] = n;
        ch->keys[ch->n++] = sqlite3_column_int64(st, 0);
        ch->full = !is_delta(p, n);
    }
    if (ch->full)
        sq_stmt_done(st);
    return rc < 0 ? rc : 0;
}

/* Entries of one stored list applied onto *cur (NULL: none yet). */
static int apply(sq_entry **cur, size_t *ncur, const unsigned char *p, size_t n,
                 convo_error *err)
{
    sq_entry *d, *merged;
    size_t nd, nm;
    int rc = sq_list_entries(p, n, &d, &nd);
    if (rc)
        return rc == -1 ? no_memory(err) : list_corrupt(err);
    if (!*cur) {
        *cur = d;
        *ncur = nd;
        return is_delta(p, n) ? list_corrupt(err) : 0;
    }
    rc = sq_list_apply(*cur, *ncur, d, nd, &merged, &nm);
    free(d);
    if (rc)
        return no_memory(err);
    free(*cur);
    *cur = merged;
    *ncur = nm;
    return 0;
}

/* Keeps a decoded list (packed in full) in the cache, which is cleared when
 * full; *out points at it. */
static int cache_put(sq_list_cache *k, int64_t key, const sq_entry *e, size_t n,
                     const unsigned char **out, size_t *outlen, convo_error *err)
{
    if (k->n == LIST_CACHE_MAX)
        sq_list_cache_clear(k);
    if (sq_list_pack(e, n, 0, &k->lists[k->n], &k->lens[k->n]) != 0)
        return no_memory(err);
    k->keys[k->n] = key;
    if (out) {
        *out = k->lists[k->n];
        *outlen = k->lens[k->n];
    }
    k->n++;
    return 0;
}

/* The entries of the full list of the row before key, from ch (read by
 * chain_read); with k every row's decoded list is kept in it on the way. */
static int chain_decode(chain *ch, sq_list_cache *k, sq_entry **out, size_t *n,
                        convo_error *err)
{
    if (!ch->full)
        return ch->n ? list_corrupt(err) : 0;
    int rc = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = ch->n; i-- > 0 && rc == 0;) {
        rc = apply(out, n, ch->lists[i], ch->lens[i], err);
        if (rc == 0 && k)
            rc = cache_put(k, ch->keys[i], *out, *n, NULL, NULL, err);
    }
    return rc;
}

int sq_list_full(sq_conn *c, sq_list_cache *k, int64_t key, const void *list, size_t len,
                 const unsigned char **out, size_t *outlen, convo_error *err)
{
    *out = list ? list : (const void *)"";
    *outlen = len;
    if (!is_delta(list, len))
        return 0;
    for (size_t i = 0; i < k->n; i++)
        if (k->keys[i] == key) {
            *out = k->lists[i];
            *outlen = k->lens[i];
            return 0;
        }
    chain ch;
    sq_entry *e = NULL;
    size_t n = 0;
    sq_list_cache_clear(k);
    int rc = chain_read(c, key, &ch, err);
    if (rc == 0)
        rc = ch.n ? chain_decode(&ch, k->keep_all ? k : NULL, &e, &n, err) : list_corrupt(err);
    if (rc == 0)
        rc = apply(&e, &n, list, len, err);
    if (rc == 0)
        rc = cache_put(k, key, e, n, out, outlen, err);
    free(e);
    chain_free(&ch);
    return rc;
}

int sq_list_for_put(sq_conn *c, int64_t key, const char *ns, const unsigned char *full,
                    size_t len, unsigned char **out, size_t *outlen, convo_error *err)
{
    chain ch;
    sq_entry *base = NULL, *now = NULL, *d = NULL;
    size_t nbase = 0, nnow = 0, nd = 0;
    *out = NULL;
    int rc = chain_read(c, key, &ch, err);
    /* a full list: the thread's first, after another namespace, or a chain
     * at its bound */
    if (rc || !ch.full || strcmp(ch.ns, ns) != 0) {
        chain_free(&ch);
        return rc;
    }
    rc = chain_decode(&ch, NULL, &base, &nbase, err);
    if (rc == 0 && (rc = sq_list_entries(full, len, &now, &nnow)) != 0)
        rc = rc == -1 ? no_memory(err) : list_corrupt(err);
    if (rc == 0 && sq_list_diff(base, nbase, now, nnow, &d, &nd) != 0)
        rc = no_memory(err);
    if (rc == 0 && sq_list_pack(d, nd, 1, out, outlen) != 0)
        rc = no_memory(err);
    if (rc == 0 && *outlen >= len) {
        free(*out);
        *out = NULL;
    }
    free(base);
    free(now);
    free(d);
    chain_free(&ch);
    return rc;
}

/* Stores checkpoint key's list in full if it is a delta. */
static int rebase(sq_conn *c, int64_t key, convo_error *err)
{
    sqlite3_stmt *st;
    sq_list_cache k = {0};
    int rc = sq_stmt_get(c, ST_CP_LIST_OF, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    if ((rc = sq_stmt_step(c, st, "reading a channel list", err)) != 1)
        return rc; /* 0: no such row, nothing to store */
    rc = 0;
    size_t len = (size_t)sqlite3_column_bytes(st, 0);
    unsigned char *list = malloc(len ? len : 1);
    if (!list) {
        sq_stmt_done(st);
        return no_memory(err);
    }
    if (len)
        memcpy(list, sqlite3_column_blob(st, 0), len);
    sq_stmt_done(st);
    const unsigned char *full;
    size_t full_len;
    if (!is_delta(list, len) ||
        (rc = sq_list_full(c, &k, key, list, len, &full, &full_len, err)) != 0 ||
        (rc = sq_stmt_get(c, ST_CP_LIST_SET, &st, err)) != 0) {
        free(list);
        sq_list_cache_clear(&k);
        return rc;
    }
    sqlite3_bind_int64(st, 1, key);
    sqlite3_bind_blob64(st, 2, full, full_len, SQLITE_STATIC);
    rc = sq_stmt_run(c, st, "storing a channel list in full", err);
    free(list);
    sq_list_cache_clear(&k);
    return rc;
}

int sq_list_before_change(sq_conn *c, int64_t key, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_NEXT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    sqlite3_bind_int64(st, 2, key_of(key >> SEQ_BITS, MAX_LENGTH));
    if ((rc = sq_stmt_step(c, st, "reading the next checkpoint", err)) != 1)
        return rc;
    int64_t next = sqlite3_column_int64(st, 0);
    int delta = sqlite3_column_int(st, 1);
    sq_stmt_done(st);
    return delta ? rebase(c, next, err) : 0;
}

int sq_lists_settle(sq_conn *c, int64_t num, sq_gone_fn gone, void *arg, convo_error *err)
{
    sqlite3_stmt *st;
    int64_t *keys = NULL;
    size_t n = 0, cap = 0;
    int prev_gone = 0, rc = sq_stmt_get(c, ST_CP_LIST_WALK, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, 0));
    sqlite3_bind_int64(st, 2, key_of(num, MAX_LENGTH));
    while ((rc = sq_stmt_step(c, st, "reading checkpoints", err)) == 1) {
        int64_t key = sqlite3_column_int64(st, 0);
        int goes = gone(arg, key, sqlite3_column_int64(st, 1));
        if (!goes && prev_gone && sqlite3_column_int(st, 2)) {
            if (n == cap) {
                int64_t *grown = realloc(keys, (cap = cap ? 2 * cap : 16) * sizeof *grown);
                if (!grown) {
                    sq_stmt_done(st);
                    rc = no_memory(err);
                    break;
                }
                keys = grown;
            }
            keys[n++] = key;
        }
        prev_gone = goes;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = rebase(c, keys[i], err);
    free(keys);
    return rc < 0 ? rc : 0;
}
