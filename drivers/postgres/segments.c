/* segments.c — sealed checkpoint segments (schema 42, docs/postgres.md): a
 * thread's older checkpoints of one namespace packed N at a time into one row
 * of checkpoint_segments with lib/segment; the seal after a put, the rows a
 * read gets (its segments expanded, filtered and merged with the rows), and
 * the unseal that a call changing checkpoints in place runs first. */
#include "config.h"
#include "pg_int.h"
#include "drivers/postgres/sql.h"
#include "lib/segment.h"
#include <stdlib.h>
#include <string.h>

/* The columns a segment holds for each checkpoint, in this order. */
enum { S_ID, S_PARENT, S_META, S_LOG, S_AT, S_BODY_TYPE, S_BODY, S_SET, S_VERSIONS, S_VALS,
       S_WRITES, S_PUT, S_NCOLS };
/* The result column each comes from (checkpoint_get.sql's order). */
static const int seg_col[S_NCOLS] = {C_ID, C_PARENT, C_META, C_LOG, C_AT, C_BODY_TYPE,
                                     C_BODY, C_SET, C_VERSIONS, C_VALS, C_WRITES, C_PUT};

/* ---- rows as cells */

void convo__pg_rows_free(pg_rows *rows)
{
    for (size_t i = 0; i < rows->nsegs; i++)
        convo__seg_free(rows->segs[i]);
    free(rows->segs);
    free(rows->cells);
    free(rows->sealed);
    memset(rows, 0, sizeof *rows);
}

static pg_cell *add_row(pg_rows *rows, int sealed)
{
    if (rows->n == rows->cap) {
        size_t cap = rows->cap ? 2 * rows->cap : 16;
        pg_cell *c = realloc(rows->cells, cap * PG_NCOLS * sizeof *c);
        if (!c)
            return NULL;
        rows->cells = c;
        unsigned char *s = realloc(rows->sealed, cap);
        if (!s)
            return NULL;
        rows->sealed = s;
        rows->cap = cap;
    }
    rows->sealed[rows->n] = (unsigned char)sealed;
    pg_cell *row = &rows->cells[rows->n++ * PG_NCOLS];
    for (int c = 0; c < PG_NCOLS; c++)
        row[c] = (pg_cell){NULL, 0, 1};
    return row;
}

static pg_cell result_cell(const PGresult *r, int i, int col)
{
    if (col >= PQnfields(r) || PQgetisnull(r, i, col))
        return (pg_cell){NULL, 0, 1};
    return (pg_cell){PQgetvalue(r, i, col), (size_t)PQgetlength(r, i, col), 0};
}

int64_t convo__pg_cell_int(const pg_cell *c)
{
    uint64_t v = 0;
    for (size_t k = 0; k < c->len; k++)
        v = v << 8 | (unsigned char)c->v[k];
    return c->len == 4 ? (int64_t)(int32_t)(uint32_t)v : (int64_t)v;
}

/* bytea's order: bytes, then the shorter first. */
static int id_cmp(const pg_cell *a, const pg_cell *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->v, b->v, n) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* Segment data of result row i unpacked and kept in rows; its shape checked. */
static int open_segment(pg_rows *rows, const PGresult *r, int i, convo__seg **out,
                        const char **why)
{
    pg_cell d = result_cell(r, i, C_BODY);
    convo__seg *seg = NULL;
    if (d.null || convo__seg_unpack(d.v, d.len, &seg, NULL) != 0 || seg->cols != S_NCOLS) {
        convo__seg_free(seg);
        *why = "a sealed segment does not decode";
        return CONVO_ECORRUPT;
    }
    if (rows->nsegs == rows->cap_segs) {
        size_t cap = rows->cap_segs ? 2 * rows->cap_segs : 4;
        convo__seg **g = realloc(rows->segs, cap * sizeof *g);
        if (!g) {
            convo__seg_free(seg);
            return CONVO_ENOMEM;
        }
        rows->segs = g, rows->cap_segs = cap;
    }
    rows->segs[rows->nsegs++] = seg;
    for (uint32_t m = 0; m < seg->rows; m++) {
        const convo__seg_cell *c = convo__seg_at(seg, m, 0);
        int bad = c[S_ID].is_null || c[S_LOG].is_null || c[S_LOG].len != 8 ||
                  c[S_AT].is_null || c[S_AT].len != 8 || c[S_PUT].is_null ||
                  c[S_PUT].len != 8 || c[S_SET].is_null || c[S_SET].len != 4 ||
                  c[S_VERSIONS].is_null || c[S_META].is_null ||
                  (!c[S_BODY_TYPE].is_null && c[S_BODY_TYPE].len != 4);
        if (bad) {
            *why = "a sealed checkpoint's columns do not check";
            return CONVO_ECORRUPT;
        }
    }
    *out = seg;
    return 0;
}

