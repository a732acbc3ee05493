/* json.c — the MongoDB driver: extra: JSON <-> BSON with reversible key escaping. */
#include "mongo_int.h"

/* ---- extra: JSON <-> BSON with reversible key escaping ---- */

/* '%', '.' and '$' become %25, %2E, %24; the empty key becomes a lone "%". */
char *convo__mg_key_escape(const char *k)
{
    size_t n = strlen(k);
    if (n == 0)
        return strdup("%");
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (; *k; k++) {
        unsigned char ch = (unsigned char)*k;
        if (ch == '%' || ch == '.' || ch == '$')
            o += sprintf(o, "%%%02X", ch);
        else
            *o++ = (char)ch;
    }
    *o = '\0';
    return out;
}

static int hex_digit(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* The inverse of key_escape; NULL for a key key_escape cannot have made. */
static char *key_unescape(const char *k)
{
    if (strcmp(k, "%") == 0)
        return strdup("");
    char *out = malloc(strlen(k) + 1), *o = out;
    if (!out)
        return NULL;
    for (; *k; k++) {
        if (*k != '%') {
            *o++ = *k;
            continue;
        }
        int hi = hex_digit((unsigned char)k[1]), lo = hi < 0 ? -1 : hex_digit((unsigned char)k[2]);
        if (lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            return NULL;
        }
        *o++ = (char)(hi * 16 + lo);
        k += 2;
    }
    *o = '\0';
    return out;
}


static int put_container(call *c, bson_t *doc, const char *key, json_t *v, int depth)
{
    bson_t child;
    bool array = json_is_array(v);
    if (!(array ? bson_append_array_begin(doc, key, -1, &child)
                : bson_append_document_begin(doc, key, -1, &child)))
        return convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
    int rc = 0;
    if (array) {
        for (size_t i = 0; i < json_array_size(v) && rc == 0; i++) {
            char buf[16];
            const char *k;
            bson_uint32_to_string((uint32_t)i, &k, buf, sizeof buf);
            rc = convo__mg_put_json(c, &child, k, json_array_get(v, i), depth + 1);
        }
    } else {
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val) {
            char *ek = convo__mg_key_escape(k);
            rc = ek ? convo__mg_put_json(c, &child, ek, val, depth + 1) : convo__mg_no_memory(c);
            free(ek);
            if (rc != 0)
                break;
        }
    }
    bool ok = array ? bson_append_array_end(doc, &child) : bson_append_document_end(doc, &child);
    if (rc == 0 && !ok)
        rc = convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
    return rc;
}

/* Appends JSON value v under key (already escaped): integers stay int64, reals
 * double, null stays null; object keys at every depth are escaped. */
int convo__mg_put_json(call *c, bson_t *doc, const char *key, json_t *v, int depth)
{
    if (depth > MAX_DEPTH)
        return convo__error(c->err, CONVO_EINVAL, NULL,
                            "extra nests deeper than MongoDB allows (%d levels)", MAX_DEPTH);
    bool ok;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        return put_container(c, doc, key, v, depth);
    case JSON_STRING:
        ok = bson_append_utf8(doc, key, -1, json_string_value(v), (int)json_string_length(v));
        break;
    case JSON_INTEGER:
        ok = bson_append_int64(doc, key, -1, json_integer_value(v));
        break;
    case JSON_REAL:
        ok = bson_append_double(doc, key, -1, json_real_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        ok = bson_append_bool(doc, key, -1, json_is_true(v));
        break;
    default:
        ok = bson_append_null(doc, key, -1);
        break;
    }
    return ok ? 0 : convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
}

static json_t *value_to_json(const bson_iter_t *it, int depth);

static json_t *container_to_json(bson_iter_t *child, bool array, int depth)
{
    json_t *out = array ? json_array() : json_object();
    while (out && bson_iter_next(child)) {
        json_t *v = value_to_json(child, depth + 1);
        int bad = !v;
        if (!bad && array) {
            bad = json_array_append_new(out, v);
        } else if (!bad) {
            char *k = key_unescape(bson_iter_key(child));
            bad = !k || json_object_set_new(out, k, v);
            v = NULL; /* json_object_set_new took it, even on failure */
            free(k);
        }
        if (bad) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static json_t *value_to_json(const bson_iter_t *it, int depth)
{
    uint32_t len;
    bson_iter_t child;
    if (depth > 2 * MAX_DEPTH)
        return NULL;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        const char *s = bson_iter_utf8(it, &len);
        return json_stringn(s, len);
    }
    case BSON_TYPE_INT32:
        return json_integer(bson_iter_int32(it));
    case BSON_TYPE_INT64:
        return json_integer(bson_iter_int64(it));
    case BSON_TYPE_DOUBLE:
        return json_real(bson_iter_double(it));
    case BSON_TYPE_BOOL:
        return json_boolean(bson_iter_bool(it));
    case BSON_TYPE_NULL:
        return json_null();
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        if (!bson_iter_recurse(it, &child))
            return NULL;
        return container_to_json(&child, bson_iter_type(it) == BSON_TYPE_ARRAY, depth);
    default:
        return NULL;
    }
}

/* The stored extra document as compact JSON text (caller frees). */
int convo__mg_extra_to_json(call *c, const bson_t *extra, char **out)
{
    bson_iter_t it;
    json_t *obj = bson_iter_init(&it, extra) ? container_to_json(&it, false, 0) : NULL;
    if (!obj)
        return convo__mg_corrupt(c, "stored extra could not be decoded");
    *out = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return *out ? 0 : convo__mg_no_memory(c);
}
