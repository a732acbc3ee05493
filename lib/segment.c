/* segment.c — the sealed-segment codec (segment.h): a run of records stored
 * column by column in one zlib stream at its fastest level. Consecutive
 * checkpoints repeat across rows of one column far more than along a row, which
 * is what a compressor finds (docs/checkpoints.md, "Sealed segments").
 *
 * Format 1: byte 0 the format; then three unsigned LEB128 varints: rows, cols,
 * and the decompressed size; then a zlib stream (RFC 1950, its Adler-32 checked)
 * of the raw cells, column after column, each column's cells in row order, each
 * cell a varint (0 = NULL, else its length + 1) and its bytes. */
#include "config.h"
#include "segment.h"
#include "internal.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* deflate never expands data by more than 1032:1; a header declaring more than
 * that from its stream's length is corrupt (and would only make us allocate). */
#define MAX_RATIO 1032u

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *varint_put(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* A varint of at most 5 bytes (values < 2^35) from [*p, end): 0, or -1 when
 * truncated or too long. */
static int varint_get(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (*p >= end)
            return -1;
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int corrupt(convo_error *err, const char *what)
{
    return convo__error(err, CONVO_ECORRUPT, NULL, "corrupt checkpoint segment: %s", what);
}

/* The raw (uncompressed) form of cells, column by column: *out malloc'd. */
static int raw_build(const convo__seg_cell *cells, uint32_t rows, uint32_t cols,
                     unsigned char **out, size_t *out_len, convo_error *err)
{
    size_t total = 0, n = (size_t)rows * cols;
    for (size_t i = 0; i < n; i++) {
        size_t len = cells[i].is_null ? 0 : cells[i].len;
        size_t add = varint_len(cells[i].is_null ? 0 : (uint64_t)len + 1) + len;
        if (len > CONVO__SEG_MAX_RAW || add > CONVO__SEG_MAX_RAW - total)
            return convo__error(err, CONVO_ETOOLARGE, NULL,
                                "a checkpoint segment over %zu bytes", CONVO__SEG_MAX_RAW);
        total += add;
    }
    unsigned char *raw = malloc(total ? total : 1), *p = raw;
    if (!raw)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory packing a segment");
    for (uint32_t c = 0; c < cols; c++)
        for (uint32_t r = 0; r < rows; r++) {
            const convo__seg_cell *cell = &cells[(size_t)r * cols + c];
            if (cell->is_null) {
                *p++ = 0;
                continue;
            }
            p = varint_put(p, (uint64_t)cell->len + 1);
            if (cell->len)
                memcpy(p, cell->data, cell->len);
            p += cell->len;
        }
    *out = raw;
    *out_len = total;
    return 0;
}

/* raw deflated at level 1 into dst (room bytes): its length, or 0 on failure.
 * The window fits the input (a small segment needs no 32 KiB window and its
 * state is cleared faster); inflate with the largest window reads any. */
static size_t deflate_into(unsigned char *dst, size_t room, const unsigned char *raw, size_t len)
{
    int wbits = 9;
    while (wbits < 15 && ((size_t)1 << wbits) < len)
        wbits++;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    z.next_in = (Bytef *)raw;
    z.avail_in = (uInt)len;
    z.next_out = dst;
    z.avail_out = (uInt)room;
    int st = deflate(&z, Z_FINISH);
    size_t out = st == Z_STREAM_END ? (size_t)z.total_out : 0;
    deflateEnd(&z);
    return out;
}

int convo__seg_pack(const convo__seg_cell *cells, uint32_t rows, uint32_t cols, void **out,
                    size_t *out_len, convo_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (rows == 0 || cols == 0 || rows > CONVO__SEG_MAX_ROWS || cols > CONVO__SEG_MAX_COLS)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "a checkpoint segment of %u x %u cells (1..%u rows, 1..%u columns)",
                            rows, cols, CONVO__SEG_MAX_ROWS, CONVO__SEG_MAX_COLS);
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    int rc = raw_build(cells, rows, cols, &raw, &raw_len, err);
    if (rc != 0)
        return rc;
    size_t head = 1 + varint_len(rows) + varint_len(cols) + varint_len(raw_len);
    size_t bound = (size_t)compressBound((uLong)raw_len);
    unsigned char *buf = malloc(head + bound);
    if (!buf) {
        free(raw);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory packing a segment");
    }
    unsigned char *p = buf;
    *p++ = CONVO__SEG_FORMAT;
    p = varint_put(p, rows);
    p = varint_put(p, cols);
    p = varint_put(p, raw_len);
    size_t zlen = deflate_into(p, bound, raw, raw_len);
    free(raw);
    if (zlen == 0) {
        free(buf);
        return convo__error(err, CONVO_ENOMEM, NULL, "zlib could not deflate a segment");
    }
    *out = buf;
    *out_len = head + zlen;
    return 0;
}

/* The header: rows, cols and the raw size, checked against the bounds; *body
 * the zlib stream's start. */
static int header_get(const unsigned char *d, size_t len, uint32_t *rows, uint32_t *cols,
                      size_t *raw_len, const unsigned char **body, convo_error *err)
{
    const unsigned char *p = d, *end = d + len;
    if (len == 0)
        return corrupt(err, "empty");
    if (*p != CONVO__SEG_FORMAT)
        return convo__error(err, CONVO_ECORRUPT, NULL,
                            "checkpoint segment of format %u (this libconvo reads format %u)",
                            (unsigned)*p, (unsigned)CONVO__SEG_FORMAT);
    p++;
    uint64_t r, c, raw;
    if (varint_get(&p, end, &r) != 0 || varint_get(&p, end, &c) != 0 ||
        varint_get(&p, end, &raw) != 0)
        return corrupt(err, "truncated header");
    if (r == 0 || c == 0 || r > CONVO__SEG_MAX_ROWS || c > CONVO__SEG_MAX_COLS)
        return corrupt(err, "rows or columns out of bounds");
    if (raw > CONVO__SEG_MAX_RAW || raw < r * c)
        return corrupt(err, "declared size out of bounds");
    if (raw > (uint64_t)(end - p) * MAX_RATIO)
        return corrupt(err, "declared size larger than its stream can hold");
    *rows = (uint32_t)r;
    *cols = (uint32_t)c;
    *raw_len = (size_t)raw;
    *body = p;
    return 0;
}

int convo__seg_shape(const void *data, size_t len, uint32_t *rows, uint32_t *cols,
                     convo_error *err)
{
    size_t raw_len;
    const unsigned char *body;
    return header_get(data, len, rows, cols, &raw_len, &body, err);
}

/* Inflates exactly raw_len bytes from [body, end) into raw, the whole stream
 * used and its checksum right. */
static int inflate_all(const unsigned char *body, size_t zlen, unsigned char *raw,
                       size_t raw_len, convo_error *err)
{
    if (zlen > UINT_MAX)
        return corrupt(err, "stream too long");
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return convo__error(err, CONVO_ENOMEM, NULL, "zlib could not start inflating");
    z.next_in = (Bytef *)body;
    z.avail_in = (uInt)zlen;
    z.next_out = raw;
    z.avail_out = (uInt)raw_len;
    int st = inflate(&z, Z_FINISH);
    size_t got = (size_t)z.total_out, left = z.avail_in;
    inflateEnd(&z);
    if (st == Z_MEM_ERROR)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory inflating a segment");
    if (st != Z_STREAM_END)
        return corrupt(err, st == Z_DATA_ERROR ? "bad zlib stream" : "stream truncated or longer than declared");
    if (got != raw_len)
        return corrupt(err, "stream shorter than declared");
    if (left != 0)
        return corrupt(err, "bytes after the stream");
    return 0;
}

/* The cells of raw (column by column) into seg->cells (row-major). */
static int cells_parse(convo__seg *seg, const unsigned char *raw, size_t raw_len,
                       convo_error *err)
{
    const unsigned char *p = raw, *end = raw + raw_len;
    for (uint32_t c = 0; c < seg->cols; c++)
        for (uint32_t r = 0; r < seg->rows; r++) {
            convo__seg_cell *cell = &seg->cells[(size_t)r * seg->cols + c];
            uint64_t v;
            if (varint_get(&p, end, &v) != 0)
                return corrupt(err, "cell length truncated");
            if (v == 0) {
                cell->data = NULL;
                cell->len = 0;
                cell->is_null = 1;
                continue;
            }
            if (v - 1 > (uint64_t)(end - p))
                return corrupt(err, "cell longer than the segment");
            cell->data = p;
            cell->len = (size_t)(v - 1);
            cell->is_null = 0;
            p += v - 1;
        }
    if (p != end)
        return corrupt(err, "bytes after the last cell");
    return 0;
}

int convo__seg_unpack(const void *data, size_t len, convo__seg **out, convo_error *err)
{
    *out = NULL;
    uint32_t rows, cols;
    size_t raw_len;
    const unsigned char *body;
    int rc = header_get(data, len, &rows, &cols, &raw_len, &body, err);
    if (rc != 0)
        return rc;
    size_t ncells = (size_t)rows * cols;
    size_t cells_at = (sizeof(convo__seg) + 15) & ~(size_t)15;
    size_t raw_at = cells_at + ncells * sizeof(convo__seg_cell);
    convo__seg *seg = malloc(raw_at + raw_len + 1);
    if (!seg)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory reading a segment");
    seg->rows = rows;
    seg->cols = cols;
    seg->cells = (convo__seg_cell *)((char *)seg + cells_at);
    unsigned char *raw = (unsigned char *)seg + raw_at;
    rc = inflate_all(body, len - (size_t)(body - (const unsigned char *)data), raw, raw_len, err);
    if (rc == 0)
        rc = cells_parse(seg, raw, raw_len, err);
    if (rc != 0) {
        free(seg);
        return rc;
    }
    *out = seg;
    return 0;
}

void convo__seg_free(convo__seg *seg)
{
    free(seg);
}
