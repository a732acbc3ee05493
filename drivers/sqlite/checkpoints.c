/* checkpoints.c — the SQLite driver's checkpoints: the checkpoint rows (keyed
 * by thread and position, with the store's put_order and their channel list in
 * one column), the channel values stored once per version (convo_blobs),
 * pending writes; put, put with messages, put_writes, get and list (removing
 * them — prune, delete, the beyond-a-length sweep — and copying: removal.c). The
 * statements are statements/cp-*.sql, ch-*.sql, blob-*.sql and write-*.sql;
 * ids, versions and channel lists in layout 7's compact forms (compact.c). */
#include "config.h"
#include "sqlite_int.h"
#include "compact.h"
#include "pending.h"
#include "body.h" /* lib/: the metadata's shape and values */
#include <stdlib.h>
#include <string.h>

static int cp_not_found(convo_error *err)
{
    return convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
}

/* Binds text, or NULL when s is NULL. */
static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* Binds bytes as a BLOB (never NULL, also when empty). */
static void bind_bytes(sqlite3_stmt *st, int i, const void *bytes, size_t len)
{
    sqlite3_bind_blob64(st, i, len ? bytes : "", len, SQLITE_STATIC);
}

/* 1 with *at filled for checkpoint (ns, id) of thread num, 0 if none. */
int sq_cp_find(sq_conn *c, int64_t num, const char *ns, const char *id, cp_place *at,
               convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_FIND, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sq_bind_id(st, 3, id);
    if ((rc = sq_stmt_step(c, st, "reading a checkpoint", err)) == 1) {
        at->key = sqlite3_column_int64(st, 0);
        at->created_at = sqlite3_column_int64(st, 1);
        at->put_order = sqlite3_column_int64(st, 2);
        sq_stmt_done(st);
    }
    return rc;
}

/* The key of a new checkpoint of thread num: after the newest, so the key
 * order is the order of first put. */
static int cp_next_key(sq_conn *c, int64_t num, int64_t *key, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_LAST, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, 0));
    sqlite3_bind_int64(st, 2, key_of(num, MAX_LENGTH));
    *key = key_of(num, 0);
    if ((rc = sq_stmt_step(c, st, "reading the newest checkpoint", err)) == 1) {
        *key = sqlite3_column_int64(st, 0) + 1;
        sq_stmt_done(st);
        rc = 0;
    }
    if (rc == 0 && *key > key_of(num, MAX_LENGTH))
        rc = convo__error(err, CONVO_ETOOLARGE, NULL,
                          "sqlite: a thread holds at most %lld checkpoints", (long long)MAX_LENGTH);
    return rc;
}

/* The store's last put_order (kept in convo_meta, read inside the write
 * transaction). */
int sq_cp_last_order(sq_conn *c, int64_t *put_order, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_LAST_ORDER, &st, err);
    if (rc)
        return rc;
    if ((rc = sq_stmt_step(c, st, "reading the newest checkpoint", err)) != 1)
        return rc < 0 ? rc : convo__error(err, CONVO_ECORRUPT, NULL,
                                          "sqlite: convo_meta has no checkpoint_order");
    *put_order = sqlite3_column_int64(st, 0);
    sq_stmt_done(st);
    return 0;
}

/* The put_order of a new checkpoint: after every other one of the store. */
static int cp_next_order(sq_conn *c, int64_t *put_order, convo_error *err)
{
    int rc = sq_run_with_ints(c, ST_CP_TAKE_ORDERS, 1, 1, 0, 0, "taking a put order", err);
    return rc ? rc : sq_cp_last_order(c, put_order, err);
}

/* The number of name (a channel name, value type or task path) in
 * convo_names, which keeps each once: 1 with *num, or with create 0, 0 when
 * it has none; with create a new name is added in the caller's transaction. */
int sq_name_num(sq_conn *c, const char *name, int create, int64_t *num, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_NAME_FIND, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if ((rc = sq_stmt_step(c, st, "reading a name", err)) == 1) {
        *num = sqlite3_column_int64(st, 0);
        sq_stmt_done(st);
        return 1;
    }
    if (rc < 0 || !create)
        return rc;
    if ((rc = sq_stmt_get(c, ST_NAME_ADD, &st, err)) != 0)
        return rc;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if ((rc = sq_stmt_run(c, st, "storing a name", err)) != 0)
        return rc;
    *num = sqlite3_last_insert_rowid(c->db);
    return 1;
}

/* Binds the number of name, added when new. */
static int bind_name(sq_conn *c, sqlite3_stmt *st, int i, const char *name, convo_error *err)
{
    int64_t num;
    int rc = sq_name_num(c, name, 1, &num, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, i, num);
    return 0;
}

/* Binds metadata (?6, ?14: cp-put.sql) as its values and the number of its
 * shape (layout 8), the shape added to convo_names when new and fewer than
 * SHAPE_NAMES_MAX names are kept; else as its text. *values: what to free
 * after the statement ran. */
