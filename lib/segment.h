/* segment.h — a sealed segment: `rows` records of `cols` byte cells each, stored
 * column by column and deflated (zlib). Shared by the drivers that seal a thread's
 * older checkpoints into one row (SQLite layout 17, PostgreSQL); format in segment.c. */
#ifndef CONVO_SEGMENT_H
#define CONVO_SEGMENT_H

#include "convo.h"
#include <stddef.h>
#include <stdint.h>

/* The format byte a segment starts with (bumped on any change of the layout). */
#define CONVO__SEG_FORMAT 1
/* Bounds a segment must keep (pack refuses more with CONVO_ETOOLARGE, unpack
 * refuses a header that declares more with CONVO_ECORRUPT). */
#define CONVO__SEG_MAX_ROWS 4096u
#define CONVO__SEG_MAX_COLS 256u
#define CONVO__SEG_MAX_RAW ((size_t)1 << 30) /* decompressed bytes */

/* A cell is bytes or NULL (distinct from empty). */
typedef struct convo__seg_cell {
    const void *data;
    size_t len;
    int is_null;
} convo__seg_cell;

typedef struct convo__seg {
    uint32_t rows, cols;
    convo__seg_cell *cells; /* row-major, point into an owned buffer */
} convo__seg;

/* cells row-major (cells[r * cols + c]); *out malloc'd (free()). rows and cols
 * at least 1 and within the bounds above. */
int convo__seg_pack(const convo__seg_cell *cells, uint32_t rows, uint32_t cols, void **out,
                    size_t *out_len, convo_error *err);
/* Refuses any corrupt / truncated / oversized input with CONVO_ECORRUPT and a
 * clear message; never reads out of bounds. *out freed with convo__seg_free. */
int convo__seg_unpack(const void *data, size_t len, convo__seg **out, convo_error *err);
void convo__seg_free(convo__seg *seg);
/* The header alone (no inflating): rows and cols, or CONVO_ECORRUPT. */
int convo__seg_shape(const void *data, size_t len, uint32_t *rows, uint32_t *cols,
                     convo_error *err);
/* The cell (r, c) of seg. */
static inline const convo__seg_cell *convo__seg_at(const convo__seg *seg, uint32_t r, uint32_t c)
{
    return &seg->cells[(size_t)r * seg->cols + c];
}

#endif
