/* readback.c — checkpoints from their rows as stored (checkpoint_get.sql,
 * _latest, _list, _list_channel): the packed columns decoded in C
 * (unpack.c), numbers made names through the store's copy of
 * checkpoint_names and checkpoint_channel_sets, values kept in
 * checkpoint_blobs read by a second statement when a row has one. */
#include "config.h"
#include "pg_int.h"
#include "drivers/postgres/sql.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- the store's copy of the names and channel sets (only ever added to) */

typedef struct name_entry {
    int32_t num;
    char *name;
} name_entry;

typedef struct set_entry {
    int32_t num;
    uint32_t n;
    int32_t *channels;
} set_entry;

struct pg_names {
    pthread_mutex_t lock;
    name_entry *names;
    size_t nnames, cap_names;
    set_entry *sets;
    size_t nsets, cap_sets;
    int32_t max_name, max_set; /* the highest numbers held */
};

int convo__pg_names_init(convo_backend *b)
{
    if (!(b->names = calloc(1, sizeof *b->names)))
        return CONVO_ENOMEM;
    pthread_mutex_init(&b->names->lock, NULL);
    return 0;
}

void convo__pg_names_free(convo_backend *b)
{
    pg_names *c = b->names;
    if (!c)
        return;
    for (size_t i = 0; i < c->nnames; i++)
        free(c->names[i].name);
    for (size_t i = 0; i < c->nsets; i++)
        free(c->sets[i].channels);
    free(c->names);
    free(c->sets);
    pthread_mutex_destroy(&c->lock);
    free(c);
    b->names = NULL;
}

static int by_num(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Both entry kinds start with their num: one search for both. */
static void *find(void *base, size_t n, size_t size, int32_t num)
{
    return n ? bsearch(&num, base, n, size, by_num) : NULL; /* base NULL: nothing held */
}

/* The name of number num (a string the store keeps until it closes), or NULL.
 * Read under the lock: another thread's refresh may move the entries. */
static const char *name_of(pg_names *c, int32_t num)
{
    pthread_mutex_lock(&c->lock);
    name_entry *e = find(c->names, c->nnames, sizeof *c->names, num);
    const char *name = e ? e->name : NULL;
    pthread_mutex_unlock(&c->lock);
    return name;
}

/* The number of a name, or 0 (names are numbered from 1). */
static int32_t num_of(pg_names *c, const char *name)
{
    int32_t num = 0;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nnames && !num; i++)
        if (strcmp(c->names[i].name, name) == 0)
            num = c->names[i].num;
    pthread_mutex_unlock(&c->lock);
    return num;
}

/* A row of checkpoint_names_get.sql added (under the lock): 0, or CONVO_ENOMEM. */
static int add_row(pg_names *c, const PGresult *r, int i)
{
    int32_t num = (int32_t)convo__pg_get_int(r, i, 1);
    if (convo__pg_get_int(r, i, 0) == 0) {
        if (find(c->names, c->nnames, sizeof *c->names, num))
            return 0;
        if (c->nnames == c->cap_names) {
            size_t cap = c->cap_names ? 2 * c->cap_names : 32;
            name_entry *g = realloc(c->names, cap * sizeof *g);
            if (!g)
                return CONVO_ENOMEM;
            c->names = g, c->cap_names = cap;
        }
        char *name = strdup(PQgetvalue(r, i, 2));
        if (!name)
            return CONVO_ENOMEM;
        c->names[c->nnames++] = (name_entry){num, name};
        c->max_name = num > c->max_name ? num : c->max_name;
        return 0;
    }
    if (find(c->sets, c->nsets, sizeof *c->sets, num))
        return 0;
    pg_array_elem *el;
    size_t n;
    int rc = convo__pg_unpack_array(PQgetvalue(r, i, 3), (size_t)PQgetlength(r, i, 3), &el, &n);
    if (rc != 0)
        return rc;
    int32_t *chs = malloc((n ? n : 1) * sizeof *chs);
    for (size_t k = 0; chs && k < n; k++) {
        if (!el[k].bytes || el[k].len != 4) {
            free(chs), free(el);
            return CONVO_ECORRUPT;
        }
        chs[k] = (int32_t)((uint32_t)(unsigned char)el[k].bytes[0] << 24 |
                           (uint32_t)(unsigned char)el[k].bytes[1] << 16 |
                           (uint32_t)(unsigned char)el[k].bytes[2] << 8 |
                           (unsigned char)el[k].bytes[3]);
    }
    free(el);
    if (!chs)
        return CONVO_ENOMEM;
    if (c->nsets == c->cap_sets) {
        size_t cap = c->cap_sets ? 2 * c->cap_sets : 8;
        set_entry *g = realloc(c->sets, cap * sizeof *g);
        if (!g) {
            free(chs);
            return CONVO_ENOMEM;
        }
        c->sets = g, c->cap_sets = cap;
    }
    c->sets[c->nsets++] = (set_entry){num, (uint32_t)n, chs};
    c->max_set = num > c->max_set ? num : c->max_set;
    return 0;
}