static int bind_metadata(sq_conn *c, sqlite3_stmt *st, const char *metadata, void **values,
                         convo_error *err)
{
    char *shape = NULL;
    size_t len = 0;
    int64_t num = 0;
    int rc = convo__json_shape_split(metadata, strlen(metadata), SHAPE_MAX_BYTES, &shape,
                                     values, &len);
    if (rc < 0)
        return no_memory(err);
    int found = rc == 0 ? sq_name_num(c, shape, 0, &num, err) : 0;
    if (rc == 0 && found == 0) {
        sqlite3_stmt *q;
        if ((found = sq_stmt_get(c, ST_NAME_LAST, &q, err)) == 0 &&
            (found = sq_stmt_step(c, q, "counting names", err)) == 1) {
            int64_t names = sqlite3_column_int64(q, 0);
            sq_stmt_done(q);
            found = names < SHAPE_NAMES_MAX ? sq_name_num(c, shape, 1, &num, err) : 0;
        }
    }
    free(shape);
    if (found != 1) {
        free(*values);
        *values = NULL;
    }
    if (found < 0)
        return found;
    if (found == 1) {
        sqlite3_bind_blob(st, 6, *values, (int)len, SQLITE_STATIC);
        sqlite3_bind_int64(st, 14, num);
    } else {
        sqlite3_bind_text(st, 6, metadata, -1, SQLITE_STATIC);
        sqlite3_bind_null(st, 14);
    }
    return 0;
}

/* Binds cp-put.sql's arguments (cp-put-hot.sql and hot-put.sql take the same)
 * and runs st. */
static int cp_row_run(sq_conn *c, sqlite3_stmt *st, int64_t num, const cp_place *at,
                      int64_t near, int old, const convo_checkpoint_in *cp,
                      const unsigned char *channels, size_t channels_len, convo_error *err)
{
    void *values = NULL;
    int rc;
    sqlite3_bind_int64(st, 1, at->key);
    sqlite3_bind_int64(st, 2, num);
    sqlite3_bind_text(st, 3, cp->checkpoint_ns, -1, SQLITE_STATIC);
    sq_bind_id(st, 4, cp->checkpoint_id);
    sq_bind_id(st, 5, near ? NULL : cp->parent_id);
    if (near)
        sqlite3_bind_int64(st, 13, near);
    else
        sqlite3_bind_null(st, 13);
    if ((rc = bind_metadata(c, st, cp->metadata_json, &values, err)) != 0 ||
        (cp->body.type && (rc = bind_name(c, st, 7, cp->body.type, err)) != 0)) {
        sq_stmt_done(st);
        return rc;
    }
    if (!cp->body.type)
        sqlite3_bind_null(st, 7);
    if (cp->body.type)
        bind_bytes(st, 8, cp->body.bytes, cp->body.len);
    sqlite3_bind_int64(st, 9, cp->log_length);
    sqlite3_bind_int64(st, 10, at->created_at);
    sqlite3_bind_int64(st, 11, at->put_order);
    bind_bytes(st, 12, channels, channels_len);
    sqlite3_bind_int(st, 15, old);
    rc = sq_stmt_run(c, st, "storing a checkpoint", err);
    free(values);
    return rc;
}

/* near: how many places before at->key the parent is (it is named by that
 * place, not by its id), or 0 (by its id); parent: the parent's key (0: none
 * or not found); old: the row is there already (its pending writes stay).
 * Layout 11: the list's entries hold the small values (values.c); the values
 * for convo_blobs are marked in p->to_blob. Layout 17: stored hot (the moved
 * columns in convo_checkpoint_hot, then the row), or with seal=0 in the row. */
static int cp_row_put(sq_conn *c, int64_t num, const cp_place *at, int64_t near,
                      int64_t parent, int old, const convo_checkpoint_in *cp,
                      sq_put_list *p, convo_error *err)
{
    sqlite3_stmt *st;
    sq_list_base base;
    unsigned char *channels = NULL;
    size_t channels_len = 0;
    int rc = sq_list_base_get(c, at->key, cp->checkpoint_ns, &base, err);
    if (rc)
        return rc;
    if ((rc = sq_values_place(c, num, cp, old, parent, &base, p, err)) == 0)
        rc = sq_list_encode(c, at->key, cp->checkpoint_ns, &base, p->e, p->n, &channels,
                            &channels_len, err);
    sq_list_base_free(&base);
    if (rc == 0 && (rc = sq_stmt_get(c, c->seal ? ST_HOT_PUT : ST_CP_PUT, &st, err)) == 0)
        rc = cp_row_run(c, st, num, at, near, old, cp, channels, channels_len, err);
    if (rc == 0 && c->seal && (rc = sq_stmt_get(c, ST_CP_PUT_HOT, &st, err)) == 0)
        rc = cp_row_run(c, st, num, at, near, old, cp, channels, channels_len, err);
    free(channels);
    if (rc == 0 && !c->seal && old)
        rc = sq_run_with_ints(c, ST_HOT_DELETE, 1, at->key, 0, 0, "storing a checkpoint", err);
    return rc ? rc : sq_run_with_ints(c, ST_REACH_RAISE, 2, num, cp->log_length, 0,
                                      "raising the thread's log bound", err);
}

/* Binds a channel version in its stored form (compact.c). */
static int bind_version(sqlite3_stmt *st, int i, const char *version, convo_error *err)
{
    size_t len = strlen(version);
    unsigned char *packed = malloc(len + 16);
    if (!packed)
        return no_memory(err);
    sqlite3_bind_blob64(st, i, packed, sq_version_pack(version, len, packed), free);
    return 0;
}

