/* segments.c — layout 17's sealed segments (docs/sqlite.md, "Layout 17"): a
 * put stores its checkpoint hot (the moved columns in convo_checkpoint_hot)
 * and seals the block of 16 positions it leaves SEAL_BEHIND positions behind
 * into one row of convo_checkpoint_segments (lib/segment.c: the moved columns
 * column by column, deflated); the statements read a sealed row's moved
 * columns through the SQL function convo_sealed(); a write to them makes the
 * block hot again first (sq_seg_hot). */
#include "config.h"
#include "sqlite_int.h"
#include "segments.h"
#include "segment.h" /* lib/ */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A put at position p seals block p / 16 - 1 when p % 16 == SEAL_BEHIND: the
 * block is whole and its last row SEAL_BEHIND + 1 positions behind, past the
 * two newest rows whose pending writes wait apart and that the next put's
 * swaps rewrite (layout 13). */
#define SEAL_BEHIND 3
/* A segment's columns: the row's position in its block, then the moved ones
 * in the order of seg-rows.sql and of convo_sealed()'s column numbers. */
#define SEG_COLS 8
/* A cell's type tag (its first byte), after SQLite's storage classes. */
enum { TAG_INT = 1, TAG_REAL = 2, TAG_TEXT = 3, TAG_BLOB = 4 };

/* The last two segments convo_sealed() decoded on this connection: their
 * stored bytes and cells, the one used last first (a listing reads each
 * segment once; a get reads its row's segment and, for its channel list's
 * chain, often the block's before it, then its own again). */
typedef struct seg_slot {
    unsigned char *bytes;
    size_t len;
    convo__seg *seg;
} seg_slot;

typedef struct seg_memo {
    seg_slot slot[2];
} seg_memo;

static void slot_clear(seg_slot *m)
{
    free(m->bytes);
    convo__seg_free(m->seg);
    m->bytes = NULL;
    m->seg = NULL;
    m->len = 0;
}

static void memo_destroy(void *p)
{
    seg_memo *m = p;
    slot_clear(&m->slot[0]);
    slot_clear(&m->slot[1]);
    free(m);
}

static void sealed_error(sqlite3_context *ctx, const char *msg, int code)
{
    sqlite3_result_error(ctx, msg, -1);
    sqlite3_result_error_code(ctx, code);
}

static int slot_holds(const seg_slot *m, const void *data, size_t len)
{
    return m->seg && m->len == len && memcmp(m->bytes, data, len) == 0;
}

/* The segment of data, from the memo or decoded into it (in place of the
 * one used longer ago); NULL after an error was set on ctx. */
static const convo__seg *segment_of(sqlite3_context *ctx, seg_memo *memo, const void *data,
                                    size_t len)
{
    seg_slot used;
    if (slot_holds(&memo->slot[0], data, len))
        return memo->slot[0].seg;
    if (slot_holds(&memo->slot[1], data, len)) {
        used = memo->slot[1];
        memo->slot[1] = memo->slot[0];
        memo->slot[0] = used;
        return used.seg;
    }
    slot_clear(&memo->slot[1]);
    memo->slot[1] = memo->slot[0];
    memo->slot[0] = (seg_slot){NULL, 0, NULL};
    seg_slot *m = &memo->slot[0];
    convo_error err;
    convo__error_clear(&err);
    convo__seg *seg;
    int rc = convo__seg_unpack(data, len, &seg, &err);
    if (rc == 0 && seg->cols != SEG_COLS) {
        rc = convo__error(&err, CONVO_ECORRUPT, NULL,
                          "sqlite: a checkpoint segment of %u columns", seg->cols);
        convo__seg_free(seg);
    }
    if (rc != 0) {
        char msg[sizeof err.message + 16];
        snprintf(msg, sizeof msg, "sqlite: %s", err.message);
        sealed_error(ctx, msg, rc == CONVO_ENOMEM ? SQLITE_NOMEM : SQLITE_CORRUPT);
        return NULL;
    }
    m->bytes = malloc(len ? len : 1);
    if (m->bytes) {
        memcpy(m->bytes, data, len);
        m->len = len;
        m->seg = seg;
    } else {
        convo__seg_free(seg);
        sqlite3_result_error_nomem(ctx);
    }
    return m->seg;
}