/* Fetches the names and sets above the highest held, and name `name` and
 * set `set` when not 0 (below it: an identity may commit out of order). One
 * round trip; what it brings is kept for every later read of the store. */
static int refresh(convo_backend *b, int32_t name, int32_t set, convo_error *err)
{
    pg_names *c = b->names;
    pthread_mutex_lock(&c->lock);
    char maxn[4], maxs[4];
    put32(maxn, (uint32_t)c->max_name);
    put32(maxs, (uint32_t)c->max_set);
    pthread_mutex_unlock(&c->lock);
    pg_array a[2];
    convo__pg_array_start(&a[0], OID_INT4, 8);
    convo__pg_array_start(&a[1], OID_INT4, 8);
    char nb[4], sb[4];
    put32(nb, (uint32_t)name);
    put32(sb, (uint32_t)set);
    if (name)
        convo__pg_array_add(&a[0], nb, 4);
    if (set)
        convo__pg_array_add(&a[1], sb, 4);
    int lens[4] = {4, 0, 4, 0};
    char *arr[2] = {convo__pg_array_finish(&a[0], &lens[1]),
                    convo__pg_array_finish(&a[1], &lens[3])};
    const char *values[4] = {maxn, arr[0], maxs, arr[1]};
    PGresult *r = NULL;
    int rc = arr[0] && arr[1] ? convo__pg_run(b, ST_CP_NAMES, values, lens, &r, err)
                              : convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    free(arr[0]);
    free(arr[1]);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < PQntuples(r) && rc == 0; i++)
        rc = add_row(c, r, i);
    if (c->nnames) /* none yet: a NULL array, which qsort may not be given */
        qsort(c->names, c->nnames, sizeof *c->names, by_num);
    if (c->nsets)
        qsort(c->sets, c->nsets, sizeof *c->sets, by_num);
    pthread_mutex_unlock(&c->lock);
    PQclear(r);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "postgres: a stored channel set does not decode");
    return rc ? convo__error(err, rc, NULL, "out of memory") : 0;
}

/* ---- a read: the rows, what they need, the checkpoints */

/* A body as stored (layout v7, docs/postgres.md: checkpoints.c's body_encode):
 * one byte 0 and the body as given, or 1, its length (4 bytes) and its zlib
 * stream. The body in *out (malloc'd, NULL for none); CONVO_ECORRUPT when it
 * is neither form. */
static int body_decode(const char *stored, size_t n, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (n >= 1 && stored[0] == 0) {
        if (n == 1)
            return 0;
        if (!(*out = malloc(n - 1)))
            return CONVO_ENOMEM;
        memcpy(*out, stored + 1, n - 1);
        *len = n - 1;
        return 0;
    }
    if (n < 5 || stored[0] != 1)
        return CONVO_ECORRUPT;
    const unsigned char *u = (const unsigned char *)stored;
    uint32_t want = (uint32_t)u[1] << 24 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 8 | u[4];
    /* deflate gives at most about 1:1032: a larger length is not a body's */
    if (want == 0 || want > (uint32_t)INT_MAX || want > (uint64_t)(n - 5) * 1032 + 64)
        return CONVO_ECORRUPT;
    char *buf = malloc(want);
    if (!buf)
        return CONVO_ENOMEM;
    uLongf got = want;
    if (uncompress((Bytef *)buf, &got, (const Bytef *)stored + 5, (uLong)(n - 5)) != Z_OK ||
        got != want) {
        free(buf);
        return CONVO_ECORRUPT;
    }
    *out = buf;
    *len = want;
    return 0;
}