/* A value is stored once per (thread, ns, channel, version): a put that
 * brings a version already stored keeps the stored one (INSERT OR IGNORE). */
static int cp_blob_put(sq_conn *c, int64_t num, const char *ns, const convo_channel_in *ch,
                       convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_BLOB_PUT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    if ((rc = bind_name(c, st, 3, ch->channel, err)) != 0 ||
        (rc = bind_version(st, 4, ch->version, err)) != 0 ||
        (rc = bind_name(c, st, 5, ch->value->type, err)) != 0)
        return rc;
    bind_bytes(st, 6, ch->value->bytes, ch->value->len);
    return sq_stmt_run(c, st, "storing a channel value", err);
}

/* The values the snapshot brings that its list's entries do not hold (large
 * ones, layout 11). */
static int cp_values_put(sq_conn *c, int64_t num, const convo_checkpoint_in *cp,
                         const sq_put_list *p, convo_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < cp->nchannels && rc == 0; i++)
        if (cp->channels[i].value && p->to_blob[i])
            rc = cp_blob_put(c, num, cp->checkpoint_ns, &cp->channels[i], err);
    return rc;
}

/* Layout 13: a new checkpoint of thread num (row key) moves the pending
 * writes waiting apart of the rows before the one before it into their rows:
 * swapped by the put before, and no longer the last row, whose growth would
 * move it to a page of its own and leave its place empty. */
static int pending_settle(sq_conn *c, int64_t num, int64_t key, convo_error *err)
{
    sqlite3_stmt *st;
    int64_t lo = key_of(num, 0), hi = key - 2, keys[2];
    void *records[2] = {NULL, NULL};
    size_t lens[2], n = 0;
    if (hi < lo)
        return 0;
    int rc = sq_stmt_get(c, ST_CP_PENDING_SETTLE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, lo);
    sqlite3_bind_int64(st, 2, hi);
    /* at most two wait (cp-pending-get.sql); copied out before the rows change */
    while (rc == 0 && (rc = sq_stmt_step(c, st, "reading waiting pending writes", err)) == 1) {
        size_t len = (size_t)sqlite3_column_bytes(st, 1);
        int null = sqlite3_column_type(st, 1) == SQLITE_NULL; /* a call of no writes */
        if (n == 2 || (!null && !(records[n] = malloc(len ? len : 1)))) {
            sq_stmt_done(st);
            rc = n == 2 ? convo__error(err, CONVO_ECORRUPT, NULL,
                                       "sqlite: more than two checkpoints' writes wait")
                        : no_memory(err);
            break;
        }
        if (len)
            memcpy(records[n], sqlite3_column_blob(st, 1), len);
        keys[n] = sqlite3_column_int64(st, 0);
        lens[n++] = len;
        rc = 0;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        if ((rc = sq_seg_hot(c, keys[i], err)) >= 0 &&
            (rc = sq_stmt_get(c, rc ? ST_HOT_PENDING_SET : ST_CP_PENDING_SET, &st, err)) == 0) {
            sqlite3_bind_int64(st, 1, keys[i]);
            if (records[i])
                sqlite3_bind_blob64(st, 2, records[i], lens[i], SQLITE_STATIC);
            else
                sqlite3_bind_null(st, 2);
            rc = sq_stmt_run(c, st, "moving pending writes into their checkpoint", err);
        }
    for (size_t i = 0; i < n; i++)
        free(records[i]);
    if (rc == 0 && n)
        rc = sq_run_with_ints(c, ST_CP_PENDING_SETTLED, 2, lo, hi, 0,
                              "moving pending writes into their checkpoint", err);
    return rc;
}

/* Stores cp in thread num, which existed before this transaction when found.
 * The same key again replaces the checkpoint in place, keeping its key and
 * put_order (its places in the orders), created_at and pending writes; its
 * channel list is written anew with the row. */
static int cp_store(sq_conn *c, int64_t num, int found, const convo_checkpoint_in *cp,
                    convo_error *err)
{
    cp_place at = {0, 0, convo__now_micros()};
    int old = found ? sq_cp_find(c, num, cp->checkpoint_ns, cp->checkpoint_id, &at, err) : 0;
    if (old < 0)
        return old;
    int rc = old ? 0 : cp_next_key(c, num, &at.key, err);
    if (rc == 0 && !old)
        rc = cp_next_order(c, &at.put_order, err);
    cp_place parent = {0, 0, 0};
    int64_t near = 0;
    if (rc == 0 && found && cp->parent_id) {
        rc = sq_cp_find(c, num, cp->checkpoint_ns, cp->parent_id, &parent, err);
        near = rc == 1 && at.key - parent.key >= 1 && at.key - parent.key <= PARENT_NEAR
                   ? at.key - parent.key : 0;
        if (rc != 1)
            parent.key = 0;
        rc = rc < 0 ? rc : 0;
    }
    if (rc == 0 && old) { /* layout 17: a sealed checkpoint put again is hot */
        int hot = sq_seg_hot(c, at.key, err);
        rc = hot < 0 ? hot : 0;
    }
    if (rc == 0 && old)
        rc = sq_list_before_change(c, at.key, err);
    if (rc == 0 && !old)
        rc = pending_settle(c, num, at.key, err);
    sq_put_list p = {0};
    if (rc == 0)
        rc = cp_row_put(c, num, &at, near, parent.key, old, cp, &p, err);
    if (rc == 0)
        rc = cp_values_put(c, num, cp, &p, err);
    sq_put_list_free(&p);
    return rc == 0 && !old ? sq_seg_after_put(c, at.key, err) : rc;
}

typedef struct put_args {
    const convo_checkpoint_in *cp;
    const convo_message_in *msgs; /* cp->nmessages of them, or none */
    size_t nmsgs;
    int generation_checked;       /* cp->expected_generation is a condition */
    const convo_swap *swaps;
    size_t nswaps;
} put_args;

static int swap_one(sq_conn *c, int64_t num, const char *ns, const convo_swap *w,
                    convo_error *err);

/* The put of checkpoint_put, put_log and put_refs: the conditions, then the
 * messages as append stores them (nmsgs > 0), the swaps of put_refs, then the
 * checkpoint, in the caller's write transaction; *t is the thread after it. */
static int put_in_tx(sq_conn *c, const put_args *a, thread_row *t, convo_error *err)
{
    const convo_checkpoint_in *cp = a->cp;
    int found = sq_thread_find(c, cp->thread_id, VIEW_WRITE, t, err);
    if (found < 0)
        return found;
    if (a->nmsgs && t->length != cp->expected_length)
        return sq_length_conflict(t->length, cp->expected_length, err);
    if (a->generation_checked && cp->expected_generation >= 0 &&
        cp->expected_generation != t->generation)
        return sq_generation_conflict(t->generation, cp->expected_generation, err);
    int rc = a->nmsgs ? sq_log_append(c, cp->thread_id, found, t, a->msgs, a->nmsgs, NULL, err)
                      : sq_thread_ensure(c, cp->thread_id, found, t, err);
    /* the swaps first: the rows they shrink (the parent's, layout 11) make
     * room in their page for the new row */
    for (size_t i = 0; i < a->nswaps && rc == 0; i++)
        rc = swap_one(c, t->num, cp->checkpoint_ns, &a->swaps[i], err);
    return rc ? rc : cp_store(c, t->num, found, cp, err);
}

static int cp_put_tx(sq_conn *c, void *arg, convo_error *err)
{
    thread_row t;
    return put_in_tx(c, arg, &t, err);
}

int sq_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    put_args a = {cp, NULL, 0, 0, NULL, 0};
    return sq_run_tx(b, 1, cp_put_tx, &a, err);
}