/* The value of a cell as its tag says. */
static void result_cell(sqlite3_context *ctx, const convo__seg_cell *cell)
{
    const unsigned char *p = cell->data;
    if (cell->is_null) {
        sqlite3_result_null(ctx);
        return;
    }
    if (cell->len == 0) {
        sealed_error(ctx, "sqlite: a sealed checkpoint's cell without its type", SQLITE_CORRUPT);
        return;
    }
    size_t n = cell->len - 1;
    switch (p[0]) {
    case TAG_INT:
    case TAG_REAL: {
        if (n != 8)
            break;
        uint64_t u = 0;
        for (int i = 7; i >= 0; i--)
            u = u << 8 | p[1 + i];
        if (p[0] == TAG_INT) {
            sqlite3_result_int64(ctx, (sqlite3_int64)u);
        } else {
            double d;
            memcpy(&d, &u, sizeof d);
            sqlite3_result_double(ctx, d);
        }
        return;
    }
    case TAG_TEXT:
        sqlite3_result_text64(ctx, (const char *)p + 1, n, SQLITE_TRANSIENT, SQLITE_UTF8);
        return;
    case TAG_BLOB:
        sqlite3_result_blob64(ctx, p + 1, n, SQLITE_TRANSIENT);
        return;
    }
    sealed_error(ctx, "sqlite: a sealed checkpoint's cell of an unknown type", SQLITE_CORRUPT);
}

/* convo_sealed(segment, key, column): the moved column (1..7) of sealed
 * checkpoint key from its block's segment. */
static void fn_sealed(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const void *data = sqlite3_value_blob(argv[0]);
    size_t len = (size_t)sqlite3_value_bytes(argv[0]);
    int64_t key = sqlite3_value_int64(argv[1]);
    int col = sqlite3_value_int(argv[2]);
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB || !data) {
        sealed_error(ctx, "sqlite: a sealed checkpoint's segment is missing", SQLITE_CORRUPT);
        return;
    }
    if (col < 1 || col >= SEG_COLS) {
        sqlite3_result_error(ctx, "convo_sealed: no such column", -1);
        return;
    }
    const convo__seg *seg = segment_of(ctx, sqlite3_user_data(ctx), data, len);
    if (!seg)
        return;
    unsigned char place = (unsigned char)(key & 15);
    for (uint32_t r = 0; r < seg->rows; r++) {
        const convo__seg_cell *at = convo__seg_at(seg, r, 0);
        if (!at->is_null && at->len == 1 && *(const unsigned char *)at->data == place) {
            result_cell(ctx, convo__seg_at(seg, r, (uint32_t)col));
            return;
        }
    }
    sealed_error(ctx, "sqlite: a sealed checkpoint is not in its block's segment",
                 SQLITE_CORRUPT);
}

int sq_segments_register(sqlite3 *db)
{
    seg_memo *m = calloc(1, sizeof *m);
    if (!m)
        return SQLITE_NOMEM;
    return sqlite3_create_function_v2(db, "convo_sealed", 3,
                                      SQLITE_UTF8 | SQLITE_DETERMINISTIC, m, fn_sealed, NULL,
                                      NULL, memo_destroy);
}

/* ---- sealing ---- */

/* Column i of st's row as a cell: its tag and bytes in *buf (malloc'd). */
static int cell_of(sqlite3_stmt *st, int i, convo__seg_cell *cell, unsigned char **buf)
{
    int type = sqlite3_column_type(st, i);
    *buf = NULL;
    if (type == SQLITE_NULL) {
        *cell = (convo__seg_cell){NULL, 0, 1};
        return 0;
    }
    size_t n = type == SQLITE_INTEGER || type == SQLITE_FLOAT ? 8 : (size_t)sqlite3_column_bytes(st, i);
    unsigned char *p = malloc(n + 1);
    if (!p)
        return -1;
    if (type == SQLITE_INTEGER || type == SQLITE_FLOAT) {
        uint64_t u;
        if (type == SQLITE_INTEGER) {
            u = (uint64_t)sqlite3_column_int64(st, i);
        } else {
            double d = sqlite3_column_double(st, i);
            memcpy(&u, &d, sizeof u);
        }
        p[0] = type == SQLITE_INTEGER ? TAG_INT : TAG_REAL;
        for (int k = 0; k < 8; k++)
            p[1 + k] = (unsigned char)(u >> (8 * k));
    } else {
        p[0] = type == SQLITE_TEXT ? TAG_TEXT : TAG_BLOB;
        const void *src = type == SQLITE_TEXT ? (const void *)sqlite3_column_text(st, i)
                                              : sqlite3_column_blob(st, i);
        if (n)
            memcpy(p + 1, src, n);
    }
    *buf = p;
    *cell = (convo__seg_cell){p, n + 1, 0};
    return 0;
}

