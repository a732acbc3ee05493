/* values.c — layout 11's channel values in the channel list (docs/sqlite.md,
 * "Layout 11"): a small value a put brings is kept in its row's list entry for
 * that channel, not in a convo_blobs row; a read finds it through the same
 * bounded chain that decodes the list. A put finds where a version it lists
 * but its row before does not is already stored (a value is stored once) and
 * carries a small one into its own entry; the swap of a value into a log
 * reference rewrites each entry that holds it. */
#include "config.h"
#include "sqlite_int.h"
#include "compact.h"
#include <stdlib.h>
#include <string.h>

/* A value a put brings for a version new to its chain goes into the list
 * entry up to this many bytes (a LangGraph input until the next put swaps it
 * for a log reference); a larger one into convo_blobs. What a full list
 * repeats is bounded by SQ_CARRY_MAX (sq_list_encode, sqlite_int.h). */
#define INLINE_MAX 4096

/* 1 when convo_blobs holds (channel, version) of thread num, namespace ns. */
static int blob_has(sq_conn *c, int64_t num, const char *ns, const sq_entry *e,
                    convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_BLOB_HAS, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, e->channel);
    sqlite3_bind_blob64(st, 4, e->version, e->len, SQLITE_STATIC);
    rc = sq_stmt_step(c, st, "looking up a channel value", err);
    if (rc == 1)
        sq_stmt_done(st);
    return rc;
}

/* Keeps a copy of a found value in p (owned until sq_put_list_free). */
static int take_value(sq_put_list *p, sq_entry *to, const sq_entry *from, convo_error *err)
{
    unsigned char **grown = realloc(p->owned, (p->nowned + 1) * sizeof *grown);
    if (!grown)
        return no_memory(err);
    p->owned = grown;
    unsigned char *copy = malloc(from->value_len ? from->value_len : 1);
    if (!copy)
        return no_memory(err);
    if (from->value_len)
        memcpy(copy, from->value, from->value_len);
    p->owned[p->nowned++] = copy;
    to->type = from->type;
    to->value = copy;
    to->value_len = from->value_len;
    return 0;
}

/* Entries of p still looking (wanted[i]) found in the stored or decoded list
 * list[0..len): taken, and no longer wanted; *left counts those still wanted. */
static int look_in(sq_put_list *p, unsigned char *wanted, size_t *left, const void *list,
                   size_t len, convo_error *err)
{
    sq_entry *e;
    size_t n;
    int rc = 0;
    int maybe = 0;
    for (size_t i = 0; i < p->n && !maybe; i++) /* the version's bytes in it: a cheap test */
        maybe = wanted[i] && len >= p->e[i].len &&
                memmem(list, len, p->e[i].version, p->e[i].len) != NULL;
    if (!maybe)
        return 0;
    if ((rc = sq_list_entries(list, len, &e, &n)) != 0)
        return rc == -1 ? no_memory(err)
                        : convo__error(err, CONVO_ECORRUPT, NULL,
                                       "sqlite: a checkpoint's channel list does not decode");
    for (size_t i = 0; i < p->n && rc == 0; i++) {
        const sq_entry *f;
        if (wanted[i] &&
            (f = sq_list_find(e, n, p->e[i].channel, p->e[i].version, p->e[i].len)) &&
            f->type) {
            rc = take_value(p, &p->e[i], f, err);
            wanted[i] = 0;
            --*left;
        }
    }
    free(e);
    return rc;
}

/* The parent's list, decoded (at most LIST_CHAIN_MAX rows before it). */
static int look_in_parent(sq_conn *c, sq_put_list *p, unsigned char *wanted, size_t *left,
                          int64_t parent, convo_error *err)
{
    sqlite3_stmt *st;
    sq_list_cache k = {0};
    const unsigned char *full;
    size_t len;
    int rc = sq_stmt_get(c, ST_CP_LIST_OF, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, parent);
    if ((rc = sq_stmt_step(c, st, "reading a channel list", err)) != 1)
        return rc;
    size_t n = (size_t)sqlite3_column_bytes(st, 0);
    unsigned char *stored = malloc(n ? n : 1);
    if (stored && n)
        memcpy(stored, sqlite3_column_blob(st, 0), n);
    sq_stmt_done(st);
    if (!stored)
        return no_memory(err);
    rc = sq_list_full(c, &k, parent, stored, n, &full, &len, err);
    if (rc == 0)
        rc = look_in(p, wanted, left, full, len, err);
    free(stored);
    sq_list_cache_clear(&k);
    return rc;
}