/* Member m of seg as a row of rows (thread, namespace and tid from result row i). */
static int add_member(pg_rows *rows, const PGresult *r, int i, const convo__seg *seg,
                      uint32_t m)
{
    pg_cell *row = add_row(rows, 1);
    if (!row)
        return CONVO_ENOMEM;
    row[C_THREAD] = result_cell(r, i, C_THREAD);
    row[C_NS] = result_cell(r, i, C_NS);
    row[C_TID] = result_cell(r, i, C_TID);
    row[C_R] = result_cell(r, i, C_R); /* the segment's xmin: the blobs' read checks it */
    for (int s = 0; s < S_NCOLS; s++) {
        const convo__seg_cell *c = convo__seg_at(seg, m, (uint32_t)s);
        row[seg_col[s]] = (pg_cell){c->data, c->len, c->is_null};
    }
    return 0;
}

static int cell_is_id(const pg_cell *c, const char *id)
{
    char *text = NULL;
    int same = convo__pg_id_text(c->v, c->len, &text) == 0 && strcmp(text, id) == 0;
    free(text);
    return same;
}

/* ---- a read's rows */

/* Kind 2: the segment `before` may be in; its put_seq into *before_put. */
static int before_in_segment(pg_rows *rows, const PGresult *r, int i, const char *before,
                             int64_t *before_put, const char **why)
{
    convo__seg *seg;
    int rc = open_segment(rows, r, i, &seg, why);
    for (uint32_t m = 0; rc == 0 && m < seg->rows; m++) {
        const convo__seg_cell *c = convo__seg_at(seg, m, S_ID);
        pg_cell id = {c->data, c->len, 0};
        if (cell_is_id(&id, before)) {
            const convo__seg_cell *p = convo__seg_at(seg, m, S_PUT);
            *before_put = convo__pg_cell_int(&(pg_cell){p->data, p->len, 0});
            return 0;
        }
    }
    return rc ? rc : CONVO_ENOTFOUND;
}

/* A sealed member's metadata against the listing's filter. */
static int member_matches(const pg_cell *row, void *filter)
{
    if (!filter)
        return 1;
    size_t len;
    char *text = convo__pg_meta_text(row[C_META].v, row[C_META].len, &len);
    int ok = text && convo__json_contains(text, len, filter);
    free(text);
    return ok;
}

static int by_thread_newest(const void *a, const void *b)
{
    const pg_cell *x = a, *y = b;
    int c = strcmp(x[C_THREAD].v, y[C_THREAD].v);
    if (c)
        return c;
    int64_t p = convo__pg_cell_int(&x[C_PUT]), q = convo__pg_cell_int(&y[C_PUT]);
    return (p < q) - (p > q);
}