/* One checkpoint row decoded: its channels (all, or only_channel's) and its
 * pending writes, pointing into the rows. */
typedef struct row_items {
    pg_chan *ch;
    size_t nch;
    pg_write *w;
    size_t nw;
} row_items;

typedef struct read_ctx {
    convo_backend *b;
    const pg_rows *in;  /* the rows (columns as checkpoint_get.sql's) */
    const char *only;    /* only_channel, or NULL */
    int32_t only_num;    /* its number; 0: no checkpoint names it */
    row_items *rows;
    PGresult *blobs;     /* checkpoint_blobs_get.sql's, or NULL */
    const char *why;     /* what did not decode */
    convo_error *err;
} read_ctx;

static int corrupt(read_ctx *x, const char *why)
{
    x->why = why;
    return CONVO_ECORRUPT;
}

/* The name of num: fetched once when the copy lacks it; none is corruption. */
static int need_name(read_ctx *x, int32_t num, const char **out)
{
    if ((*out = name_of(x->b->names, num)) != NULL)
        return 0;
    int rc = refresh(x->b, num, 0, x->err);
    if (rc != 0)
        return rc;
    *out = name_of(x->b->names, num);
    return *out ? 0 : corrupt(x, "a name number that names nothing");
}

/* The channels of set num, copied (*chs malloc'd). */
static int need_set(read_ctx *x, int32_t num, int32_t **chs, size_t *n)
{
    for (int pass = 0; pass < 2; pass++) {
        pg_names *c = x->b->names;
        pthread_mutex_lock(&c->lock);
        set_entry *e = find(c->sets, c->nsets, sizeof *c->sets, num);
        if (e) {
            *n = e->n;
            *chs = malloc((e->n ? e->n : 1) * sizeof **chs);
            if (*chs)
                memcpy(*chs, e->channels, e->n * sizeof **chs);
        }
        pthread_mutex_unlock(&c->lock);
        if (e)
            return *chs ? 0 : CONVO_ENOMEM;
        int rc = pass ? 0 : refresh(x->b, 0, num, x->err);
        if (rc != 0)
            return rc;
    }
    return corrupt(x, "a channel set number that names no set");
}

static int32_t col_int(const PGresult *r, int i, int col)
{
    return (int32_t)convo__pg_get_int(r, i, col);
}

static const pg_cell *cell(const read_ctx *x, int i, int col)
{
    return &x->in->cells[(size_t)i * PG_NCOLS + col];
}

static int32_t cell_i32(const read_ctx *x, int i, int col)
{
    return (int32_t)convo__pg_cell_int(cell(x, i, col));
}

