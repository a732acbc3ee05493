/* fuzz_dump.c — libFuzzer target for the dump reader (convo_import, lib/import.c)
 * into a fresh memory: store: any input must end in 0 or a clean error, never a
 * crash or a leak. Frames' checksums are recomputed in a second pass so that
 * mutations reach the record decoder; whatever imports must export and import
 * again. Format: docs/dump-format.md. */
#include <convo.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), abort())

typedef struct source {
    const uint8_t *data;
    size_t size, pos, chunk;
} source;

static long read_chunk(void *ctx, void *buf, size_t len)
{
    source *s = ctx;
    size_t n = s->size - s->pos;
    if (n > len)
        n = len;
    if (n > s->chunk)
        n = s->chunk; /* short reads: records cross buffer refills */
    if (n)
        memcpy(buf, s->data + s->pos, n);
    s->pos += n;
    return (long)n;
}

static int write_buffer(void *ctx, const void *buf, size_t len)
{
    return msgpack_sbuffer_write(ctx, buf, len);
}

static uint64_t fnv1a(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Imports into a fresh memory: store; returns the result code. */
static int import(const uint8_t *data, size_t size, size_t chunk, msgpack_sbuffer *exported)
{
    convo_store *s;
    convo_error err;
    if (convo_open(&s, "memory:", &err) != 0)
        FAIL("memory: does not open: %s", err.message);
    source src = {data, size, 0, chunk};
    convo_dump_stats stats;
    int rc = convo_import(s, read_chunk, &src, NULL, &stats, &err);
    /* a count in the input must not be trusted for an allocation */
    if (rc == CONVO_ENOMEM)
        FAIL("a %zu-byte dump made import run out of memory: %s", size, err.message);
    if (rc != 0 && (err.code != rc || !err.message[0] || strpbrk(err.message, "\r\n")))
        FAIL("import failed with %d but error \"%s\" (code %d)", rc, err.message, err.code);
    if (rc == 0 && exported) {
        int erc = convo_export(s, NULL, 0, write_buffer, exported, NULL, NULL, &err);
        if (erc != 0)
            FAIL("a store filled by import does not export: %s", err.message);
    }
    convo_close(s);
    return rc;
}

/* Length of the unsigned integer at p (n bytes available), or 0 if there is none. */
static size_t uint_size(const uint8_t *p, size_t n)
{
    static const size_t sizes[] = {2, 3, 5, 9}; /* cc cd ce cf */
    size_t k = n == 0 ? 0 : p[0] <= 0x7f ? 1 : (p[0] >= 0xcc && p[0] <= 0xcf) ? sizes[p[0] - 0xcc] : 0;
    return k <= n ? k : 0;
}

/* The input with the checksum of each leading [bin, uint] frame made right; the
 * rest is copied as is. Byte by byte: msgpack-c would allocate for whatever
 * count the input claims. */
static void fix_checksums(const uint8_t *data, size_t size, msgpack_sbuffer *out)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    size_t pos = 0;
    while (size - pos >= 3 && data[pos] == 0x92 && data[pos + 1] >= 0xc4 && data[pos + 1] <= 0xc6) {
        size_t hl = (size_t)1 << (data[pos + 1] - 0xc4), len = 0; /* 1, 2 or 4 */
        if (size - pos < 2 + hl)
            break;
        for (size_t i = 0; i < hl; i++)
            len = len << 8 | data[pos + 2 + i];
        size_t body = pos + 2 + hl;
        if (size - body < len)
            break;
        size_t sum = uint_size(data + body + len, size - body - len);
        if (sum == 0)
            break;
        msgpack_pack_array(&pk, 2);
        msgpack_pack_bin(&pk, len);
        msgpack_pack_bin_body(&pk, data + body, len);
        msgpack_pack_uint64(&pk, fnv1a(data + body, len));
        pos = body + len + sum;
    }
    if (size > pos) /* msgpack's sbuffer must not copy 0 bytes to NULL */
        msgpack_sbuffer_write(out, (const char *)data + pos, size - pos);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t chunk = size % 3 == 0 ? (size_t)-1 : 1 + size % 61;
    import(data, size, chunk, NULL);
    msgpack_sbuffer fixed, again;
    msgpack_sbuffer_init(&fixed);
    msgpack_sbuffer_init(&again);
    fix_checksums(data, size, &fixed);
    if (import((const uint8_t *)fixed.data, fixed.size, chunk, &again) == 0) {
        convo_error err;
        convo_store *s;
        convo_open(&s, "memory:", NULL);
        source src = {(const uint8_t *)again.data, again.size, 0, (size_t)-1};
        if (convo_import(s, read_chunk, &src, NULL, NULL, &err) != 0)
            FAIL("the export of an imported dump does not import: %s", err.message);
        convo_close(s);
    }
    msgpack_sbuffer_destroy(&fixed);
    msgpack_sbuffer_destroy(&again);
    return 0;
}
