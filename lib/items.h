/* items.h — what items.c (the layout, resolving) shares with items_put.c
 * (planning a put with log references). */
#ifndef CONVO_ITEMS_H
#define CONVO_ITEMS_H

#include "internal.h"
#include <msgpack.h>

/* A run of a list: the log's messages [seq, seq + count), or (seq < 0,
 * count 1) one text kept inline; a list is planned and stored run by run, so
 * the part of it already in the log costs the same however long it is. */
typedef struct seg {
    int64_t seq;
    int64_t count;
    const char *text;
    size_t len;
} seg;

/* A decoded reference; its strings point into the bytes it was decoded from. */
typedef struct ref {
    msgpack_unpacked up;
    const char *key, *rest_type;
    size_t key_len, rest_type_len;
    const void *rest;
    size_t rest_len;
    seg *segs;
    size_t nsegs;
    int64_t n;         /* items: the sum of the runs' counts */
    int64_t from, end; /* the smallest seq and 1 + the highest (0, 0: none) */
    int has_inline;
} ref;

void convo__ref_free(ref *r);
/* Decodes a stored reference; r's strings point into bytes. CONVO_ECORRUPT. */
int convo__ref_decode(const void *bytes, size_t len, ref *r, convo_error *err);
/* Messages [from, to) of the thread, all of them, else CONVO_ECORRUPT. */
int convo__items_load(convo_store *s, const char *thread_id, int64_t from, int64_t to,
               convo_history **out, convo_error *err);
/* Every item has a text (a valid message) or a seq; the key and rest are sane. */
int convo__items_validate(convo_store *s, const char *what, const convo_items_in *it, convo_error *err);
/* A reference's bytes (malloc'd) for the runs segs (adjacent ranges joined). */
int convo__ref_blob(const char *key, const convo_blob *rest, const seg *segs, size_t nsegs,
                    void **bytes, size_t *len, convo_error *err);
int convo__is_items(const char *type);

#endif
