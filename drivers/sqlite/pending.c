/* pending.c — layout 10's record of a checkpoint's pending writes (docs/sqlite.md,
 * "Layout 10: pending writes in the checkpoint row"), kept in the row's
 * `pending` column (NULL: none). The record is groups, one per task id, in the
 * order of the ids' text:
 *   task id   0x10 and its 16 bytes (a canonical UUID), or 0x00, a varint
 *             length and its text;
 *   count     a varint, at least 1;
 *   writes    count of them in idx order, each: varint zigzag(idx), varint
 *             task path, channel and type (numbers in convo_names), varint
 *             length and the value's bytes.
 * A record decodes to one order only, and equal writes encode alike. */
#include "config.h"
#include "pending.h"
#include "compact.h"
#include <stdlib.h>
#include <string.h>

enum { TASK_TEXT = 0x00, TASK_UUID = 0x10 };

static uint64_t zigzag(int64_t v)
{
    return v < 0 ? ~((uint64_t)v << 1) : (uint64_t)v << 1;
}

static int64_t unzigzag(uint64_t v)
{
    return v & 1 ? (int64_t)~(v >> 1) : (int64_t)(v >> 1);
}

/* A varint of at most INT64_MAX from p[*at..n), *at moved past it; 0 malformed. */
static int get_num(const unsigned char *p, size_t n, size_t *at, uint64_t *v)
{
    size_t k = sq_varint_get(p + *at, n - *at, v);
    *at += k;
    return k > 0;
}

static int get_name(const unsigned char *p, size_t n, size_t *at, int64_t *num)
{
    uint64_t v;
    if (!get_num(p, n, at, &v) || v > INT64_MAX)
        return 0;
    *num = (int64_t)v;
    return 1;
}

/* One write of a group at p[*at..n). */
static int write_decode(const unsigned char *p, size_t n, size_t *at, sq_write *w)
{
    uint64_t idx, len;
    if (!get_num(p, n, at, &idx) || !get_name(p, n, at, &w->path) ||
        !get_name(p, n, at, &w->channel) || !get_name(p, n, at, &w->type) ||
        !get_num(p, n, at, &len) || len > n - *at)
        return 0;
    w->idx = unzigzag(idx);
    w->value = p + *at;
    w->len = (size_t)len;
    *at += (size_t)len;
    return 1;
}

/* A group's task id at p[*at..n) into w. */
static int task_decode(const unsigned char *p, size_t n, size_t *at, sq_write *w)
{
    uint64_t len = SQ_UUID_BYTES;
    unsigned char tag = p[(*at)++];
    if (tag == TASK_TEXT) {
        if (!get_num(p, n, at, &len) || len == 0)
            return 0;
    } else if (tag != TASK_UUID) {
        return 0;
    }
    if (len > n - *at)
        return 0;
    w->uuid = tag == TASK_UUID;
    w->task = p + *at;
    w->task_len = (size_t)len;
    *at += (size_t)len;
    return 1;
}

int sq_writes_decode(const unsigned char *p, size_t n, sq_write **out, size_t *count)
{
    size_t at = 0, k = 0, cap = 0;
    sq_write *w = NULL;
    *out = NULL;
    *count = 0;
    while (at < n) {
        sq_write task;
        uint64_t m;
        if (!task_decode(p, n, &at, &task) || !get_num(p, n, &at, &m) || m == 0 ||
            m > n - at) {
            free(w);
            return -2;
        }
        if (k + m > cap) {
            cap = (k + (size_t)m) * 2;
            sq_write *grown = realloc(w, cap * sizeof *w);
            if (!grown) {
                free(w);
                return -1;
            }
            w = grown;
        }
        for (uint64_t i = 0; i < m; i++, k++) {
            w[k] = task;
            if (!write_decode(p, n, &at, &w[k])) {
                free(w);
                return -2;
            }
        }
    }
    *out = w;
    *count = k;
    return 0;
}