/* The channels and writes of row i into it. */
static int decode_row(read_ctx *x, int i, row_items *it)
{
    int32_t *chs = NULL;
    size_t n = 0;
    int rc = need_set(x, cell_i32(x, i, C_SET), &chs, &n);
    if (rc != 0)
        return rc;
    it->ch = calloc(n ? n : 1, sizeof *it->ch);
    rc = !it->ch ? CONVO_ENOMEM
         : convo__pg_unpack_channels(chs, n, cell(x, i, C_VERSIONS)->v,
                                     cell(x, i, C_VERSIONS)->len,
                                     cell(x, i, C_VALS)->v, cell(x, i, C_VALS)->len,
                                     cell(x, i, C_VALS)->null, it->ch);
    free(chs);
    if (rc != 0)
        return rc == CONVO_ECORRUPT ? corrupt(x, "its versions or values do not decode") : rc;
    it->nch = n;
    if (x->only) { /* the one channel, when the set has it */
        size_t k = 0;
        for (size_t o = 0; o < n; o++)
            if (x->only_num && it->ch[o].ch == x->only_num)
                it->ch[k++] = it->ch[o];
        it->nch = k;
    }
    if (cell(x, i, C_WRITES)->null)
        return 0;
    pg_array_elem *el;
    size_t ne;
    rc = convo__pg_unpack_array(cell(x, i, C_WRITES)->v, cell(x, i, C_WRITES)->len,
                                &el, &ne);
    if (rc != 0)
        return rc == CONVO_ECORRUPT ? corrupt(x, "its pending writes do not decode") : rc;
    it->w = calloc(ne ? ne : 1, sizeof *it->w);
    for (size_t k = 0; it->w && k < ne && rc == 0; k++) {
        int32_t ch;
        /* one channel's listing skips another channel's element unread */
        if (x->only && convo__pg_write_channel(el[k].bytes, el[k].len, &ch) &&
            (!x->only_num || ch != x->only_num))
            continue;
        rc = convo__pg_unpack_write(el[k].bytes, el[k].len, &it->w[it->nw]);
        if (rc != 0)
            rc = corrupt(x, "a pending write does not decode");
        else
            it->nw++;
    }
    free(el);
    return it->w ? rc : CONVO_ENOMEM;
}

enum { BLOB_ARRAYS = 8 };

/* The channels whose value is not in their row, with the arrays of
 * checkpoint_blobs_get.sql; 0 and *n 0 when there are none. */
static int blob_params(read_ctx *x, int rows, char *arr[BLOB_ARRAYS], int lens[BLOB_ARRAYS],
                       size_t *n)
{
    static const uint32_t oids[BLOB_ARRAYS] = {OID_INT8, OID_TEXT,  OID_BYTEA, OID_BYTEA,
                                               OID_INT4, OID_BYTEA, OID_BYTEA, OID_INT8};
    pg_array a[BLOB_ARRAYS];
    for (int k = 0; k < BLOB_ARRAYS; k++)
        convo__pg_array_start(&a[k], oids[k], 64);
    *n = 0;
    for (int i = 0; i < rows; i++) {
        int first = 1; /* the row's first entry carries its check */
        for (size_t o = 0; o < x->rows[i].nch; o++) {
            pg_chan *c = &x->rows[i].ch[o];
            if (c->type != 0)
                continue;
            char ch[4];
            put32(ch, (uint32_t)c->ch);
            static const int cols[4] = {C_TID, C_NS, C_ID, C_VERSIONS};
            /* a sealed row sends no versions but its segment's xmin (segments
             * change whole: one still there unchanged holds the checkpoint) */
            for (int k = 0; k < 4; k++)
                convo__pg_array_add(&a[k],
                                    k < 2 || (first && !(k == 3 && x->in->sealed[i]))
                                        ? cell(x, i, cols[k])->v : NULL,
                                    cell(x, i, cols[k])->len);
            convo__pg_array_add(&a[4], ch, 4);
            convo__pg_array_add(&a[5], c->ver, c->ver_len);
            convo__pg_array_add(&a[6], !first || cell(x, i, C_VALS)->null
                                           ? NULL : cell(x, i, C_VALS)->v,
                                cell(x, i, C_VALS)->len);
            int seg = first && x->in->sealed[i] && !cell(x, i, C_R)->null;
            convo__pg_array_add(&a[7], seg ? cell(x, i, C_R)->v : NULL, cell(x, i, C_R)->len);
            first = 0;
            (*n)++;
        }
    }
    int rc = 0;
    for (int k = 0; k < BLOB_ARRAYS; k++) {
        if (a[k].failed)
            rc = a[k].failed == 2 ? CONVO_ETOOLARGE : CONVO_ENOMEM;
        arr[k] = convo__pg_array_finish(&a[k], &lens[k]);
    }
    return rc;
}

/* Values found in checkpoint_blobs put in their channels (type and bytes; a
 * channel without one keeps type 0: no value). PG_READ_AGAIN when a row
 * changed since it was read. */