/* The stored lists of the rows of namespace ns with keys in [lo, hi),
 * newest first, until nothing is wanted: a value is in the entry of a row that
 * lists its version (never only in the rows before it). */
static int look_in_rows(sq_conn *c, sq_put_list *p, unsigned char *wanted, size_t *left,
                        const char *ns, int64_t lo, int64_t hi, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_CHAIN, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, lo);
    sqlite3_bind_int64(st, 2, hi);
    sqlite3_bind_int(st, 3, -1);
    while (*left && (rc = sq_stmt_step(c, st, "reading channel lists", err)) == 1) {
        const char *rns = (const char *)sqlite3_column_text(st, 1);
        if (!rns || strcmp(rns, ns) != 0)
            continue;
        int found = look_in(p, wanted, left, sqlite3_column_blob(st, 2),
                            (size_t)sqlite3_column_bytes(st, 2), err);
        if (found != 0) {
            sq_stmt_done(st);
            return found;
        }
    }
    if (rc == 1)
        sq_stmt_done(st);
    return rc < 0 ? rc : 0;
}

/* The put's list entries with no value yet, each channel with the value it
 * brings (its index in cp->channels in from[]). */
static int entries_of(sq_conn *c, const convo_checkpoint_in *cp, sq_put_list *p,
                      size_t **from, convo_error *err)
{
    size_t n = cp->nchannels;
    int64_t *nums = malloc((n ? n : 1) * sizeof *nums);
    const char **versions = malloc((n ? n : 1) * sizeof *versions);
    int rc = nums && versions ? 0 : no_memory(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        versions[i] = cp->channels[i].version;
        rc = sq_name_num(c, cp->channels[i].channel, 1, &nums[i], err);
        rc = rc < 0 ? rc : 0;
    }
    if (rc == 0) {
        rc = sq_channels_pack(nums, versions, n, &p->packed, &p->packed_len);
        if (rc == -2)
            rc = convo__error(err, CONVO_EINVAL, NULL, "a checkpoint names a channel twice");
        else if (rc)
            rc = no_memory(err);
    }
    if (rc == 0 && (rc = sq_list_entries(p->packed, p->packed_len, &p->e, &p->n)) != 0)
        rc = rc == -1 ? no_memory(err) : convo__error(err, CONVO_ERROR, NULL,
                                                      "sqlite: a packed list does not decode");
    if (rc == 0 && !(*from = malloc((p->n ? p->n : 1) * sizeof **from)))
        rc = no_memory(err);
    for (size_t i = 0; i < p->n && rc == 0; i++) {
        size_t j = 0;
        while (j < n && nums[j] != p->e[i].channel)
            j++;
        (*from)[i] = j;
    }
    free(nums);
    free(versions);
    return rc;
}