int convo__pg_rows_read(const PGresult *r, const pg_read_opts *o, pg_rows *rows,
                        const char **why)
{
    int64_t before_put = -1;
    int rc = 0, have_row = 0;
    memset(rows, 0, sizeof *rows);
    for (int i = 0; i < PQntuples(r) && rc == 0; i++) {
        int64_t kind = convo__pg_get_int(r, i, C_KIND);
        if (kind == 9)
            rc = CONVO_ENOTFOUND; /* `before` names no checkpoint */
        else if (kind == 3)
            before_put = convo__pg_get_int(r, i, C_PUT);
        else if (kind == 2 && o->before)
            rc = before_in_segment(rows, r, i, o->before, &before_put, why);
        else if (kind == 0)
            have_row = 1;
    }
    for (int i = 0; i < PQntuples(r) && rc == 0; i++) {
        int64_t kind = convo__pg_get_int(r, i, C_KIND);
        if (kind == 0) {
            pg_cell *row = add_row(rows, 0);
            if (!row)
                return CONVO_ENOMEM;
            for (int c = 0; c < PG_NCOLS; c++)
                row[c] = result_cell(r, i, c);
        } else if (kind == 1 && !(o->id && have_row)) { /* a row wins over a sealed copy */
            convo__seg *seg;
            rc = open_segment(rows, r, i, &seg, why);
            for (uint32_t m = 0; rc == 0 && m < seg->rows; m++) {
                const convo__seg_cell *id = convo__seg_at(seg, m, S_ID);
                if (o->id && !cell_is_id(&(pg_cell){id->data, id->len, 0}, o->id))
                    continue;
                rc = add_member(rows, r, i, seg, m);
            }
        }
    }
    if (rc != 0 || !o->listing)
        return rc;
    /* a listing: sealed members filtered, everything before `before`, in order */
    size_t k = 0;
    for (size_t i = 0; i < rows->n; i++) {
        pg_cell *row = &rows->cells[i * PG_NCOLS];
        if (before_put >= 0 && convo__pg_cell_int(&row[C_PUT]) >= before_put)
            continue;
        if (rows->sealed[i] && !member_matches(row, o->filter))
            continue;
        if (rows->sealed[i] && o->only_channel) /* as its statement: no metadata, no body */
            row[C_META].null = row[C_BODY_TYPE].null = row[C_BODY].null = 1;
        if (k != i) {
            memmove(&rows->cells[k * PG_NCOLS], row, PG_NCOLS * sizeof *row);
            rows->sealed[k] = rows->sealed[i];
        }
        k++;
    }
    rows->n = k;
    int any_sealed = 0;
    for (size_t i = 0; i < k; i++)
        any_sealed |= rows->sealed[i];
    if (!any_sealed) { /* the statement's order; longer than the limit when `before` was sealed */
        if (o->limit && rows->n > o->limit)
            rows->n = o->limit;
        return 0;
    }
    /* qsort is not stable: sealed flags ride along in a copy of the order */
    unsigned char *flags = malloc(k ? k : 1);
    pg_cell *tmp = malloc((k ? k : 1) * (PG_NCOLS + 1) * sizeof *tmp);
    if (!flags || !tmp) {
        free(flags), free(tmp);
        return CONVO_ENOMEM;
    }
    for (size_t i = 0; i < k; i++) {
        memcpy(&tmp[i * (PG_NCOLS + 1)], &rows->cells[i * PG_NCOLS], PG_NCOLS * sizeof *tmp);
        tmp[i * (PG_NCOLS + 1) + PG_NCOLS] = (pg_cell){NULL, rows->sealed[i], 0};
    }
    qsort(tmp, k, (PG_NCOLS + 1) * sizeof *tmp, by_thread_newest);
    if (o->limit && k > o->limit)
        k = o->limit;
    for (size_t i = 0; i < k; i++) {
        memcpy(&rows->cells[i * PG_NCOLS], &tmp[i * (PG_NCOLS + 1)], PG_NCOLS * sizeof *tmp);
        flags[i] = (unsigned char)tmp[i * (PG_NCOLS + 1) + PG_NCOLS].len;
    }
    memcpy(rows->sealed, flags, k);
    rows->n = k;
    free(flags), free(tmp);
    return 0;
}

/* ---- the seal */

enum { SEAL_LAST_ID = PG_NCOLS + 1 }; /* checkpoint_seal_rows.sql: put, xmin, last id */

/* Whether a seal is due after a put to a namespace that had rows_before rows:
 * when the put leaves seg_hot rows and a whole number of segments' more. From
 * the stored rows, not from this handle's puts, so a thread put to by many
 * short-lived handles seals as one put to by one; a seal that did nothing
 * (ids out of order, a concurrent change) is tried again seg_rows puts later. */
static int seal_due(const convo_backend *b, int64_t rows_before)
{
    if (rows_before >= PG_SEAL_COUNT_MAX)
        return 0; /* the put statements count no further: put_done decides */
    int64_t beyond = rows_before + 1 - b->seg_hot;
    return beyond >= b->seg_rows && beyond % b->seg_rows == 0;
}

/* The rows of r to seal, in groups of seg_rows (*n of them into pick): in
 * put order, those whose id is above every id sealed before them (the
 * namespace's last segment's, then each group's greatest), so segments hold
 * ranges of ids that do not overlap and a look-up reads one. A row whose id
 * is below (ids out of put order) stays a row. */
static int sealable(const convo_backend *b, const PGresult *r, int *pick, int *n)
{
    pg_cell floor = result_cell(r, 0, SEAL_LAST_ID), top = {NULL, 0, 1};
    int got = 0, in_group = 0, rows = PQntuples(r);
    *n = 0;
    for (int i = 0; i < rows; i++) {
        pg_cell id = result_cell(r, i, C_ID);
        if (!floor.null && id_cmp(&id, &floor) <= 0)
            continue;
        pick[got++] = i;
        if (top.null || id_cmp(&id, &top) > 0)
            top = id;
        if (++in_group == b->seg_rows) {
            floor = top, top = (pg_cell){NULL, 0, 1};
            in_group = 0;
            *n = got;
        }
    }
    return *n;
}

