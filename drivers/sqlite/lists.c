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

void sq_list_memo_clear(sq_conn *c)
{
    free(c->memo.stored);
    free(c->memo.full);
    memset(&c->memo, 0, sizeof c->memo);
}

static int data_version(sq_conn *c, int64_t *v, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_DATA_VERSION, &st, err);
    if (rc == 0 && (rc = sq_stmt_step(c, st, "reading the data version", err)) == 1) {
        *v = sqlite3_column_int64(st, 0);
        sq_stmt_done(st);
        return 0;
    }
    return rc < 0 ? rc : convo__error(err, CONVO_ERROR, NULL, "sqlite: no data_version");
}

/* 1 when the memo is checkpoint key stored as p[0..n) and no other
 * connection committed since it was taken (a row's stored bytes and the rows
 * before it decide its list, and a change to those rows goes through a
 * commit of another connection or through this one, which clears the memo). */
static int memo_hit(sq_conn *c, int64_t key, const void *p, size_t n, convo_error *err)
{
    int64_t v;
    if (!c->memo.valid || c->memo.key != key || c->memo.stored_len != n ||
        (n && memcmp(c->memo.stored, p, n) != 0))
        return 0;
    int rc = data_version(c, &v, err);
    return rc ? rc : v == c->memo.data_version;
}

/* Takes checkpoint key's stored and full lists as the memo (none when out of
 * memory: it only spares reads). */
static int memo_set(sq_conn *c, int64_t key, const void *stored, size_t n, const void *full,
                    size_t full_len, int depth, convo_error *err)
{
    int64_t v;
    int rc = data_version(c, &v, err);
    sq_list_memo_clear(c);
    if (rc)
        return rc;
    c->memo.stored = malloc(n ? n : 1);
    c->memo.full = malloc(full_len ? full_len : 1);
    if (!c->memo.stored || !c->memo.full) {
        sq_list_memo_clear(c);
        return 0;
    }
    if (n)
        memcpy(c->memo.stored, stored, n);
    if (full_len)
        memcpy(c->memo.full, full, full_len);
    c->memo = (struct sq_list_memo){key, v, c->memo.stored, c->memo.full, n, full_len, depth, 1};
    return 0;
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
        return rc == -1 ? no_memory(err) : list_corrupt(err);
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
    int rc = memo_hit(c, key, list, len, err);
    if (rc) {
        *out = c->memo.full;
        *outlen = c->memo.full_len;
        return rc < 0 ? rc : 0;
    }
    chain ch;
    sq_entry *e = NULL;
    size_t n = 0;
    sq_list_cache_clear(k);
    rc = chain_read(c, key, &ch, err);
    if (rc == 0)
        rc = ch.n ? chain_decode(&ch, k->keep_all ? k : NULL, &e, &n, err) : list_corrupt(err);
    if (rc == 0)
        rc = apply(&e, &n, list, len, err);
    if (rc == 0)
        rc = cache_put(k, key, e, n, out, outlen, err);
    if (rc == 0)
        rc = memo_set(c, key, list, len, *out, *outlen, (int)ch.n, err);
    free(e);
    chain_free(&ch);
    return rc;
}

/* The row before key in its thread: 1 with its key, whether its namespace is
 * ns and whether it is the memo; 0 when there is none. */
static int pred_probe(sq_conn *c, int64_t key, const char *ns, int64_t *pkey, int *same_ns,
                      int *memo, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_CHAIN, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(key >> SEQ_BITS, 0));
    sqlite3_bind_int64(st, 2, key);
    sqlite3_bind_int(st, 3, 1);
    if ((rc = sq_stmt_step(c, st, "reading the checkpoint before", err)) != 1)
        return rc;
    const char *pns = (const char *)sqlite3_column_text(st, 1);
    *pkey = sqlite3_column_int64(st, 0);
    *same_ns = pns && strcmp(pns, ns) == 0;
    rc = memo_hit(c, *pkey, sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2), err);
    sq_stmt_done(st);
    if (rc < 0)
        return rc;
    *memo = rc;
    return 1;
}