int sq_values_place(sq_conn *c, int64_t num, const convo_checkpoint_in *cp, int old,
                    int64_t parent, const sq_list_base *b, sq_put_list *p, convo_error *err)
{
    size_t *from = NULL, left = 0;
    memset(p, 0, sizeof *p);
    int rc = entries_of(c, cp, p, &from, err);
    unsigned char *wanted = NULL;
    if (rc == 0 && !(wanted = calloc(p->n ? p->n : 1, 1)))
        rc = no_memory(err);
    if (rc == 0 && !(p->to_blob = calloc(cp->nchannels ? cp->nchannels : 1, 1)))
        rc = no_memory(err);
    /* versions the row before lists keep its value (sq_list_encode); the others
     * may be stored already: in convo_blobs, the parent's list, or a row of the
     * namespace put after the parent (all of them without a parent) */
    for (size_t i = 0; i < p->n && rc == 0; i++) {
        const convo_channel_in *in = &cp->channels[from[i]];
        const sq_entry *f = b->e ? sq_list_find(b->e, b->n, p->e[i].channel, p->e[i].version,
                                                p->e[i].len) : NULL;
        /* listed before: its value stays, or it had none there and this put
         * may bring the first */
        if (f && (f->type || !in->value))
            continue;
        if (in->value && (rc = blob_has(c, num, cp->checkpoint_ns, &p->e[i], err)) != 0) {
            rc = rc < 0 ? rc : 0;
            continue;
        }
        wanted[i] = 1;
        left++;
    }
    int64_t thread_lo = key_of(num, 0), thread_hi = key_of(num, MAX_LENGTH) + 1;
    if (rc == 0 && left && parent && parent != b->pred)
        rc = look_in_parent(c, p, wanted, &left, parent, err);
    /* a put right after its parent (every put of a run) has no row to read */
    if (rc == 0 && left && (!parent || parent != b->pred || old))
        rc = look_in_rows(c, p, wanted, &left, cp->checkpoint_ns,
                          parent ? parent + 1 : thread_lo, thread_hi, err);
    /* a large value found in another row: in convo_blobs rather than repeated */
    for (size_t i = 0; i < p->n && rc == 0; i++)
        if (!wanted[i] && p->e[i].type && p->e[i].value_len > SQ_CARRY_MAX)
            rc = sq_values_spill(c, num, cp->checkpoint_ns, &p->e[i], err);
    for (size_t i = 0; i < p->n && rc == 0; i++) {
        const convo_channel_in *in = &cp->channels[from[i]];
        if (!wanted[i] || !in->value)
            continue;
        if (in->value->len > INLINE_MAX) {
            p->to_blob[from[i]] = 1;
            continue;
        }
        int64_t type;
        if ((rc = sq_name_num(c, in->value->type, 1, &type, err)) < 0)
            break;
        rc = 0;
        p->e[i].type = type;
        p->e[i].value = in->value->len ? in->value->bytes : (const void *)"";
        p->e[i].value_len = in->value->len;
    }
    free(from);
    free(wanted);
    return rc;
}

void sq_put_list_free(sq_put_list *p)
{
    for (size_t i = 0; i < p->nowned; i++)
        free(p->owned[i]);
    free(p->owned);
    free(p->e);
    free(p->packed);
    free(p->to_blob);
    memset(p, 0, sizeof *p);
}

/* Entry (channel, version) of one stored list that holds exactly old_type /
 * old now holds new_type / new_value: 1 with the list packed anew in *out
 * (malloc'd), 0 when it holds no such value. */
static int swap_in(const unsigned char *list, size_t len, int64_t channel,
                   const unsigned char *version, size_t version_len, int64_t old_type,
                   const convo_blob *old, int64_t new_type, const convo_blob *new_value,
                   unsigned char **out, size_t *outlen, convo_error *err)
{
    sq_entry *e, *f;
    size_t n;
    if (len < version_len || !memmem(list, len, version, version_len))
        return 0;
    int rc = sq_list_entries(list, len, &e, &n);
    if (rc)
        return rc == -1 ? no_memory(err)
                        : convo__error(err, CONVO_ECORRUPT, NULL,
                                       "sqlite: a checkpoint's channel list does not decode");
    f = (sq_entry *)sq_list_find(e, n, channel, version, version_len);
    if (f && f->type == old_type && f->value_len == old->len &&
        (old->len == 0 || memcmp(f->value, old->bytes, old->len) == 0)) {
        f->type = new_type;
        f->value = new_value->len ? new_value->bytes : (const void *)"";
        f->value_len = new_value->len;
        rc = sq_list_pack(e, n, len && list[0] == 0, out, outlen) ? no_memory(err) : 1;
    }
    free(e);
    return rc;
}

