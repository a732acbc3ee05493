/* fuzz_segment.c — libFuzzer target for the sealed-segment codec (lib/segment.c):
 * whatever the bytes, convo__seg_unpack returns 0, CONVO_ECORRUPT or
 * CONVO_ENOMEM, never reads past its input (AddressSanitizer), and what it
 * decodes is read in full, packed again and decoded to the same cells. */
#include "config.h"
#include "segment.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), abort())

static volatile unsigned sink;

static int same(const convo__seg *a, const convo__seg *b)
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact copy, so any read past the input is caught */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    convo__seg *seg = NULL;
    convo_error err;
    int rc = convo__seg_unpack(copy, size, &seg, &err);
    if (rc != 0) {
        if (rc != CONVO_ECORRUPT && rc != CONVO_ENOMEM)
            FAIL("unpack returned %d", rc);
        if (seg)
            FAIL("unpack failed and returned a segment");
        free(copy);
        return 0;
    }
    unsigned h = 0;
    for (size_t i = 0; i < (size_t)seg->rows * seg->cols; i++) {
        const convo__seg_cell *c = &seg->cells[i];
        if (c->is_null && c->len)
            FAIL("a NULL cell of %zu bytes", c->len);
        for (size_t k = 0; k < c->len; k++)
            h = h * 31 + ((const unsigned char *)c->data)[k];
    }
    sink = h;
    void *again;
    size_t again_len;
    rc = convo__seg_pack(seg->cells, seg->rows, seg->cols, &again, &again_len, &err);
    if (rc == 0) {
        convo__seg *seg2;
        if (convo__seg_unpack(again, again_len, &seg2, &err) != 0)
            FAIL("a repacked segment does not unpack: %s", err.message);
        if (!same(seg, seg2))
            FAIL("a repacked segment reads other cells");
        convo__seg_free(seg2);
        free(again);
    } else if (rc != CONVO_ENOMEM) {
        FAIL("repacking a decoded segment returned %d", rc);
    }
    convo__seg_free(seg);
    free(copy);
    return 0;
}