/* The messages and the checkpoint in one write transaction: both are stored
 * or neither. */
int sq_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                          const convo_message_in *msgs, convo_error *err)
{
    put_args a = {cp, msgs, cp->nmessages, 1, NULL, 0};
    return sq_run_tx(b, 1, cp_put_tx, &a, err);
}

/* The pending writes of checkpoint key, decoded, with room for extra more:
 * *w points into *record (both malloc'd); *apart: 1 when they are to be
 * stored apart from the row (layout 13: they wait there, or the row has none
 * and is one of its thread's two newest). */
static int pending_read(sq_conn *c, int64_t key, size_t extra, unsigned char **record,
                        sq_write **w, size_t *n, int *apart, convo_error *err)
{
    sqlite3_stmt *st;
    size_t len = 0;
    sq_write *decoded = NULL;
    int rc = sq_stmt_get(c, ST_CP_PENDING_GET, &st, err);
    *record = NULL;
    if (rc == 0)
        sqlite3_bind_int64(st, 1, key);
    if (rc || (rc = sq_stmt_step(c, st, "reading pending writes", err)) <= 0)
        return rc < 0 ? rc : cp_not_found(err);
    const void *p = sqlite3_column_blob(st, 0);
    len = p ? (size_t)sqlite3_column_bytes(st, 0) : 0;
    *apart = sqlite3_column_int(st, 1);
    if (len && (*record = malloc(len)) != NULL)
        memcpy(*record, p, len);
    sq_stmt_done(st);
    rc = len && !*record ? -1 : sq_writes_decode(*record, len, &decoded, n);
    sq_write *room = rc == 0 ? realloc(decoded, (*n + extra + 1) * sizeof *room) : NULL;
    if (!room) {
        free(decoded);
        free(*record);
        *record = NULL;
        return rc == -2 ? convo__error(err, CONVO_ECORRUPT, NULL,
                                       "sqlite: the pending writes of a checkpoint do not decode")
                        : no_memory(err);
    }
    *w = room;
    return 0;
}

/* Stores w[0..n) as checkpoint key's pending writes, in its row or (apart)
 * waiting in convo_checkpoint_pending; frees record and w. */