static int fetch_blobs(read_ctx *x, int rows)
{
    char *arr[BLOB_ARRAYS] = {0};
    int lens[BLOB_ARRAYS];
    size_t n;
    int rc = blob_params(x, rows, arr, lens, &n);
    if (rc == 0 && n > 0)
        rc = convo__pg_run_stored(x->b, ST_CP_BLOBS, (const char *const *)arr, lens, &x->blobs,
                                  x->err);
    else if (rc != 0)
        rc = convo__pg_too_large(rc, x->err);
    for (int k = 0; k < BLOB_ARRAYS; k++)
        free(arr[k]);
    if (rc != 0 || n == 0)
        return rc;
    const PGresult *b = x->blobs;
    if ((size_t)PQntuples(b) != n)
        return corrupt(x, "its values in checkpoint_blobs do not come back");
    size_t e = 0;
    for (int i = 0; i < rows; i++) {
        for (size_t o = 0; o < x->rows[i].nch; o++) {
            pg_chan *c = &x->rows[i].ch[o];
            if (c->type != 0)
                continue;
            int row = (int)e++; /* WITH ORDINALITY, ORDER BY i: the arrays' order */
            if (convo__pg_get_int(b, row, 0) != (int64_t)row + 1)
                return corrupt(x, "its values in checkpoint_blobs come back out of order");
            if (!PQgetvalue(b, row, 1)[0])
                return PG_READ_AGAIN;
            if (PQgetisnull(b, row, 2))
                continue;
            c->type = col_int(b, row, 2);
            c->value = PQgetvalue(b, row, 3);
            c->len = (size_t)PQgetlength(b, row, 3);
        }
    }
    return 0;
}

/* The metadata of row i, unpacked and checked to be one object (compact). */
static int row_metadata(read_ctx *x, int i, char **out)
{
    if (cell(x, i, C_META)->null)
        return (*out = strdup("{}")) ? 0 : CONVO_ENOMEM;
    size_t len, clen;
    char *text = convo__pg_meta_text(cell(x, i, C_META)->v, cell(x, i, C_META)->len,
                                     &len);
    if (!text)
        return CONVO_ENOMEM;
    int ok = text[0] == '{' && convo__json_object_valid(text, len);
    *out = ok ? convo__pg_compact_json_bytes(text, len, &clen) : NULL;
    free(text);
    if (!ok)
        return corrupt(x, "its metadata is not a JSON object");
    return *out ? 0 : CONVO_ENOMEM;
}

/* The checkpoint of row i, without its items. */
static int row_checkpoint(read_ctx *x, int i, convo_checkpoint **out)
{
    char *id = NULL, *parent = NULL, *meta = NULL, *body = NULL;
    const char *body_type = NULL;
    size_t blen = 0;
    int64_t log_length = convo__pg_cell_int(cell(x, i, C_LOG));
    int rc = log_length < 0 ? corrupt(x, "a negative log length")
                            : convo__pg_id_text(cell(x, i, C_ID)->v,
                                                cell(x, i, C_ID)->len, &id);
    if (rc == 0 && !cell(x, i, C_PARENT)->null)
        rc = convo__pg_id_text(cell(x, i, C_PARENT)->v, cell(x, i, C_PARENT)->len,
                               &parent);
    if (rc == CONVO_ECORRUPT && !x->why)
        x->why = "an id is not UTF-8";
    if (rc == 0)
        rc = row_metadata(x, i, &meta);
    if (rc == 0 && !cell(x, i, C_BODY_TYPE)->null) {
        rc = need_name(x, cell_i32(x, i, C_BODY_TYPE), &body_type);
        if (rc == 0 && cell(x, i, C_BODY)->null)
            rc = corrupt(x, "a body type without a body");
        if (rc == 0 && (rc = body_decode(cell(x, i, C_BODY)->v,
                                         cell(x, i, C_BODY)->len, &body, &blen)) ==
                           CONVO_ECORRUPT)
            x->why = "its body does not decode";
    }
    if (rc == 0) {
        *out = convo__checkpoint_new(cell(x, i, C_THREAD)->v, cell(x, i, C_NS)->v, id,
                                     parent, meta, body_type, body ? body : "", blen, log_length,
                                     convo__pg_cell_int(cell(x, i, C_AT)) + PG_EPOCH_MICROS);
        rc = *out ? 0 : CONVO_ENOMEM;
    }
    free(id), free(parent), free(meta), free(body);
    return rc;
}

