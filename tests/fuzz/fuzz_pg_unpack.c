/* fuzz_pg_unpack.c — libFuzzer target for the PostgreSQL driver's C decoder of
 * stored checkpoint columns (drivers/postgres/unpack.c): whatever the bytes,
 * each function returns 0, CONVO_ECORRUPT or CONVO_ENOMEM, never reads past
 * its input (each piece is copied to a buffer of its exact size, so
 * AddressSanitizer sees any overread), and what it returns on success points
 * inside its input and is read here in full.
 *
 * Input: byte 0 picks the function; for the channels, byte 1 is the number of
 * channels (0-31) and whether vals is NULL, bytes 2-3 the length of versions,
 * then versions, then vals. The others take the rest. */
#include "config.h"
#include "pg_int.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), abort())

static volatile unsigned sink;

/* Reads [p, p+n) (ASan checks it), which must lie in [base, base+size). */
static void touch(const char *p, size_t n, const char *base, size_t size, const char *what)
{
    if (n == 0)
        return;
    if (!p || p < base || n > size || (size_t)(p - base) > size - n)
        FAIL("%s: [%p, +%zu) outside its input [%p, +%zu)", what, (const void *)p, n,
             (const void *)base, size);
    unsigned h = 0;
    for (size_t i = 0; i < n; i++)
        h = h * 31 + (unsigned char)p[i];
    sink = h;
}

static char *copy(const uint8_t *p, size_t n)
{
    char *c = malloc(n ? n : 1);
    if (c && n)
        memcpy(c, p, n);
    return c;
}

static void check_rc(int rc, const char *what)
{
    if (rc != 0 && rc != CONVO_ECORRUPT && rc != CONVO_ENOMEM)
        FAIL("%s returned %d", what, rc);
}

static void channels(const uint8_t *d, size_t n)
{
    if (n < 4)
        return;
    size_t count = d[1] & 31, vlen = (size_t)d[2] << 8 | d[3];
    int vals_null = d[1] >> 7;
    d += 4, n -= 4;
    vlen = vlen < n ? vlen : n;
    char *versions = copy(d, vlen), *vals = copy(d + vlen, n - vlen);
    int32_t set[32];
    pg_chan out[32];
    for (size_t i = 0; i < count; i++)
        set[i] = (int32_t)i + 1;
    int rc = convo__pg_unpack_channels(set, count, versions, vlen, vals_null ? NULL : vals,
                                       vals_null ? 0 : n - vlen, vals_null, out);
    check_rc(rc, "unpack_channels");
    for (size_t i = 0; rc == 0 && i < count; i++) {
        if (out[i].ch != set[i])
            FAIL("channel %zu: number %d", i, out[i].ch);
        touch(out[i].ver, out[i].ver_len, versions, vlen, "a version");
        if (out[i].type < 0 || (out[i].type == 0 && out[i].len != 0))
            FAIL("channel %zu: type %d with %zu bytes", i, out[i].type, out[i].len);
        if (out[i].type != 0)
            touch(out[i].value, out[i].len, vals, n - vlen, "a value");
        /* a version that decoded is turned to text as the read does */
        char *text = NULL;
        check_rc(convo__pg_ver_text(out[i].ver, out[i].ver_len, &text), "ver_text");
        free(text);
    }
    free(versions);
    free(vals);
}

static void write_elem(const uint8_t *d, size_t n)
{
    char *e = copy(d, n);
    pg_write w;
    int32_t ch = 0;
    int has = convo__pg_write_channel(e, n, &ch);
    int rc = convo__pg_unpack_write(e, n, &w);
    check_rc(rc, "unpack_write");
    if (rc == 0) {
        if (!has || ch != w.channel)
            FAIL("write_channel %d/%d against unpack_write's %d", has, ch, w.channel);
        touch(w.task, w.task_len, e, n, "a task id");
        touch(w.value, w.len, e, n, "a write's value");
        if (w.value + w.len != e + n)
            FAIL("a write's value does not end the element");
    }
    free(e);
}

static void text(const uint8_t *d, size_t n, int which)
{
    char *p = copy(d, n), *out = NULL;
    int rc = which ? convo__pg_ver_text(p, n, &out) : convo__pg_id_text(p, n, &out);
    check_rc(rc, which ? "ver_text" : "id_text");
    if (rc == 0 && !out)
        FAIL("no text on success");
    if (rc != 0 && out)
        FAIL("a text on failure");
    if (out)
        sink = (unsigned)strlen(out);
    free(out);
    free(p);
}

static void meta(const uint8_t *d, size_t n)
{
    char *p = copy(d, n);
    size_t len = 0;
    char *out = convo__pg_meta_text(p, n, &len);
    if (out) {
        touch(out, len, out, len, "metadata");
        if (out[len] != '\0')
            FAIL("metadata not NUL-terminated");
    }
    free(out);
    free(p);
}

static void array(const uint8_t *d, size_t n)
{
    char *p = copy(d, n);
    pg_array_elem *e = NULL;
    size_t count = 0;
    int rc = convo__pg_unpack_array(p, n, &e, &count);
    check_rc(rc, "unpack_array");
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (e[i].bytes)
            touch(e[i].bytes, e[i].len, p, n, "an array element");
    free(e);
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 1)
        return 0;
    switch (d[0] % 6) {
    case 0: channels(d, n); break;
    case 1: write_elem(d + 1, n - 1); break;
    case 2: text(d + 1, n - 1, 0); break;
    case 3: text(d + 1, n - 1, 1); break;
    case 4: meta(d + 1, n - 1); break;
    default: array(d + 1, n - 1); break;
    }
    return 0;
}