static int pending_store(sq_conn *c, int64_t key, int apart, unsigned char *record, sq_write *w,
                         size_t n, convo_error *err)
{
    sqlite3_stmt *st;
    unsigned char *packed;
    size_t len;
    int rc = sq_writes_encode(w, n, &packed, &len);
    free(w);
    free(record);
    if (rc)
        return rc == -1 ? no_memory(err) : convo__error(err, CONVO_ECORRUPT, NULL,
                                                        "sqlite: a pending write twice");
    int hot = apart ? 0 : sq_seg_hot(c, key, err); /* layout 17 */
    if ((rc = hot < 0 ? hot : 0) != 0 ||
        (rc = sq_stmt_get(c, apart ? ST_CP_PENDING_WAIT
                                   : hot ? ST_HOT_PENDING_SET : ST_CP_PENDING_SET, &st, err)) != 0) {
        free(packed);
        return rc;
    }
    sqlite3_bind_int64(st, 1, key);
    /* a record past SQLite's length limit (SQLITE_TOOBIG) is refused, never
     * left unbound: that would store NULL, no writes at all */
    rc = packed ? sqlite3_bind_blob64(st, 2, packed, (sqlite3_uint64)len, free)
                : sqlite3_bind_null(st, 2);
    if (rc != SQLITE_OK) {
        sq_stmt_done(st);
        return sq_conn_error(c, rc, err, "storing pending writes");
    }
    return sq_stmt_run(c, st, "storing pending writes", err);
}

/* A task id's stored form in w (16 bytes when a canonical UUID, in buf). */
static void write_task(sq_write *w, const char *task_id, unsigned char buf[SQ_UUID_BYTES])
{
    size_t len = strlen(task_id);
    w->uuid = sq_uuid_pack(task_id, len, buf);
    w->task = w->uuid ? buf : (const unsigned char *)task_id;
    w->task_len = w->uuid ? SQ_UUID_BYTES : len;
}

/* A swapped pending write (layout 10: in its checkpoint's row): 1 when it was
 * exactly old_type and old_value and is now the new value, 0 when not. */
static int swap_write(sq_conn *c, int64_t num, const char *ns, const convo_swap *s,
                      int64_t old_type, convo_error *err)
{
    cp_place at;
    unsigned char *record, buf[SQ_UUID_BYTES];
    sq_write *w, want;
    size_t n, j = 0;
    int64_t type;
    int apart, rc = sq_cp_find(c, num, ns, s->checkpoint_id, &at, err);
    if (rc <= 0 || (rc = pending_read(c, at.key, 0, &record, &w, &n, &apart, err)) != 0)
        return rc;
    write_task(&want, s->task_id, buf);
    while (j < n && !(w[j].uuid == want.uuid && w[j].task_len == want.task_len &&
                      memcmp(w[j].task, want.task, want.task_len) == 0 && w[j].idx == s->idx &&
                      w[j].type == old_type && w[j].len == s->old_value.len &&
                      (w[j].len == 0 || memcmp(w[j].value, s->old_value.bytes, w[j].len) == 0)))
        j++;
    if (j == n || (rc = sq_name_num(c, s->new_value.type, 1, &type, err)) < 0) {
        free(w);
        free(record);
        return j == n ? 0 : rc;
    }
    w[j].type = type;
    w[j].value = s->new_value.bytes;
    w[j].len = s->new_value.len;
    rc = pending_store(c, at.key, apart, record, w, n, err);
    return rc ? rc : 1;
}

/* A swapped channel value: 1 when it was exactly old_type and old_value (and
 * its checkpoint exists) and is now the new value, 0 when not. Layout 11: in
 * convo_blobs and in the list entries that hold it (values.c). */
static int swap_value(sq_conn *c, int64_t num, const char *ns, const convo_swap *w,
                      int64_t channel, int64_t old_type, convo_error *err)
{
    sqlite3_stmt *st;
    int64_t new_type;
    int rc = sq_stmt_get(c, ST_BLOB_SWAP, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sq_bind_id(st, 3, w->checkpoint_id);
    sqlite3_bind_int64(st, 4, channel);
    if ((rc = bind_version(st, 5, w->version, err)) != 0)
        return rc;
    sqlite3_bind_int64(st, 6, old_type);
    bind_bytes(st, 7, w->old_value.bytes, w->old_value.len);
    if ((rc = bind_name(c, st, 8, w->new_value.type, err)) != 0)
        return rc;
    bind_bytes(st, 9, w->new_value.bytes, w->new_value.len);
    if ((rc = sq_stmt_run(c, st, "replacing a value by a log reference", err)) != 0)
        return rc;
    int swapped = sqlite3_changes(c->db) > 0; /* a large value, or one a full list held */
    cp_place at;
    size_t len = strlen(w->version);
    unsigned char *version = malloc(len + 16);
    if (!version)
        return no_memory(err);
    size_t vlen = sq_version_pack(w->version, len, version);
    if ((rc = sq_cp_find(c, num, ns, w->checkpoint_id, &at, err)) == 1 &&
        (rc = sq_name_num(c, w->new_value.type, 1, &new_type, err)) == 1)
        rc = sq_values_swap(c, at.key, ns, channel, version, vlen, old_type, &w->old_value,
                            new_type, &w->new_value, err);
    free(version);
    return rc < 0 ? rc : rc || swapped;
}

/* One swap of a put with log references: the value it names becomes
 * new_value while it is exactly old_value, and then its checkpoint's
 * log_length covers what the reference names. A value missing or changed
 * is left alone (0). */
static int swap_one(sq_conn *c, int64_t num, const char *ns, const convo_swap *w,
                    convo_error *err)
{
    sqlite3_stmt *st;
    int64_t channel = 0, old_type;
    /* a channel or type that has no number yet names no stored value */
    int rc = sq_name_num(c, w->old_value.type, 0, &old_type, err);
    if (rc == 1 && !w->task_id)
        rc = sq_name_num(c, w->channel, 0, &channel, err);
    if (rc <= 0)
        return rc;
    rc = w->task_id ? swap_write(c, num, ns, w, old_type, err)
                    : swap_value(c, num, ns, w, channel, old_type, err);
    if (rc <= 0)
        return rc;
    if ((rc = sq_stmt_get(c, ST_CP_LOG_AT_LEAST, &st, err)) != 0)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sq_bind_id(st, 3, w->checkpoint_id);
    sqlite3_bind_int64(st, 4, w->log_length);
    if ((rc = sq_stmt_run(c, st, "raising a checkpoint's log length", err)) != 0)
        return rc;
    return sq_run_with_ints(c, ST_REACH_RAISE, 2, num, w->log_length, 0,
                            "raising the thread's log bound", err);
}

static int put_refs_tx(sq_conn *c, void *arg, convo_error *err)
{
    thread_row t;
    return put_in_tx(c, arg, &t, err);
}

/* The put and its swaps in one write transaction: a failing swap statement
 * rolls the put (and the messages it appended) back. */
int sq_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                           const convo_message_in *msgs, size_t nmsgs, const convo_swap *swaps,
                           size_t nswaps, convo_error *err)
{
    put_args a = {cp, msgs, nmsgs, 1, swaps, nswaps};
    return sq_run_tx(b, 1, put_refs_tx, &a, err);
}