typedef struct seal_arrays {
    pg_array a[8]; /* ids, xmins, first, last, max log, first id, last id, data */
} seal_arrays;

/* The group of rows pick[0 .. seg_rows) packed, and its entries added. */
static int pack_group(const convo_backend *b, const PGresult *r, const int *pick,
                      seal_arrays *s, convo_error *err)
{
    int n = b->seg_rows;
    convo__seg_cell *cells = calloc((size_t)n * S_NCOLS, sizeof *cells);
    if (!cells)
        return CONVO_ENOMEM;
    int64_t max_log = 0;
    pg_cell lo = result_cell(r, pick[0], C_ID), hi = lo;
    for (int m = 0; m < n; m++) {
        int i = pick[m];
        for (int c = 0; c < S_NCOLS; c++) {
            pg_cell v = result_cell(r, i, seg_col[c]);
            cells[m * S_NCOLS + c] = (convo__seg_cell){v.v, v.len, v.null};
        }
        int64_t log = convo__pg_get_int(r, i, C_LOG);
        max_log = log > max_log ? log : max_log;
        pg_cell id = result_cell(r, i, C_ID);
        lo = id_cmp(&id, &lo) < 0 ? id : lo;
        hi = id_cmp(&id, &hi) > 0 ? id : hi;
        convo__pg_array_add(&s->a[0], id.v, id.len);
        convo__pg_array_add(&s->a[1], PQgetvalue(r, i, PG_NCOLS),
                            (size_t)PQgetlength(r, i, PG_NCOLS));
    }
    void *data;
    size_t len;
    int rc = convo__seg_pack(cells, (uint32_t)n, S_NCOLS, &data, &len, err);
    free(cells);
    if (rc != 0)
        return rc;
    char ml[8];
    put64(ml, (uint64_t)max_log);
    convo__pg_array_add(&s->a[2], PQgetvalue(r, pick[0], C_PUT), 8);
    convo__pg_array_add(&s->a[3], PQgetvalue(r, pick[n - 1], C_PUT), 8);
    convo__pg_array_add(&s->a[4], ml, 8);
    convo__pg_array_add(&s->a[5], lo.v, lo.len);
    convo__pg_array_add(&s->a[6], hi.v, hi.len);
    convo__pg_array_add(&s->a[7], data, len);
    free(data);
    return 0;
}

/* checkpoint_vacuum.sql after a seal: the sealed rows' space reused at once.
 * Its failure changes nothing stored (the space waits for autovacuum). */
static void vacuum(convo_backend *b)
{
    char *sql = convo__pg_fill(b, SQL_CHECKPOINT_VACUUM, NULL);
    pg_conn *c;
    convo_error ignored = {0};
    if (sql && convo__pg_conn_get(b, &c, &ignored) == 0) {
        (void)convo__pg_exec(b, c->pg, sql, &ignored);
        convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
    }
    free(sql);
}