static int list_store(sq_conn *c, int64_t key, const unsigned char *list, size_t len,
                      convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_seg_hot(c, key, err); /* layout 17 */
    if (rc >= 0)
        rc = sq_stmt_get(c, rc ? ST_HOT_LIST_SET : ST_CP_LIST_SET, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    sqlite3_bind_blob64(st, 2, len ? (const void *)list : "", len, SQLITE_STATIC);
    return sq_stmt_run(c, st, "replacing a value by a log reference", err);
}

/* The connection's memo (lists.c) after a swap rewrote rows keys[0..n): its
 * full list holds the new value, and its stored bytes are the row's new ones
 * when it is one of them; -1 when it cannot be kept (then cleared). */
static int memo_swap(sq_conn *c, const int64_t *keys, unsigned char **lists,
                     const size_t *lens, size_t n, int64_t channel,
                     const unsigned char *version, size_t version_len, int64_t old_type,
                     const convo_blob *old, int64_t new_type, const convo_blob *new_value)
{
    convo_error ignored;
    unsigned char *full = NULL, *stored = NULL;
    size_t full_len = 0;
    if (!c->memo.valid)
        return 0;
    int rc = swap_in(c->memo.full, c->memo.full_len, channel, version, version_len, old_type,
                     old, new_type, new_value, &full, &full_len, &ignored);
    if (rc < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (keys[i] == c->memo.key && !(stored = malloc(lens[i] ? lens[i] : 1))) {
            free(full);
            return -1;
        } else if (keys[i] == c->memo.key) {
            memcpy(stored, lists[i], lens[i]);
            free(c->memo.stored);
            c->memo.stored = stored;
            c->memo.stored_len = lens[i];
        }
    if (rc == 1) {
        free(c->memo.full);
        c->memo.full = full;
        c->memo.full_len = full_len;
    }
    return 0;
}

int sq_values_swap(sq_conn *c, int64_t key, const char *ns, int64_t channel,
                   const unsigned char *version, size_t version_len, int64_t old_type,
                   const convo_blob *old, int64_t new_type, const convo_blob *new_value,
                   convo_error *err)
{
    sqlite3_stmt *st;
    int64_t lo = key - LIST_CHAIN_MAX, first = key_of(key >> SEQ_BITS, 0);
    int swapped = 0, rc = sq_stmt_get(c, ST_CP_CHAIN, &st, err);
    if (rc)
        return rc;
    /* the rows first (the statement reads newest first), then each rewritten */
    int64_t *keys = NULL;
    unsigned char **lists = NULL;
    size_t *lens = NULL, n = 0;
    sqlite3_bind_int64(st, 1, lo < first ? first : lo);
    sqlite3_bind_int64(st, 2, key_of((key >> SEQ_BITS) + 1, 0));
    sqlite3_bind_int(st, 3, -1);
    while ((rc = sq_stmt_step(c, st, "reading channel lists", err)) == 1) {
        const char *rns = (const char *)sqlite3_column_text(st, 1);
        unsigned char *now;
        size_t len;
        if (!rns || strcmp(rns, ns) != 0)
            continue;
        rc = swap_in(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2), channel,
                     version, version_len, old_type, old, new_type, new_value, &now, &len, err);
        if (rc == 1) {
            int64_t *k2 = realloc(keys, (n + 1) * sizeof *k2);
            keys = k2 ? k2 : keys;
            unsigned char **l2 = k2 ? realloc(lists, (n + 1) * sizeof *l2) : NULL;
            lists = l2 ? l2 : lists;
            size_t *n2 = l2 ? realloc(lens, (n + 1) * sizeof *n2) : NULL;
            lens = n2 ? n2 : lens;
            if (!n2) {
                free(now);
                rc = no_memory(err);
            } else {
                keys[n] = sqlite3_column_int64(st, 0);
                lists[n] = now;
                lens[n++] = len;
                rc = 0;
            }
        }
        if (rc < 0) {
            sq_stmt_done(st);
            break;
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        if ((rc = list_store(c, keys[i], lists[i], lens[i], err)) == 0)
            swapped = 1;
    if (swapped && rc == 0 &&
        memo_swap(c, keys, lists, lens, n, channel, version, version_len, old_type, old,
                  new_type, new_value) != 0)
        sq_list_memo_clear(c);
    for (size_t i = 0; i < n; i++)
        free(lists[i]);
    free(keys);
    free(lists);
    free(lens);
    return rc < 0 ? rc : swapped;
}

int sq_values_spill(sq_conn *c, int64_t num, const char *ns, sq_entry *e, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_BLOB_PUT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, e->channel);
    sqlite3_bind_blob64(st, 4, e->version, e->len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, e->type);
    sqlite3_bind_blob64(st, 6, e->value_len ? (const void *)e->value : "", e->value_len,
                        SQLITE_STATIC);
    if ((rc = sq_stmt_run(c, st, "storing a channel value", err)) == 0) {
        e->type = 0;
        e->value = NULL;
        e->value_len = 0;
    }
    return rc;
}
