/* dumpbuf.h — for tests that write or edit a convo dump by hand: a growing
 * buffer with the convo_write_fn / convo_read_fn shapes, frames (docs/dump-format.md)
 * and a tiny msgpack writer for the records. */
#ifndef CONVO_TESTS_DUMPBUF_H
#define CONVO_TESTS_DUMPBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct membuf {
    char *data;
    size_t len, cap, pos;
} membuf;

int mem_write(void *ctx, const void *buf, size_t len);
long mem_read(void *ctx, void *buf, size_t len);
uint64_t fnv1a(const void *data, size_t len);
/* Appends [bin(rec), uint64 fnv1a(rec)] to out. */
void add_frame(membuf *out, const void *rec, size_t len);
void mp_byte(membuf *m, unsigned c);
void mp_array(membuf *m, unsigned n); /* n < 16 */
void mp_str(membuf *m, const char *s); /* shorter than 256 bytes */
void mp_int(membuf *m, int64_t v);
void mp_bin(membuf *m, const char *s); /* shorter than 256 bytes */
/* Frames the record in *rec onto *out and empties *rec. */
void mp_frame(membuf *out, membuf *rec);
/* A whole dump of the n threads, each with one message (role "user") stored at
 * time at. */
membuf dump_of(const char *const *threads, int n, int64_t at, const char *message);
/* A whole dump of one thread with one message {"role":"user"} stored at time at. */
membuf dump_with_time(const char *thread, int64_t at);

#endif