int convo__pg_seal(convo_backend *b, const char *thread_id, const char *ns,
                   int64_t rows_before, int *sealed, convo_error *err)
{
    *sealed = 0;
    if (b->seg_rows <= 0 || (rows_before >= 0 && !seal_due(b, rows_before)))
        return 0;
    char keep[8], most[8];
    put64(keep, (uint64_t)b->seg_hot);
    put64(most, (uint64_t)b->seg_rows * PG_SEAL_MAX_SEGMENTS);
    const char *values[4] = {thread_id, ns, keep, most};
    int lens[10] = {(int)strlen(thread_id), (int)strlen(ns), 8, 8};
    PGresult *r;
    int rc = convo__pg_run(b, ST_CP_SEAL_ROWS, values, lens, &r, err);
    if (rc != 0)
        return rc;
    int *pick = malloc(((size_t)PQntuples(r) + 1) * sizeof *pick), rows = 0;
    if (!pick || sealable(b, r, pick, &rows) == 0) {
        free(pick);
        PQclear(r);
        return pick ? 0 : convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    static const uint32_t oids[8] = {OID_BYTEA, OID_TEXT, OID_INT8, OID_INT8,
                                     OID_INT8,  OID_BYTEA, OID_BYTEA, OID_BYTEA};
    seal_arrays s;
    for (int k = 0; k < 8; k++)
        convo__pg_array_start(&s.a[k], oids[k], 64);
    for (int from = 0; from < rows && rc == 0; from += b->seg_rows)
        rc = pack_group(b, r, pick + from, &s, err);
    free(pick);
    char tid[8];
    memcpy(tid, PQgetvalue(r, 0, C_TID), 8);
    PQclear(r);
    char *arr[8];
    int failed = 0;
    for (int k = 0; k < 8; k++) {
        failed |= s.a[k].failed;
        arr[k] = convo__pg_array_finish(&s.a[k], &lens[2 + k]);
        failed |= !arr[k];
    }
    if (rc == 0 && failed)
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory sealing checkpoints");
    if (rc == 0) {
        const char *sv[10] = {tid, ns, arr[0], arr[1], arr[2], arr[3], arr[4], arr[5],
                              arr[6], arr[7]};
        lens[0] = 8, lens[1] = (int)strlen(ns);
        convo_error e = {0};
        rc = convo__pg_run(b, ST_CP_SEAL, sv, lens, &r, &e);
        if (rc == 0) {
            *sealed = (int)convo__pg_get_int(r, 0, 0);
            PQclear(r);
            vacuum(b);
        } else if (strcmp(e.backend_code, "CV043") == 0) {
            rc = 0; /* a row changed or went since it was read: sealed later */
        } else if (err) {
            *err = e;
        }
    }
    for (int k = 0; k < 8; k++)
        free(arr[k]);
    return rc;
}

/* ---- the unseal, and the calls that need it */

enum { MAX_PARAMS = 32 };
static const Oid no_types[MAX_PARAMS] = {0};
static const int binary[MAX_PARAMS] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                       1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

static int exec_params(const convo_backend *b, PGconn *pg, int st, int n,
                       const char *const *values, const int *lens, PGresult **out,
                       convo_error *err)
{
    PGresult *r = PQexecParams(pg, b->sql[st], n, no_types, values, lens, binary, 1);
    ExecStatusType status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
        *out = r;
        return 0;
    }
    int rc = convo__pg_fail(b, pg, r, err);
    PQclear(r);
    return rc;
}

/* The columns of checkpoint_unseal.sql, $4 to $17, from a segment's members. */
enum { U_ARRAYS = 14 };
static const uint32_t unseal_oids[U_ARRAYS] = {
    OID_TEXT, OID_INT8, OID_INT8, OID_TIMESTAMPTZ, OID_INT4, OID_INT4, OID_BYTEA,
    OID_BYTEA, OID_TEXT, OID_BYTEA, OID_BYTEA, OID_BYTEA, OID_INT4, OID_BYTEA};

static int add_members(pg_array *a, const pg_cell *ns, const convo__seg *seg)
{
    static const int from[11] = {S_PUT, S_LOG, S_AT, S_SET, S_BODY_TYPE, S_ID, S_PARENT,
                                 S_META, S_VERSIONS, S_BODY, S_VALS};
    for (uint32_t m = 0; m < seg->rows; m++) {
        convo__pg_array_add(&a[0], ns->v, ns->len);
        for (int k = 0; k < 11; k++) {
            const convo__seg_cell *c = convo__seg_at(seg, m, (uint32_t)from[k]);
            convo__pg_array_add(&a[1 + k], c->is_null ? NULL : c->data, c->len);
        }
        const convo__seg_cell *w = convo__seg_at(seg, m, S_WRITES);
        if (w->is_null) {
            convo__pg_array_add(&a[12], NULL, 0);
            continue;
        }
        pg_array_elem *el;
        size_t ne;
        int rc = convo__pg_unpack_array(w->data, w->len, &el, &ne);
        if (rc != 0)
            return rc;
        char count[4];
        put32(count, (uint32_t)ne);
        convo__pg_array_add(&a[12], count, 4);
        for (size_t e = 0; e < ne; e++)
            convo__pg_array_add(&a[13], el[e].bytes, el[e].len);
        free(el);
    }
    return 0;
}

