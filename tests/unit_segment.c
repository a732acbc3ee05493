/* unit_segment.c — the sealed-segment codec (lib/segment.c): a round trip of
 * NULL, empty and long cells, pack's bounds, and unpack refusing every corrupt
 * form (header, stream, cells) with CONVO_ECORRUPT. */
#include "internal.h"
#include "segment.h"
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

void unit_add_segment_tests(Suite *s);

/* A 3 x 4 segment: NULL, empty, short and long (repetitive) cells. */
static void sample(void **out, size_t *len)
{
    static char long_cell[5000];
    memset(long_cell, 'x', sizeof long_cell);
    convo__seg_cell cells[12] = {
        {"id-0", 4, 0}, {NULL, 0, 1}, {"", 0, 0}, {long_cell, sizeof long_cell, 0},
        {"id-1", 4, 0}, {"id-0", 4, 0}, {"\0\1\2", 3, 0}, {NULL, 0, 1},
        {"id-2", 4, 0}, {"id-1", 4, 0}, {"meta", 4, 0}, {"", 0, 0},
    };
    convo_error err;
    ck_assert_int_eq(convo__seg_pack(cells, 3, 4, out, len, &err), 0);
}

static void refused(const void *data, size_t len, const char *what)
{
    convo__seg *seg = (convo__seg *)1;
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__seg_unpack(data, len, &seg, &err);
    ck_assert_msg(rc == CONVO_ECORRUPT, "%s: unpack gave %d (%s)", what, rc, err.message);
    ck_assert_ptr_null(seg);
    ck_assert_int_eq(err.code, CONVO_ECORRUPT);
    ck_assert_msg(strstr(err.message, "segment") != NULL, "%s: message '%s'", what, err.message);
}

static void cell_is(const convo__seg *seg, uint32_t r, uint32_t c, const char *data, size_t len)
{
    const convo__seg_cell *cell = convo__seg_at(seg, r, c);
    if (!data) {
        ck_assert_int_eq(cell->is_null, 1);
        return;
    }
    ck_assert_int_eq(cell->is_null, 0);
    ck_assert_uint_eq(cell->len, len);
    ck_assert_ptr_nonnull(cell->data);
    ck_assert_int_eq(memcmp(cell->data, data, len), 0);
}

START_TEST(test_segment_round_trip)
{
    void *buf;
    size_t len;
    sample(&buf, &len);
    ck_assert_uint_lt(len, 200); /* 5,000 x's and the rest deflate to far less */
    convo__seg *seg;
    convo_error err;
    ck_assert_int_eq(convo__seg_unpack(buf, len, &seg, &err), 0);
    ck_assert_uint_eq(seg->rows, 3);
    ck_assert_uint_eq(seg->cols, 4);
    cell_is(seg, 0, 0, "id-0", 4);
    cell_is(seg, 0, 1, NULL, 0);
    cell_is(seg, 0, 2, "", 0);
    ck_assert_uint_eq(convo__seg_at(seg, 0, 3)->len, 5000);
    ck_assert_int_eq(((const char *)convo__seg_at(seg, 0, 3)->data)[4999], 'x');
    cell_is(seg, 1, 1, "id-0", 4);
    cell_is(seg, 1, 2, "\0\1\2", 3);
    cell_is(seg, 1, 3, NULL, 0);
    cell_is(seg, 2, 0, "id-2", 4);
    cell_is(seg, 2, 3, "", 0);
    uint32_t rows, cols;
    ck_assert_int_eq(convo__seg_shape(buf, len, &rows, &cols, &err), 0);
    ck_assert_uint_eq(rows, 3);
    ck_assert_uint_eq(cols, 4);
    convo__seg_free(seg);
    convo__seg_free(NULL);
    free(buf);
}
END_TEST

