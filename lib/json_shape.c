/* json_shape.c — a JSON object split into its shape (the keys, nesting, true,
 * false and null, every string and number replaced by 0) and its values (the
 * strings and numbers, a msgpack array in document order), so a driver can
 * keep each shape once and store a checkpoint's metadata as a few bytes of
 * values (docs/checkpoints.md "Metadata as shape and values"). */
#include "internal.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

/* shape: a copy of v with its strings and numbers replaced by 0; each of them
 * packed onto pk in order. */
static json_t *split(json_t *v, msgpack_packer *pk, size_t *count, int depth)
{
    if (depth > MAX_DEPTH)
        return NULL;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        json_t *o = json_object();
        const char *k;
        size_t n;
        json_t *x;
        json_object_keylen_foreach(v, k, n, x)
        {
            json_t *s = o ? split(x, pk, count, depth + 1) : NULL;
            if (!s || json_object_setn_new_nocheck(o, k, n, s)) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    case JSON_ARRAY: {
        json_t *a = json_array();
        for (size_t i = 0; a && i < json_array_size(v); i++) {
            json_t *s = split(json_array_get(v, i), pk, count, depth + 1);
            if (!s || json_array_append_new(a, s)) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case JSON_STRING:
        ++*count;
        return msgpack_pack_str_with_body(pk, json_string_value(v), json_string_length(v))
                   ? NULL
                   : json_integer(0);
    case JSON_INTEGER:
        ++*count;
        return msgpack_pack_int64(pk, json_integer_value(v)) ? NULL : json_integer(0);
    case JSON_REAL:
        ++*count;
        return msgpack_pack_double(pk, json_real_value(v)) ? NULL : json_integer(0);
    default:
        return json_incref(v);
    }
}

/* The shape with its zeros replaced by values[*at ...]. */
static json_t *join(json_t *shape, const msgpack_object_array *values, size_t *at, int depth)
{
    if (depth > MAX_DEPTH)
        return NULL;
    switch (json_typeof(shape)) {
    case JSON_OBJECT: {
        json_t *o = json_object();
        const char *k;
        size_t n;
        json_t *x;
        json_object_keylen_foreach(shape, k, n, x)
        {
            json_t *v = o ? join(x, values, at, depth + 1) : NULL;
            if (!v || json_object_setn_new_nocheck(o, k, n, v)) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    case JSON_ARRAY: {
        json_t *a = json_array();
        for (size_t i = 0; a && i < json_array_size(shape); i++) {
            json_t *v = join(json_array_get(shape, i), values, at, depth + 1);
            if (!v || json_array_append_new(a, v)) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case JSON_INTEGER: {
        if (json_integer_value(shape) != 0 || *at >= values->size)
            return NULL;
        const msgpack_object *o = &values->ptr[(*at)++];
        int64_t i;
        if (o->type == MSGPACK_OBJECT_STR)
            return json_stringn(o->via.str.ptr, o->via.str.size);
        if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
            return json_real(o->via.f64);
        return convo__unpack_int(o, &i) ? NULL : json_integer(i);
    }
    case JSON_TRUE:
    case JSON_FALSE:
    case JSON_NULL:
        return json_incref(shape);
    default:
        return NULL;
    }
}

static char *dump_compact(json_t *v, size_t *len)
{
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
    char *s = n ? malloc(n + 1) : NULL;
    if (s && json_dumpb(v, s, n, JSON_COMPACT) == n)
        s[n] = '\0';
    else {
        free(s);
        s = NULL;
    }
    *len = n;
    return s;
}

int convo__json_shape_join(const char *shape, size_t shape_len, const void *values,
                           size_t values_len, char **json, size_t *len)
{
    *json = NULL;
    json_t *s = json_loadb(shape, shape_len, JSON_REJECT_DUPLICATES, NULL);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0, at = 0;
    json_t *v = NULL;
    if (s && json_is_object(s) &&
        msgpack_unpack_next(&up, values, values_len, &off) == MSGPACK_UNPACK_SUCCESS &&
        off == values_len && up.data.type == MSGPACK_OBJECT_ARRAY)
        v = join(s, &up.data.via.array, &at, 0);
    if (v && at == up.data.via.array.size)
        *json = dump_compact(v, len);
    json_decref(v);
    json_decref(s);
    msgpack_unpacked_destroy(&up);
    return *json ? 0 : CONVO_ECORRUPT;
}

int convo__json_shape_split(const char *json, size_t len, size_t max_shape, char **shape,
                            void **values, size_t *values_len)
{
    *shape = NULL;
    *values = NULL;
    json_t *v = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
    if (!v || !json_is_object(v)) {
        json_decref(v);
        return 1;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    size_t count = 0, slen = 0;
    /* the array's header goes first: the values are packed after a 5-byte
     * placeholder, then the real header is moved in front of them */
    int rc = msgpack_pack_array(&pk, UINT32_MAX) ? -1 : 0;
    json_t *s = rc == 0 ? split(v, &pk, &count, 0) : NULL;
    char *text = s ? dump_compact(s, &slen) : NULL;
    if (rc == 0 && !text)
        rc = 1;
    if (rc == 0 && slen > max_shape)
        rc = 1;
    if (rc == 0) {
        msgpack_sbuffer head;
        msgpack_sbuffer_init(&head);
        msgpack_packer hp;
        msgpack_packer_init(&hp, &head, msgpack_sbuffer_write);
        if (msgpack_pack_array(&hp, count)) {
            rc = -1;
        } else { /* the placeholder is 5 bytes (0xdd + 4); the header is at most that */
            memmove(sb.data + head.size, sb.data + 5, sb.size - 5);
            memcpy(sb.data, head.data, head.size);
            sb.size = sb.size - 5 + head.size;
        }
        msgpack_sbuffer_destroy(&head);
    }
    char *again = NULL;
    size_t alen = 0;
    if (rc == 0 && (convo__json_shape_join(text, slen, sb.data, sb.size, &again, &alen) != 0 ||
                    alen != len || memcmp(again, json, len) != 0))
        rc = 1; /* not jansson's compact text: kept as it is */
    free(again);
    json_decref(s);
    json_decref(v);
    if (rc != 0) {
        free(text);
        msgpack_sbuffer_destroy(&sb);
        return rc;
    }
    *shape = text;
    *values = sb.data;
    *values_len = sb.size;
    return 0;
}