typedef struct writes_args {
    const char *thread_id, *ns, *checkpoint_id, *task_id, *task_path;
    const convo_write_in *writes;
    size_t n;
} writes_args;

/* The writes of one call as pending.c's entries, names as numbers (added
 * when new); task in buf when a UUID. */
static int writes_of(sq_conn *c, const writes_args *a, unsigned char buf[SQ_UUID_BYTES],
                     sq_write *add, convo_error *err)
{
    int64_t path;
    int rc = sq_name_num(c, a->task_path, 1, &path, err);
    for (size_t i = 0; i < a->n && rc >= 0; i++) {
        const convo_write_in *in = &a->writes[i];
        write_task(&add[i], a->task_id, buf);
        add[i].idx = in->idx;
        add[i].path = path;
        add[i].value = in->value.bytes;
        add[i].len = in->value.len;
        if ((rc = sq_name_num(c, in->channel, 1, &add[i].channel, err)) >= 0)
            rc = sq_name_num(c, in->value.type, 1, &add[i].type, err);
    }
    return rc < 0 ? rc : 0;
}

/* The checkpoint is looked up inside the write transaction, so a concurrent
 * thread_delete either comes first (CONVO_ENOTFOUND) or removes these writes.
 * Layout 10: the writes are merged into the record in the checkpoint's row;
 * an idx >= 0 is kept once per (task, idx), the first write stays; a negative
 * idx (errors, interrupts) replaces. Layout 13: the record of one of the
 * thread's two newest checkpoints waits apart (pending_settle). */
static int writes_tx(sq_conn *c, void *arg, convo_error *err)
{
    writes_args *a = arg;
    thread_row t;
    cp_place at;
    unsigned char *record, buf[SQ_UUID_BYTES];
    sq_write *w;
    size_t n;
    int apart;
    int rc = sq_thread_get(c, a->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc > 0)
        rc = sq_cp_find(c, t.num, a->ns, a->checkpoint_id, &at, err);
    if (rc <= 0)
        return rc < 0 ? rc : cp_not_found(err);
    sq_write *add = malloc((a->n ? a->n : 1) * sizeof *add);
    if (!add)
        return no_memory(err);
    if ((rc = writes_of(c, a, buf, add, err)) == 0 &&
        (rc = pending_read(c, at.key, a->n, &record, &w, &n, &apart, err)) == 0) {
        sq_writes_merge(w, &n, add, a->n);
        rc = pending_store(c, at.key, apart, record, w, n, err);
    }
    free(add);
    return rc ? rc : sq_thread_extend(c, &t, err);
}

int sq_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, const char *task_id,
                             const char *task_path, const convo_write_in *writes, size_t n,
                             convo_error *err)
{
    writes_args a = {thread_id, ns, checkpoint_id, task_id, task_path, writes, n};
    return sq_run_tx(b, 1, writes_tx, &a, err);
}

/* Adds every channel of the channel list of checkpoint key (column 9 of row)
 * with its value, wherever in the thread's history that value was first
 * stored; only: that channel alone (NULL: every one). */