START_TEST(test_segment_pack_bounds)
{
    convo__seg_cell one = {"a", 1, 0};
    void *buf = (void *)1;
    size_t len = 1;
    convo_error err;
    ck_assert_int_eq(convo__seg_pack(&one, 0, 1, &buf, &len, &err), CONVO_EINVAL);
    ck_assert_ptr_null(buf);
    ck_assert_int_eq(convo__seg_pack(&one, 1, 0, &buf, &len, &err), CONVO_EINVAL);
    ck_assert_int_eq(convo__seg_pack(&one, CONVO__SEG_MAX_ROWS + 1, 1, &buf, &len, &err),
                     CONVO_EINVAL);
    ck_assert_int_eq(convo__seg_pack(&one, 1, CONVO__SEG_MAX_COLS + 1, &buf, &len, &err),
                     CONVO_EINVAL);
    convo__seg_cell huge = {"a", CONVO__SEG_MAX_RAW + 1, 0}; /* refused before it is read */
    ck_assert_int_eq(convo__seg_pack(&huge, 1, 1, &buf, &len, &err), CONVO_ETOOLARGE);
    ck_assert_ptr_null(buf);
}
END_TEST

/* A segment with the given header fields and the zlib stream of raw. */
static size_t forge(unsigned char *out, size_t room, unsigned format, uint64_t rows,
                    uint64_t cols, uint64_t raw_len, const void *raw, size_t n)
{
    unsigned char *p = out;
    *p++ = (unsigned char)format;
    uint64_t v[3] = {rows, cols, raw_len};
    for (int i = 0; i < 3; i++) {
        while (v[i] >= 0x80) {
            *p++ = (unsigned char)(v[i] | 0x80);
            v[i] >>= 7;
        }
        *p++ = (unsigned char)v[i];
    }
    uLongf zlen = (uLongf)(room - (size_t)(p - out));
    ck_assert_int_eq(compress2(p, &zlen, raw, (uLong)n, 6), Z_OK);
    return (size_t)(p - out) + zlen;
}

START_TEST(test_segment_header_refused)
{
    unsigned char buf[256];
    const unsigned char ok_raw[] = {2, 'a', 0}; /* 2 rows x 1 col: "a", NULL */
    size_t n = forge(buf, sizeof buf, 1, 2, 1, 3, ok_raw, 3);
    convo__seg *seg;
    convo_error err;
    ck_assert_int_eq(convo__seg_unpack(buf, n, &seg, &err), 0); /* the forge itself is right */
    convo__seg_free(seg);

    refused(buf, 0, "empty");
    n = forge(buf, sizeof buf, 2, 2, 1, 3, ok_raw, 3);
    refused(buf, n, "format 2");
    n = forge(buf, sizeof buf, 0, 2, 1, 3, ok_raw, 3);
    refused(buf, n, "format 0");
    refused("\1", 1, "no rows");
    refused("\1\2", 2, "no columns");
    refused("\1\2\1", 3, "no size");
    refused("\1\x80\x80\x80\x80\x80\x01\1\3", 9, "a varint too long");
    n = forge(buf, sizeof buf, 1, 0, 1, 3, ok_raw, 3);
    refused(buf, n, "0 rows");
    n = forge(buf, sizeof buf, 1, 2, 0, 3, ok_raw, 3);
    refused(buf, n, "0 columns");
    n = forge(buf, sizeof buf, 1, CONVO__SEG_MAX_ROWS + 1, 1, 5000, ok_raw, 3);
    refused(buf, n, "rows over the bound");
    n = forge(buf, sizeof buf, 1, 1, CONVO__SEG_MAX_COLS + 1, 5000, ok_raw, 3);
    refused(buf, n, "columns over the bound");
    n = forge(buf, sizeof buf, 1, 2, 1, (uint64_t)CONVO__SEG_MAX_RAW + 1, ok_raw, 3);
    refused(buf, n, "size over the bound");
    n = forge(buf, sizeof buf, 1, 4, 1, 3, ok_raw, 3);
    refused(buf, n, "size below one byte a cell");
    n = forge(buf, sizeof buf, 1, 2, 1, 1u << 24, ok_raw, 3);
    refused(buf, n, "size beyond what the stream can hold (no allocation of it)");
    ck_assert_int_eq(convo__seg_shape(buf, n, &(uint32_t){0}, &(uint32_t){0}, &err),
                     CONVO_ECORRUPT);
}
END_TEST