/* The entries of the full list of the row before key and how many deltas its
 * chain holds, packed in *hold (which the entries point into): from the memo,
 * else decoded; at the chain's bound (no full list within LIST_CHAIN_MAX rows
 * before key) *depth is LIST_CHAIN_MAX and the row's list is decoded against
 * its own chain (layout 11: a full list stored next carries its values). */
static int pred_list(sq_conn *c, int64_t key, int64_t pkey, int memo, sq_entry **base,
                     size_t *n, int *depth, unsigned char **hold, convo_error *err)
{
    size_t len = 0;
    int rc = 0;
    *base = NULL;
    *depth = LIST_CHAIN_MAX;
    if (memo) {
        *depth = c->memo.depth;
        len = c->memo.full_len;
        if (!(*hold = malloc(len ? len : 1)))
            return no_memory(err);
        if (len)
            memcpy(*hold, c->memo.full, len);
    } else {
        chain ch;
        sq_entry *e = NULL;
        if ((rc = chain_read(c, key, &ch, err)) == 0 && ch.full) {
            *depth = (int)ch.n - 1;
            rc = chain_decode(&ch, NULL, &e, n, err);
            if (rc == 0 && e && sq_list_pack(e, *n, 0, hold, &len) != 0)
                rc = no_memory(err);
        } else if (rc == 0 && ch.n) {
            sq_list_cache k = {0};
            const unsigned char *full;
            rc = sq_list_full(c, &k, pkey, ch.lists[0], ch.lens[0], &full, &len, err);
            if (rc == 0 && !(*hold = malloc(len ? len : 1)))
                rc = no_memory(err);
            if (rc == 0 && len)
                memcpy(*hold, full, len);
            sq_list_cache_clear(&k);
        }
        free(e);
        chain_free(&ch);
    }
    if (rc == 0 && *hold && (rc = sq_list_entries(*hold, len, base, n)) != 0)
        rc = rc == -1 ? no_memory(err) : list_corrupt(err);
    return rc;
}

int sq_list_base_get(sq_conn *c, int64_t key, const char *ns, sq_list_base *b,
                     convo_error *err)
{
    int same_ns = 0, memo = 0;
    memset(b, 0, sizeof *b);
    b->depth = LIST_CHAIN_MAX;
    int rc = pred_probe(c, key, ns, &b->pred, &same_ns, &memo, err);
    /* a full list: the thread's first, after another namespace, or a chain
     * at its bound */
    if (rc == 1 && same_ns)
        rc = pred_list(c, key, b->pred, memo, &b->e, &b->n, &b->depth, &b->hold, err);
    if (rc == 1 && !same_ns)
        b->pred = 0;
    if (rc < 0) {
        sq_list_base_free(b);
        return rc;
    }
    return 0;
}

void sq_list_base_free(sq_list_base *b)
{
    free(b->e);
    free(b->hold);
    memset(b, 0, sizeof *b);
}

/* The values over SQ_CARRY_MAX bytes that entries e[0..n) hold and held[]
 * says they did not bring go to convo_blobs (NULL held: every one). */
static int spill_large(sq_conn *c, int64_t num, const char *ns, sq_entry *e, size_t n,
                       const unsigned char *held, convo_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (e[i].type && e[i].value_len > SQ_CARRY_MAX && (!held || !held[i]))
            rc = sq_values_spill(c, num, ns, &e[i], err);
    return rc;
}