static int cp_add_channels(sq_conn *c, sq_list_cache *k, convo_checkpoint *cp, int64_t key,
                           sqlite3_stmt *row, const char *only, convo_error *err)
{
    sqlite3_stmt *st;
    const unsigned char *list;
    size_t len;
    int rc = sq_list_full(c, k, key, sqlite3_column_blob(row, 9),
                          (size_t)sqlite3_column_bytes(row, 9), &list, &len, err);
    if (rc == 0)
        rc = sq_stmt_get(c, ST_CH_VALUES, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_blob64(st, 1, list, (sqlite3_uint64)len, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, key >> SEQ_BITS);
    sqlite3_bind_text(st, 3, convo_checkpoint_ns(cp), -1, SQLITE_STATIC);
    bind_text_or_null(st, 4, only);
    while ((rc = sq_stmt_step(c, st, "reading checkpoint channels", err)) == 1) {
        const char *type = (const char *)sqlite3_column_text(st, 2);
        const void *value = sqlite3_column_blob(st, 3);
        if (convo__checkpoint_add_channel(cp, (const char *)sqlite3_column_text(st, 0),
                                          (const char *)sqlite3_column_text(st, 1), type,
                                          value ? value : "",
                                          (size_t)sqlite3_column_bytes(st, 3)) != 0) {
            sq_stmt_done(st);
            return no_memory(err);
        }
    }
    return rc;
}

/* Adds the pending writes of checkpoint key in (task_id, idx) order; only:
 * those to that channel alone (NULL: every one). */
static int cp_add_writes(sq_conn *c, convo_checkpoint *cp, int64_t key, const char *only,
                         convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_WRITE_LIST, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    bind_text_or_null(st, 2, only);
    while ((rc = sq_stmt_step(c, st, "reading pending writes", err)) == 1) {
        const void *value = sqlite3_column_blob(st, 5);
        char task[SQ_UUID_TEXT + 1];
        if (convo__checkpoint_add_write(cp, sq_column_id(st, 0, task),
                                        (const char *)sqlite3_column_text(st, 1),
                                        sqlite3_column_int64(st, 2),
                                        (const char *)sqlite3_column_text(st, 3),
                                        (const char *)sqlite3_column_text(st, 4),
                                        value ? value : "",
                                        (size_t)sqlite3_column_bytes(st, 5)) != 0) {
            sq_stmt_done(st);
            return no_memory(err);
        }
    }
    return rc;
}

/* The whole checkpoint on the current row of st, whose columns are key, ns,
 * id, parent_id, metadata, body_type, body, log_length, created_at, channels: those of
 * statements/cp-get.sql, cp-latest.sql, cp-list-*.sql (tests/sqlite-sql.c
 * checks them). only: list opts v5 only_channel, that channel and its writes
 * alone (NULL: all); a NULL metadata column (a lean listing) reads as {}. */
static int cp_from_row(sq_conn *c, sq_list_cache *k, sqlite3_stmt *st, const char *thread_id,
                       const char *only, convo_checkpoint **out, convo_error *err)
{
    const char *metadata = (const char *)sqlite3_column_text(st, 4);
    int64_t key = sqlite3_column_int64(st, 0);
    const char *body_type = (const char *)sqlite3_column_text(st, 5);
    const void *body = sqlite3_column_blob(st, 6);
    char id[SQ_UUID_TEXT + 1], parent[SQ_UUID_TEXT + 1];
    convo_checkpoint *cp = convo__checkpoint_new(
        thread_id, (const char *)sqlite3_column_text(st, 1), sq_column_id(st, 2, id),
        sq_column_id(st, 3, parent), metadata ? metadata : "{}", body_type, body ? body : "",
        (size_t)sqlite3_column_bytes(st, 6), sqlite3_column_int64(st, 7),
        sqlite3_column_int64(st, 8));
    if (!cp)
        return no_memory(err);
    int rc = cp_add_channels(c, k, cp, key, st, only, err);
    if (rc == 0)
        rc = cp_add_writes(c, cp, key, only, err);
    if (rc) {
        convo_checkpoint_free(cp);
        return rc;
    }
    convo__checkpoint_finish(cp);
    *out = cp;
    return 0;
}

typedef struct get_args {
    const char *thread_id, *ns, *checkpoint_id;
    convo_checkpoint *cp;
} get_args;

static int get_tx(sq_conn *c, void *arg, convo_error *err)
{
    get_args *a = arg;
    thread_row t;
    sqlite3_stmt *st;
    int rc = sq_thread_get(c, a->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc < 0 ? rc : cp_not_found(err);
    if ((rc = sq_stmt_get(c, a->checkpoint_id ? ST_CP_GET : ST_CP_LATEST, &st, err)) != 0)
        return rc;
    if (a->checkpoint_id) {
        sqlite3_bind_int64(st, 1, t.num);
        sqlite3_bind_text(st, 2, a->ns, -1, SQLITE_STATIC);
        sq_bind_id(st, 3, a->checkpoint_id);
    } else {
        sqlite3_bind_int64(st, 1, key_of(t.num, 0));
        sqlite3_bind_int64(st, 2, key_of(t.num, MAX_LENGTH));
        sqlite3_bind_text(st, 3, a->ns, -1, SQLITE_STATIC);
    }
    if ((rc = sq_stmt_step(c, st, "reading a checkpoint", err)) <= 0)
        return rc < 0 ? rc : cp_not_found(err);
    sq_list_cache k = {0};
    rc = cp_from_row(c, &k, st, a->thread_id, NULL, &a->cp, err);
    sq_stmt_done(st);
    sq_list_cache_clear(&k);
    return rc;
}

int sq_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                      const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    get_args a = {thread_id, ns, checkpoint_id, NULL};
    int rc = sq_run_tx(b, 0, get_tx, &a, err);
    if (rc) {
        convo_checkpoint_free(a.cp);
        return rc;
    }
    *out = a.cp;
    return 0;
}

typedef struct cp_list_args {
    const convo_checkpoint_list_opts *o;
    void *filter;
    convo_checkpoint_set *set;
    sq_list_cache lists; /* keep_all: a thread's rows come newest first */
} cp_list_args;

/* A listing's ?9: with only_channel and no metadata filter, neither metadata
 * nor body is read (the core hands out neither). */
static void bind_lean(sqlite3_stmt *st, const cp_list_args *a)
{
    if (a->o->only_channel && !a->filter)
        sqlite3_bind_int(st, 9, 1);
}

/* Adds the checkpoints st yields whose metadata matches, until the set holds
 * limit; thread_id NULL: the thread id is column 10. A lean listing
 * (bind_lean) has no metadata to match and no filter. */
static int list_rows(sq_conn *c, sqlite3_stmt *st, const char *thread_id, cp_list_args *a,
                     convo_error *err)
{
    int rc;
    while ((rc = sq_stmt_step(c, st, "listing checkpoints", err)) == 1) {
        if (a->o->limit && convo_checkpoint_set_count(a->set) >= a->o->limit)
            break;
        const char *metadata = (const char *)sqlite3_column_text(st, 4);
        int lean = a->o->only_channel && !a->filter;
        if (!lean && (!metadata ||
                      !convo__json_contains(metadata, (size_t)sqlite3_column_bytes(st, 4),
                                            a->filter)))
            continue;
        convo_checkpoint *cp;
        rc = cp_from_row(c, &a->lists, st,
                         thread_id ? thread_id : (const char *)sqlite3_column_text(st, 10),
                         a->o->only_channel, &cp, err);
        if (rc == 0 && convo__checkpoint_set_add(a->set, cp) != 0)
            rc = no_memory(err);
        if (rc)
            break;
    }
    sq_stmt_done(st);
    return rc < 0 ? rc : 0;
}

/* Checkpoint (before_thread_id, before_ns, before), which the core names in
 * full, in *at with its thread number in *num; CONVO_ENOTFOUND when it does
 * not exist or its thread expired. */
static int before_find(sq_conn *c, const convo_checkpoint_list_opts *o, int64_t *num,
                       cp_place *at, convo_error *err)
{
    thread_row t;
    int rc = sq_thread_get(c, o->before_thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc > 0)
        rc = sq_cp_find(c, t.num, o->before_ns, o->before, at, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL,
                                          "checkpoint '%s' not found", o->before);
    *num = t.num;
    return 0;
}

/* One thread's checkpoints, newest first, put before `before` (NULL: all);
 * before_num is the number of before's thread. */
static int list_thread(sq_conn *c, cp_list_args *a, const cp_place *before, int64_t before_num,
                       convo_error *err)
{
    const convo_checkpoint_list_opts *o = a->o;
    thread_row t;
    int rc = sq_thread_get(c, o->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc; /* an unknown thread has no checkpoints */
    /* in before's own thread the key order is the put order: stop at its key */
    int64_t end = before && before_num == t.num ? before->key : key_of(t.num, MAX_LENGTH) + 1;
    sqlite3_stmt *st;
    if ((rc = sq_stmt_get(c, ST_CP_LIST_THREAD, &st, err)) != 0)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(t.num, 0));
    sqlite3_bind_int64(st, 2, end);
    bind_text_or_null(st, 3, o->checkpoint_ns);
    if (before)
        sqlite3_bind_int64(st, 4, before->put_order);
    bind_lean(st, a);
    return list_rows(c, st, o->thread_id, a, err);
}

/* Every thread's checkpoints: threads in id order, each newest first. */
static int list_all(sq_conn *c, cp_list_args *a, const cp_place *before, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, before ? ST_CP_LIST_ALL_BEFORE : ST_CP_LIST_ALL, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, convo__now_micros());
    bind_text_or_null(st, 2, a->o->checkpoint_ns);
    if (before)
        sqlite3_bind_int64(st, 3, before->put_order);
    bind_lean(st, a);
    return list_rows(c, st, NULL, a, err);
}

static int cp_list_tx(sq_conn *c, void *arg, convo_error *err)
{
    cp_list_args *a = arg;
    cp_place at;
    int64_t before_num = 0;
    int rc = a->o->before ? before_find(c, a->o, &before_num, &at, err) : 0;
    if (rc)
        return rc;
    const cp_place *before = a->o->before ? &at : NULL;
    return a->o->thread_id ? list_thread(c, a, before, before_num, err)
                           : list_all(c, a, before, err);
}

int sq_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o, void *filter,
                       convo_checkpoint_set **out, convo_error *err)
{
    cp_list_args a = {o, filter, convo__checkpoint_set_new(), {.keep_all = 1}};
    if (!a.set)
        return no_memory(err);
    int rc = sq_run_tx(b, 0, cp_list_tx, &a, err);
    sq_list_cache_clear(&a.lists);
    if (rc) {
        convo_checkpoint_set_free(a.set);
        return rc;
    }
    *out = a.set;
    return 0;
}
