/* body.h — what a checkpoint adds, coded densely, for every driver
 * (docs/checkpoints.md "Checkpoint bodies as deltas"): the body against a base
 * kept as the value of a reserved channel (body.c, body_json.c). Included by
 * internal.h; a driver needs none of it unless it codes more itself. */
#ifndef CONVO_BODY_H
#define CONVO_BODY_H

#include <convo/driver.h>
#include <msgpack.h>
#include <stddef.h>

#define CONVO_DELTA_TYPE "convo/delta"
#define CONVO_BODY_CHANNEL "__convo_body__"

typedef struct convo_body_plan {
    int active;               /* 0: the body goes as it is (none) */
    convo_blob delta;         /* the body to store (malloc'd bytes) */
    convo_blob base;          /* the base's value when this put introduces it */
    convo_channel_in channel; /* the reserved channel to list (points at base) */
} convo_body_plan;

/* Plans cp's body against the base its parent lists (NULL parent: none): the
 * smallest of a JSON code (version 2), a byte delta (version 1), or a new base. */
int convo__body_plan(const convo_checkpoint *parent, const convo_checkpoint_in *cp,
                     convo_body_plan *out, convo_error *err);
void convo__body_plan_free(convo_body_plan *p);
/* A body of type CONVO_DELTA_TYPE rebuilt from its base (and the checkpoint's
 * id, which a version-2 code may name); the reserved channel removed. */
int convo__body_resolve(convo_checkpoint *cp, convo_error *err);
/* 0 when bytes are a well-formed delta body, else CONVO_EINVAL. */
int convo__body_check(const void *bytes, size_t len, convo_error *err);

/* body_json.c: JSON text `body` coded against JSON text `base`, packed as
 * [style, code] onto pk. Strings equal to the checkpoint's id or to one of its
 * channel versions are coded by reference to `names`. Returns 0; 2 when coded
 * but the body has keys its base has not (a new base would code what follows
 * shorter); 1 when the body is not JSON that jansson writes back byte for byte
 * in one of the styles or is nested too deeply (what was packed is to be
 * dropped); -1 out of memory. */
#define CONVO_JSTYLE_SPACED 1 /* ", " and ": " (Python's json.dumps), else "," ":" */
#define CONVO_JSTYLE_ASCII 2  /* non-ASCII as \u escapes */
#define CONVO_JSTYLE_ALL 3
#define CONVO_JSTYLE_MSGPACK 4 /* not text: a msgpack map, packed back by msgpack-c */
typedef struct convo_jdelta_names {
    const char *id;              /* the checkpoint's id */
    const char *const *versions; /* its channel versions, by channel name (strcmp order),
                                    the reserved body channel left out */
    size_t nversions;
} convo_jdelta_names;
int convo__jdelta_encode(const void *base, size_t blen, const void *body, size_t len,
                         const convo_jdelta_names *names, msgpack_packer *pk);
/* The body back from a [style, code] object: *out malloc'd (not terminated),
 * *len its bytes; CONVO_ECORRUPT when the code does not fit the base. */
int convo__jdelta_decode(const void *base, size_t blen, const msgpack_object *code,
                         const convo_jdelta_names *names, char **out, size_t *len);

/* json_shape.c: a metadata object as its shape (the JSON text with every
 * string and number replaced by 0, at most max_shape bytes; *shape malloc'd
 * and terminated) and its values (*values: a msgpack array of those strings
 * and numbers in document order, malloc'd). Returns 0, 1 when json is not an
 * object jansson writes back byte for byte in compact form or its shape is
 * longer (nothing to free), -1 out of memory. */
int convo__json_shape_split(const char *json, size_t len, size_t max_shape, char **shape,
                            void **values, size_t *values_len);
/* The object back (*json malloc'd and terminated, *len its bytes);
 * CONVO_ECORRUPT when the values do not fit the shape. */
int convo__json_shape_join(const char *shape, size_t shape_len, const void *values,
                           size_t values_len, char **json, size_t *len);

#endif