static int same_cells(const convo__seg *a, const convo__seg *b)
{
    if (a->rows != b->rows || a->cols != b->cols)
        return 0;
    for (size_t i = 0; i < (size_t)a->rows * a->cols; i++) {
        const convo__seg_cell *x = &a->cells[i], *y = &b->cells[i];
        if (x->is_null != y->is_null || x->len != y->len ||
            (x->len && memcmp(x->data, y->data, x->len) != 0))
            return 0;
    }
    return 1;
}

START_TEST(test_segment_stream_refused)
{
    unsigned char buf[256];
    const unsigned char ok_raw[] = {2, 'a', 0};
    size_t n = forge(buf, sizeof buf, 1, 2, 1, 4, ok_raw, 3);
    refused(buf, n, "stream shorter than declared");
    n = forge(buf, sizeof buf, 1, 2, 1, 2, ok_raw, 3);
    refused(buf, n, "stream longer than declared");
    n = forge(buf, sizeof buf, 1, 2, 1, 3, ok_raw, 3);
    buf[n] = 0;
    refused(buf, n + 1, "a byte after the stream");
    /* every truncation of a real segment */
    void *seg_buf;
    size_t len;
    sample(&seg_buf, &len);
    for (size_t cut = 0; cut < len; cut++)
        refused(seg_buf, cut, "truncated");
    /* every bit flipped: refused by the header's bounds, zlib's checks or its
     * Adler-32, or read as the same cells (a match in the run of x's copied from
     * another distance, a padding bit after deflate's last block) */
    unsigned char *copy = malloc(len);
    convo__seg *orig;
    convo_error err;
    ck_assert_int_eq(convo__seg_unpack(seg_buf, len, &orig, &err), 0);
    size_t same = 0;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, seg_buf, len);
            copy[i] ^= (unsigned char)(1u << bit);
            convo__seg *seg = NULL;
            int rc = convo__seg_unpack(copy, len, &seg, &err);
            if (rc == 0) {
                ck_assert_msg(same_cells(seg, orig), "byte %zu bit %d: read as other cells", i, bit);
                same++;
                convo__seg_free(seg);
                continue;
            }
            ck_assert_msg(rc == CONVO_ECORRUPT, "byte %zu bit %d: %d", i, bit, rc);
            ck_assert_ptr_null(seg);
        }
    ck_assert_uint_lt(same, len * 8 / 4); /* most flips change what is read: refused */
    convo__seg_free(orig);
    free(copy);
    free(seg_buf);
}
END_TEST

START_TEST(test_segment_cells_refused)
{
    unsigned char buf[256];
    const unsigned char too_long[] = {5, 'a', 0};
    size_t n = forge(buf, sizeof buf, 1, 2, 1, 3, too_long, 3);
    refused(buf, n, "a cell longer than the segment");
    const unsigned char left_over[] = {2, 'a', 0, 'z'};
    n = forge(buf, sizeof buf, 1, 2, 1, 4, left_over, 4);
    refused(buf, n, "bytes after the last cell");
    const unsigned char cut_varint[] = {2, 'a', 0x80};
    n = forge(buf, sizeof buf, 1, 2, 1, 3, cut_varint, 3);
    refused(buf, n, "a cell's length cut");
    const unsigned char huge_varint[] = {0xff, 0xff, 0xff, 0xff, 0x7f, 0};
    n = forge(buf, sizeof buf, 1, 2, 1, 6, huge_varint, 6);
    refused(buf, n, "a cell's length beyond any segment");
}
END_TEST

void unit_add_segment_tests(Suite *s)
{
    TCase *tc = tcase_create("segment");
    tcase_add_test(tc, test_segment_round_trip);
    tcase_add_test(tc, test_segment_pack_bounds);
    tcase_add_test(tc, test_segment_header_refused);
    tcase_add_test(tc, test_segment_stream_refused);
    tcase_add_test(tc, test_segment_cells_refused);
    suite_add_tcase(s, tc);
}