/* The task id's text: buf (a uuid) or its own bytes. */
static const unsigned char *task_text(const sq_write *w, char buf[SQ_UUID_TEXT + 1],
                                      size_t *len)
{
    if (!w->uuid) {
        *len = w->task_len;
        return w->task;
    }
    sq_uuid_unpack(w->task, buf);
    *len = SQ_UUID_TEXT;
    return (const unsigned char *)buf;
}

/* Task ids in the order of their text (bytes, then length). */
static int task_cmp(const sq_write *a, const sq_write *b)
{
    if (a->uuid && b->uuid)
        return memcmp(a->task, b->task, SQ_UUID_BYTES); /* hex text: the same order */
    char ba[SQ_UUID_TEXT + 1], bb[SQ_UUID_TEXT + 1];
    size_t la, lb;
    const unsigned char *ta = task_text(a, ba, &la), *tb = task_text(b, bb, &lb);
    int c = memcmp(ta, tb, la < lb ? la : lb);
    return c ? c : la < lb ? -1 : la > lb;
}

static int same_task(const sq_write *a, const sq_write *b)
{
    return a->uuid == b->uuid && a->task_len == b->task_len &&
           memcmp(a->task, b->task, a->task_len) == 0;
}

static int write_cmp(const void *x, const void *y)
{
    const sq_write *a = x, *b = y;
    int c = same_task(a, b) ? 0 : task_cmp(a, b);
    return c ? c : a->idx < b->idx ? -1 : a->idx > b->idx;
}

void sq_writes_merge(sq_write *w, size_t *n, const sq_write *add, size_t nadd)
{
    for (size_t i = 0; i < nadd; i++) {
        size_t j = 0;
        while (j < *n && !(same_task(&w[j], &add[i]) && w[j].idx == add[i].idx))
            j++;
        if (j == *n)
            w[(*n)++] = add[i];
        else if (add[i].idx < 0)
            w[j] = add[i];
    }
}

static size_t write_put(unsigned char *p, const sq_write *w)
{
    size_t k = sq_varint_put(p, zigzag(w->idx));
    k += sq_varint_put(p + k, (uint64_t)w->path);
    k += sq_varint_put(p + k, (uint64_t)w->channel);
    k += sq_varint_put(p + k, (uint64_t)w->type);
    k += sq_varint_put(p + k, w->len);
    if (w->len)
        memcpy(p + k, w->value, w->len);
    return k + w->len;
}

static size_t task_put(unsigned char *p, const sq_write *w, size_t count)
{
    size_t k = 1;
    p[0] = w->uuid ? TASK_UUID : TASK_TEXT;
    if (!w->uuid)
        k += sq_varint_put(p + k, w->task_len);
    memcpy(p + k, w->task, w->task_len);
    k += w->task_len;
    return k + sq_varint_put(p + k, count);
}

int sq_writes_encode(sq_write *w, size_t n, unsigned char **out, size_t *len)
{
    size_t cap = 0;
    *out = NULL;
    *len = 0;
    if (n == 0)
        return 0;
    qsort(w, n, sizeof *w, write_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i && write_cmp(&w[i - 1], &w[i]) == 0)
            return -2;
        cap += w[i].task_len + w[i].len + 70; /* tags and varints */
    }
    unsigned char *p = malloc(cap);
    if (!p)
        return -1;
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        size_t m = 1;
        while (i + m < n && same_task(&w[i], &w[i + m]))
            m++;
        at += task_put(p + at, &w[i], m);
        for (size_t j = 0; j < m; j++)
            at += write_put(p + at, &w[i + j]);
        i += m;
    }
    *out = p;
    *len = at;
    return 0;
}

/* ---- convo_pending_pack(task_id, idx, task_path, channel, type, value) ---- */

typedef struct pack_acc {
    sq_write *w;
    unsigned char **copies; /* each write's task id and value, one allocation */
    size_t n, cap;
    int failed;
} pack_acc;