/* In the open transaction on pg: every segment of thread_id back to rows. */
static int unseal(convo_backend *b, PGconn *pg, const char *thread_id, convo_error *err)
{
    const char *v1[1] = {thread_id};
    int l1[1] = {(int)strlen(thread_id)};
    PGresult *r;
    int rc = exec_params(b, pg, ST_CP_UNSEAL_ROWS, 1, v1, l1, &r, err);
    if (rc != 0)
        return rc;
    int n = PQntuples(r);
    if (n == 0) {
        PQclear(r);
        return 0;
    }
    pg_array key[2], a[U_ARRAYS];
    convo__pg_array_start(&key[0], OID_TEXT, 64);
    convo__pg_array_start(&key[1], OID_BYTEA, 64);
    for (int k = 0; k < U_ARRAYS; k++)
        convo__pg_array_start(&a[k], unseal_oids[k], 256);
    for (int i = 0; i < n && rc == 0; i++) {
        pg_cell ns = result_cell(r, i, 1), data = result_cell(r, i, 3);
        convo__seg *seg = NULL;
        if (convo__seg_unpack(data.v, data.len, &seg, NULL) != 0 || seg->cols != S_NCOLS) {
            rc = convo__error(err, CONVO_ECORRUPT, NULL,
                              "postgres: a sealed segment does not decode (unsealing)");
        } else {
            convo__pg_array_add(&key[0], ns.v, ns.len);
            convo__pg_array_add(&key[1], PQgetvalue(r, i, 2), (size_t)PQgetlength(r, i, 2));
            if (add_members(a, &ns, seg) != 0)
                rc = convo__error(err, CONVO_ECORRUPT, NULL,
                                  "postgres: a sealed checkpoint's writes do not decode");
        }
        convo__seg_free(seg);
    }
    char tid[8];
    memcpy(tid, PQgetvalue(r, 0, 0), 8);
    PQclear(r);
    const char *values[17] = {tid};
    int lens[17] = {8};
    char *owned[16] = {0};
    int failed = 0;
    for (int k = 0; k < 2; k++) {
        failed |= key[k].failed;
        values[1 + k] = owned[k] = convo__pg_array_finish(&key[k], &lens[1 + k]);
    }
    for (int k = 0; k < U_ARRAYS; k++) {
        failed |= a[k].failed;
        values[3 + k] = owned[2 + k] = convo__pg_array_finish(&a[k], &lens[3 + k]);
    }
    for (int k = 0; k < 16; k++)
        failed |= !owned[k];
    if (rc == 0 && failed)
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory unsealing checkpoints");
    if (rc == 0 && (rc = exec_params(b, pg, ST_CP_UNSEAL, 17, values, lens, &r, err)) == 0) {
        if (convo__pg_get_int(r, 0, 0) != n)
            rc = convo__error(err, CONVO_ECONFLICT, NULL,
                              "postgres: the thread's segments changed while unsealed");
        PQclear(r);
    }
    for (int k = 0; k < 16; k++)
        free(owned[k]);
    return rc;
}

/* One try of: BEGIN, the unseal, statement st again, COMMIT. */
static int unsealed_once(convo_backend *b, const char *thread_id, int st, int nparams,
                         const char *const *values, const int *lens, PGresult **out,
                         convo_error *err)
{
    pg_conn *c;
    int rc = convo__pg_conn_get(b, &c, err);
    if (rc != 0)
        return rc;
    PGresult *r = NULL;
    rc = convo__pg_exec(b, c->pg, SQL_UNSEAL_BEGIN, err);
    if (rc == 0)
        rc = unseal(b, c->pg, thread_id, err);
    if (rc == 0)
        rc = exec_params(b, c->pg, st, nparams, values, lens, &r, err);
    if (rc == 0)
        rc = convo__pg_exec(b, c->pg, SQL_MIGRATE_COMMIT, err);
    else if (PQstatus(c->pg) == CONNECTION_OK)
        PQclear(PQexec(c->pg, SQL_MIGRATE_ROLLBACK));
    convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
    if (rc != 0) {
        PQclear(r);
        return rc;
    }
    *out = r;
    return 0;
}

int convo__pg_run_unsealed(convo_backend *b, const char *thread_id, int st, int nparams,
                           const char *const *values, const int *lens, int how,
                           PGresult **out, convo_error *err)
{
    convo_error e = {0};
    int rc = how == PG_RUN_PLAIN    ? convo__pg_run(b, st, values, lens, out, &e)
             : how == PG_RUN_STORED ? convo__pg_run_stored(b, st, values, lens, out, &e)
                                    : convo__pg_run_stored_bytes(b, st, values, lens, out, &e);
    for (int attempt = 0; rc != 0 && attempt < 3; attempt++) {
        if (strcmp(e.backend_code, "CV042") != 0)
            break;
        memset(&e, 0, sizeof e);
        rc = unsealed_once(b, thread_id, st, nparams, values, lens, out, &e);
    }
    if (rc != 0 && err)
        *err = e;
    return rc;
}
