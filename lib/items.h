/* items.h — what items.c (the layout, resolving) shares with items_put.c
 * (planning a put with log references). */
#ifndef CONVO_ITEMS_H
#define CONVO_ITEMS_H

#include "internal.h"
#include <msgpack.h>

/* One item of a list: the log's message seq, or (seq -1) a text kept inline. */
typedef struct elem {
    int64_t seq;
    const char *text;
    size_t len;
} elem;

/* A decoded reference; its strings point into the bytes it was decoded from. */
typedef struct ref {
    msgpack_unpacked up;
    const char *key, *rest_type;
    size_t key_len, rest_type_len;
    const void *rest;
    size_t rest_len;
    elem *els;
    size_t n;
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
/* A reference's bytes (malloc'd) for els. */
int convo__ref_blob(const char *key, const convo_blob *rest, const elem *els, size_t n,
                void **bytes, size_t *len, convo_error *err);
int convo__is_items(const char *type);

#endif