static int pack_grow(pack_acc *a)
{
    if (a->n < a->cap)
        return 1;
    size_t cap = a->cap ? a->cap * 2 : 8;
    sq_write *w = realloc(a->w, cap * sizeof *w);
    if (w)
        a->w = w;
    unsigned char **c = w ? realloc(a->copies, cap * sizeof *c) : NULL;
    if (!c)
        return 0;
    a->copies = c;
    a->cap = cap;
    return 1;
}

static void pack_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    pack_acc *a = sqlite3_aggregate_context(ctx, sizeof *a);
    if (!a || a->failed || !pack_grow(a)) {
        if (a)
            a->failed = 1;
        return;
    }
    sq_write *w = &a->w[a->n];
    int uuid = sqlite3_value_type(argv[0]) == SQLITE_BLOB &&
               sqlite3_value_bytes(argv[0]) == SQ_UUID_BYTES;
    const void *task = uuid ? sqlite3_value_blob(argv[0]) : sqlite3_value_text(argv[0]);
    w->task_len = (size_t)sqlite3_value_bytes(argv[0]);
    w->len = (size_t)sqlite3_value_bytes(argv[5]);
    unsigned char *copy = malloc(w->task_len + w->len + 1);
    if (!copy || !task) {
        free(copy);
        a->failed = 1;
        return;
    }
    memcpy(copy, task, w->task_len);
    if (w->len)
        memcpy(copy + w->task_len, sqlite3_value_blob(argv[5]), w->len);
    w->uuid = uuid;
    w->task = copy;
    w->value = copy + w->task_len;
    w->idx = sqlite3_value_int64(argv[1]);
    w->path = sqlite3_value_int64(argv[2]);
    w->channel = sqlite3_value_int64(argv[3]);
    w->type = sqlite3_value_int64(argv[4]);
    a->copies[a->n++] = copy;
}

static void pack_final(sqlite3_context *ctx)
{
    pack_acc *a = sqlite3_aggregate_context(ctx, 0);
    unsigned char *out = NULL;
    size_t len = 0;
    int rc = a && !a->failed ? sq_writes_encode(a->w, a->n, &out, &len) : a ? -1 : 0;
    if (rc == 0 && out)
        sqlite3_result_blob64(ctx, out, (sqlite3_uint64)len, free); /* TOOBIG past the limit */
    else if (rc == 0)
        sqlite3_result_null(ctx);
    else if (rc == -2)
        sqlite3_result_error(ctx, "convo_pending_pack: a (task, idx) twice", -1);
    else
        sqlite3_result_error_nomem(ctx);
    for (size_t i = 0; a && i < a->n; i++)
        free(a->copies[i]);
    if (a) {
        free(a->w);
        free(a->copies);
    }
}

/* ---- convo_pending_list(pending): the writes of a record ---- */

enum { COL_TASK, COL_IDX, COL_PATH, COL_CHANNEL, COL_TYPE, COL_VALUE, COL_PENDING };

typedef struct pending_cursor {
    sqlite3_vtab_cursor base;
    unsigned char *record; /* a copy of the argument */
    sq_write *w;
    size_t n, at;
} pending_cursor;

static int pending_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                           sqlite3_vtab **out, char **errmsg)
{
    (void)aux, (void)argc, (void)argv, (void)errmsg;
    int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(task_id, idx INTEGER, task_path INTEGER,"
                                      " channel INTEGER, type INTEGER, value BLOB,"
                                      " pending HIDDEN)");
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_vtab *t = sqlite3_malloc(sizeof *t);
    if (!t)
        return SQLITE_NOMEM;
    memset(t, 0, sizeof *t);
    *out = t;
    return SQLITE_OK;
}

static int pending_disconnect(sqlite3_vtab *t)
{
    sqlite3_free(t);
    return SQLITE_OK;
}

/* The argument is an equality on the hidden column; without it, nothing. */
static int pending_best_index(sqlite3_vtab *t, sqlite3_index_info *info)
{
    (void)t;
    info->estimatedCost = 1e12;
    for (int i = 0; i < info->nConstraint; i++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[i];
        if (c->iColumn == COL_PENDING && c->op == SQLITE_INDEX_CONSTRAINT_EQ && c->usable) {
            info->aConstraintUsage[i].argvIndex = 1;
            info->aConstraintUsage[i].omit = 1;
            info->idxNum = 1;
            info->estimatedCost = 10;
            info->estimatedRows = 4;
        }
    }
    return SQLITE_OK;
}