typedef struct seal_rows {
    convo__seg_cell cells[16 * SEG_COLS];
    unsigned char *bufs[16 * SEG_COLS];
    unsigned char places[16];
    uint32_t n;
} seal_rows;

static void seal_rows_free(seal_rows *s)
{
    for (size_t i = 0; i < (size_t)s->n * SEG_COLS; i++)
        free(s->bufs[i]);
}

/* The unsealed rows of block into s. */
static int rows_read(sq_conn *c, int64_t block, seal_rows *s, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_SEG_ROWS, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, block);
    while ((rc = sq_stmt_step(c, st, "reading the rows to seal", err)) == 1) {
        if (s->n == 16) { /* a block has 16 positions */
            sq_stmt_done(st);
            return convo__error(err, CONVO_ECORRUPT, NULL, "sqlite: a block of over 16 rows");
        }
        convo__seg_cell *row = &s->cells[(size_t)s->n * SEG_COLS];
        unsigned char **bufs = &s->bufs[(size_t)s->n * SEG_COLS];
        s->places[s->n] = (unsigned char)(sqlite3_column_int64(st, 0) & 15);
        row[0] = (convo__seg_cell){&s->places[s->n], 1, 0};
        bufs[0] = NULL;
        s->n++;
        for (int i = 1; i < SEG_COLS; i++)
            if (cell_of(st, i, &row[i], &bufs[i]) != 0) {
                for (int k = i; k < SEG_COLS; k++)
                    bufs[k] = NULL;
                sq_stmt_done(st);
                return no_memory(err);
            }
    }
    return rc;
}

/* Seals block's rows not sealed yet into its segment; nothing when it has
 * none or already has a segment. */
static int seal_block(sq_conn *c, int64_t block, convo_error *err)
{
    seal_rows s;
    s.n = 0;
    int rc = rows_read(c, block, &s, err);
    void *data = NULL;
    size_t len = 0;
    if (rc == 0 && s.n > 0)
        rc = convo__seg_pack(s.cells, s.n, SEG_COLS, &data, &len, err);
    seal_rows_free(&s);
    if (rc || s.n == 0)
        return rc;
    sqlite3_stmt *st;
    if ((rc = sq_stmt_get(c, ST_SEG_PUT, &st, err)) == 0) {
        sqlite3_bind_int64(st, 1, block);
        sqlite3_bind_blob64(st, 2, data, len, SQLITE_STATIC);
        rc = sq_stmt_run(c, st, "storing a checkpoint segment", err);
    }
    free(data);
    if (rc || sqlite3_changes(c->db) != 1)
        return rc;
    rc = sq_run_with_ints(c, ST_SEG_SEAL, 1, block, 0, 0, "sealing checkpoints", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_SEG_SEAL_HOT, 1, block, 0, 0, "sealing checkpoints", err);
    return rc ? rc : sq_run_with_ints(c, ST_HOT_DROP, 1, block, 0, 0, "sealing checkpoints", err);
}

int sq_seg_after_put(sq_conn *c, int64_t key, convo_error *err)
{
    int64_t pos = key & (((int64_t)1 << SEQ_BITS) - 1);
    if (!c->seal || (pos & 15) != SEAL_BEHIND || pos < 16 + SEAL_BEHIND)
        return 0;
    return seal_block(c, (key >> 4) - 1, err);
}

int sq_seg_hot(sq_conn *c, int64_t key, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_CP_SEALED, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    if ((rc = sq_stmt_step(c, st, "reading where a checkpoint is", err)) != 1)
        return rc; /* no such checkpoint: its statement changes nothing */
    int null = sqlite3_column_type(st, 0) == SQLITE_NULL;
    int64_t sealed = sqlite3_column_int64(st, 0);
    sq_stmt_done(st);
    if (null)
        return 0;
    if (sealed != 1)
        return 1;
    rc = sq_run_with_ints(c, ST_SEG_THAW, 1, key, 0, 0, "unsealing checkpoints", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_SEG_THAW_MARK, 1, key, 0, 0, "unsealing checkpoints", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_SEG_DROP, 1, key, 0, 0, "unsealing checkpoints", err);
    return rc ? rc : 1;
}