int sq_list_encode(sq_conn *c, int64_t key, const char *ns, const sq_list_base *b,
                   sq_entry *now, size_t n, unsigned char **out, size_t *outlen,
                   convo_error *err)
{
    unsigned char *full = NULL, *delta = NULL, *held = calloc(n ? n : 1, 1);
    size_t full_len = 0, delta_len = 0, nd = 0;
    sq_entry *d = NULL;
    int rc = 0;
    *out = NULL;
    if (!held)
        return no_memory(err);
    if (b->e)
        sq_list_fill(now, n, b->e, b->n);
    for (size_t i = 0; i < n; i++) { /* its own value, not the row before's */
        const sq_entry *f = b->e ? sq_list_find(b->e, b->n, now[i].channel, now[i].version,
                                                now[i].len) : NULL;
        held[i] = now[i].type != 0 && !(f && f->type);
    }
    if (sq_list_pack(now, n, 0, &full, &full_len) != 0) {
        free(held);
        return no_memory(err);
    }
    if (b->e && b->depth < LIST_CHAIN_MAX) {
        if (sq_list_diff(b->e, b->n, now, n, &d, &nd) != 0 ||
            sq_list_pack(d, nd, 1, &delta, &delta_len) != 0)
            rc = no_memory(err);
        else if (delta_len >= full_len) {
            free(delta);
            delta = NULL;
        }
    }
    free(d);
    /* stored in full: a large value from a row before is not repeated here */
    if (rc == 0 && !delta && (rc = spill_large(c, key >> SEQ_BITS, ns, now, n, held, err)) == 0) {
        free(full);
        if (sq_list_pack(now, n, 0, &full, &full_len) != 0) {
            full = NULL;
            rc = no_memory(err);
        }
    }
    free(held);
    if (rc == 0)
        rc = delta ? memo_set(c, key, delta, delta_len, full, full_len, b->depth + 1, err)
                   : memo_set(c, key, full, full_len, full, full_len, 0, err);
    if (rc) {
        free(full);
        free(delta);
        return rc;
    }
    if (delta) {
        free(full);
        full = delta;
        full_len = delta_len;
    }
    *out = full;
    *outlen = full_len;
    return 0;
}

/* The full list full[0..len) of a row of thread num, namespace ns, with its
 * values over SQ_CARRY_MAX bytes moved to convo_blobs: *out malloc'd. */
static int settled_form(sq_conn *c, int64_t num, const char *ns, const unsigned char *full,
                        size_t len, unsigned char **out, size_t *outlen, convo_error *err)
{
    sq_entry *e;
    size_t n;
    int rc = sq_list_entries(full, len, &e, &n);
    if (rc)
        return rc == -1 ? no_memory(err) : list_corrupt(err);
    if ((rc = spill_large(c, num, ns, e, n, NULL, err)) == 0 &&
        sq_list_pack(e, n, 0, out, outlen) != 0)
        rc = no_memory(err);
    free(e);
    return rc;
}

/* Stores checkpoint key's list in full if it is a delta. */
static int rebase(sq_conn *c, int64_t key, convo_error *err)
{
    sqlite3_stmt *st;
    sq_list_cache k = {0};
    sq_list_memo_clear(c);
    int rc = sq_stmt_get(c, ST_CP_LIST_OF, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    if ((rc = sq_stmt_step(c, st, "reading a channel list", err)) != 1)
        return rc; /* 0: no such row, nothing to store */
    rc = 0;
    size_t len = (size_t)sqlite3_column_bytes(st, 0);
    unsigned char *list = malloc(len ? len : 1);
    const char *ns_col = (const char *)sqlite3_column_text(st, 1);
    char *ns = strdup(ns_col ? ns_col : "");
    if (!list || !ns) {
        free(list);
        free(ns);
        sq_stmt_done(st);
        return no_memory(err);
    }
    if (len)
        memcpy(list, sqlite3_column_blob(st, 0), len);
    sq_stmt_done(st);
    const unsigned char *full;
    unsigned char *stored = NULL;
    size_t full_len, stored_len = 0;
    if (!is_delta(list, len) ||
        (rc = sq_list_full(c, &k, key, list, len, &full, &full_len, err)) != 0 ||
        (rc = settled_form(c, key >> SEQ_BITS, ns, full, full_len, &stored, &stored_len,
                           err)) != 0 ||
        (rc = sq_seg_hot(c, key, err)) < 0 || /* layout 17 */
        (rc = sq_stmt_get(c, rc ? ST_HOT_LIST_SET : ST_CP_LIST_SET, &st, err)) != 0) {
        free(list);
        free(ns);
        free(stored);
        sq_list_cache_clear(&k);
        return rc;
    }
    sqlite3_bind_int64(st, 1, key);
    sqlite3_bind_blob64(st, 2, stored, stored_len, SQLITE_STATIC);
    rc = sq_stmt_run(c, st, "storing a channel list in full", err);
    free(list);
    free(ns);
    free(stored);
    sq_list_cache_clear(&k);
    sq_list_memo_clear(c); /* it names the bytes the row had */
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
    sq_list_memo_clear(c); /* rows are about to go */
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