static int pending_open(sqlite3_vtab *t, sqlite3_vtab_cursor **out)
{
    (void)t;
    pending_cursor *c = sqlite3_malloc(sizeof *c);
    if (!c)
        return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    *out = &c->base;
    return SQLITE_OK;
}

static void pending_reset(pending_cursor *c)
{
    free(c->w);
    free(c->record);
    c->w = NULL;
    c->record = NULL;
    c->n = c->at = 0;
}

static int pending_close(sqlite3_vtab_cursor *cur)
{
    pending_reset((pending_cursor *)cur);
    sqlite3_free(cur);
    return SQLITE_OK;
}

static int pending_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxstr, int argc,
                          sqlite3_value **argv)
{
    pending_cursor *c = (pending_cursor *)cur;
    (void)idxstr;
    pending_reset(c);
    if (idx != 1 || argc < 1 || sqlite3_value_type(argv[0]) == SQLITE_NULL)
        return SQLITE_OK;
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB)
        return SQLITE_CORRUPT;
    size_t len = (size_t)sqlite3_value_bytes(argv[0]);
    if (!(c->record = malloc(len ? len : 1)))
        return SQLITE_NOMEM;
    if (len)
        memcpy(c->record, sqlite3_value_blob(argv[0]), len);
    int rc = sq_writes_decode(c->record, len, &c->w, &c->n);
    return rc == 0 ? SQLITE_OK : rc == -1 ? SQLITE_NOMEM : SQLITE_CORRUPT;
}

static int pending_next(sqlite3_vtab_cursor *cur)
{
    ((pending_cursor *)cur)->at++;
    return SQLITE_OK;
}

static int pending_eof(sqlite3_vtab_cursor *cur)
{
    pending_cursor *c = (pending_cursor *)cur;
    return c->at >= c->n;
}

static int pending_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col)
{
    const sq_write *w = &((pending_cursor *)cur)->w[((pending_cursor *)cur)->at];
    switch (col) {
    case COL_TASK:
        if (w->uuid)
            sqlite3_result_blob(ctx, w->task, (int)w->task_len, SQLITE_TRANSIENT);
        else
            sqlite3_result_text(ctx, (const char *)w->task, (int)w->task_len, SQLITE_TRANSIENT);
        break;
    case COL_IDX:
        sqlite3_result_int64(ctx, w->idx);
        break;
    case COL_PATH:
        sqlite3_result_int64(ctx, w->path);
        break;
    case COL_CHANNEL:
        sqlite3_result_int64(ctx, w->channel);
        break;
    case COL_TYPE:
        sqlite3_result_int64(ctx, w->type);
        break;
    case COL_VALUE:
        sqlite3_result_blob(ctx, w->len ? (const void *)w->value : "", (int)w->len,
                            SQLITE_TRANSIENT);
        break;
    default:
        sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
}

static int pending_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *row)
{
    *row = (sqlite3_int64)((pending_cursor *)cur)->at;
    return SQLITE_OK;
}

static const sqlite3_module pending_list_module = {
    .iVersion = 0,
    .xConnect = pending_connect,
    .xBestIndex = pending_best_index,
    .xDisconnect = pending_disconnect,
    .xOpen = pending_open,
    .xClose = pending_close,
    .xFilter = pending_filter,
    .xNext = pending_next,
    .xEof = pending_eof,
    .xColumn = pending_column,
    .xRowid = pending_rowid,
};

int sq_pending_register(sqlite3 *db)
{
    int rc = sqlite3_create_function(db, "convo_pending_pack", 6,
                                     SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, NULL, pack_step,
                                     pack_final);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_module(db, "convo_pending_list", &pending_list_module, NULL);
    return rc;
}