/* Row i's channels and writes added to cp. */
static int add_items(read_ctx *x, const row_items *it, convo_checkpoint *cp)
{
    int rc = 0;
    for (size_t o = 0; o < it->nch && rc == 0; o++) {
        const pg_chan *c = &it->ch[o];
        const char *name, *type = NULL;
        char *ver = NULL;
        rc = need_name(x, c->ch, &name);
        if (rc == 0 && c->type != 0)
            rc = need_name(x, c->type, &type);
        if (rc == 0 && (rc = convo__pg_ver_text(c->ver, c->ver_len, &ver)) == CONVO_ECORRUPT)
            x->why = "a version does not decode";
        if (rc == 0)
            rc = convo__checkpoint_add_channel(cp, name, ver, type, type ? c->value : "",
                                               type ? c->len : 0);
        free(ver);
    }
    for (size_t k = 0; k < it->nw && rc == 0; k++) {
        const pg_write *w = &it->w[k];
        const char *path, *channel, *type;
        char *task = NULL;
        rc = need_name(x, w->task_path, &path);
        if (rc == 0)
            rc = need_name(x, w->channel, &channel);
        if (rc == 0)
            rc = need_name(x, w->type, &type);
        if (rc == 0 && (rc = convo__pg_id_text(w->task, w->task_len, &task)) == CONVO_ECORRUPT)
            x->why = "a task id is not UTF-8";
        if (rc == 0)
            rc = convo__checkpoint_add_write(cp, task, path, w->idx, channel, type, w->value,
                                             w->len);
        free(task);
    }
    return rc;
}

/* The checkpoints of the rows, in order, into set (or the only one into
 * *single). */
static int build(read_ctx *x, int rows, convo_checkpoint_set *set, convo_checkpoint **single)
{
    int rc = 0;
    for (int i = 0; i < rows && rc == 0; i++) {
        convo_checkpoint *cp = NULL;
        rc = row_checkpoint(x, i, &cp);
        if (rc == 0)
            rc = add_items(x, &x->rows[i], cp);
        if (rc != 0) {
            convo_checkpoint_free(cp);
            break;
        }
        convo__checkpoint_finish(cp);
        if (set) {
            rc = convo__checkpoint_set_add(set, cp); /* owns cp, also on failure */
        } else {
            convo_checkpoint_free(*single);
            *single = cp;
        }
    }
    return rc;
}

int convo__pg_read_rows(convo_backend *b, const pg_rows *in, const char *only_channel,
                        convo_checkpoint_set *set, convo_checkpoint **single, convo_error *err)
{
    int rows = (int)in->n;
    read_ctx x = {b, in, only_channel, 0, NULL, NULL, NULL, err};
    int rc = 0;
    if (only_channel && !(x.only_num = num_of(b->names, only_channel)) && rows > 0 &&
        (rc = refresh(b, 0, 0, err)) == 0)
        x.only_num = num_of(b->names, only_channel);
    if (rc == 0 && !(x.rows = calloc(rows ? (size_t)rows : 1, sizeof *x.rows)))
        rc = CONVO_ENOMEM;
    for (int i = 0; i < rows && rc == 0; i++)
        rc = decode_row(&x, i, &x.rows[i]);
    if (rc == 0)
        rc = fetch_blobs(&x, rows);
    if (rc == 0)
        rc = build(&x, rows, set, single);
    for (int i = 0; x.rows && i < rows; i++)
        free(x.rows[i].ch), free(x.rows[i].w);
    free(x.rows);
    PQclear(x.blobs);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "postgres: a stored checkpoint is corrupt (%s)",
                            x.why ? x.why : "it does not decode");
    if (rc == CONVO_ENOMEM)
        return convo__error(err, rc, NULL, "out of memory reading checkpoints");
    return rc; /* 0, PG_READ_AGAIN, or err filled by a statement */
}
