/* validate.c — every input is checked here, before any driver sees it, so a
 * bad call writes nothing: thread ids, messages (parsed with jansson), roles,
 * extra patches and the configured limits. */
#include "internal.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Returns 1 when [s, s+len) is well-formed UTF-8 (no overlongs, no surrogates). */
int convo__check_utf8(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        size_t n;
        unsigned cp;
        if (c < 0x80) {
            p++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1, cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2, cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3, cp = c & 0x07;
        } else {
            return 0;
        }
        if ((size_t)(end - p) <= n)
            return 0;
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        p += n + 1;
    }
    return 1;
}

int convo__check_thread_id(const char *id, convo_error *err)
{
    if (!id || !*id)
        return convo__error(err, CONVO_EINVAL, NULL, "thread id is empty");
    size_t len = strnlen(id, CONVO_MAX_THREAD_ID_BYTES + 1);
    if (len > CONVO_MAX_THREAD_ID_BYTES)
        return convo__error(err, CONVO_EINVAL, NULL, "thread id is longer than %d bytes",
                            CONVO_MAX_THREAD_ID_BYTES);
    if (!convo__check_utf8(id, len))
        return convo__error(err, CONVO_EINVAL, NULL, "thread id is not valid UTF-8");
    const unsigned char *p = (const unsigned char *)id;
    for (size_t i = 0; i < len; i++) {
        /* C0 controls, DEL, and the C1 controls U+0080..U+009F (encoded C2 80..C2 9F) */
        if (p[i] < 0x20 || p[i] == 0x7F || (p[i] == 0xC2 && i + 1 < len && p[i + 1] < 0xA0))
            return convo__error(err, CONVO_EINVAL, NULL, "thread id contains a control character");
    }
    return 0;
}

static int role_allowed(const char *role, char *const *roles)
{
    if (!roles)
        return 1;
    for (; *roles; roles++)
        if (strcmp(*roles, role) == 0)
            return 1;
    return 0;
}

int convo__check_message(const char *bytes, size_t len, const convo_limits *limits,
                         char *const *roles, char **role, convo_error *err)
{
    *role = NULL;
    if (!bytes)
        return convo__error(err, CONVO_EINVAL, NULL, "message is NULL");
    if (len > limits->max_message_bytes)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "message of %zu bytes exceeds the limit of %zu bytes", len,
                            limits->max_message_bytes);
    json_error_t jerr;
    /* integers past 64 bits are valid JSON; the bytes are kept, so only parse them */
    json_t *msg = json_loadb(bytes, len,
                             JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
                             &jerr);
    if (!msg)
        return convo__error(err, CONVO_EINVAL, NULL, "message is not valid JSON: %s at byte %d",
                            jerr.text, jerr.position);
    int rc = 0;
    json_t *r = json_object_get(msg, "role");
    if (!json_is_object(msg))
        rc = convo__error(err, CONVO_EINVAL, NULL, "message is not a JSON object");
    else if (!r)
        rc = convo__error(err, CONVO_EINVAL, NULL, "message has no \"role\" field");
    else if (!json_is_string(r))
        rc = convo__error(err, CONVO_EINVAL, NULL, "message \"role\" is not a string");
    else if (json_string_length(r) == 0)
        rc = convo__error(err, CONVO_EINVAL, NULL, "message \"role\" is empty");
    else if (json_string_length(r) > CONVO_MAX_ROLE_BYTES)
        rc = convo__error(err, CONVO_EINVAL, NULL, "message \"role\" is longer than %d bytes",
                          CONVO_MAX_ROLE_BYTES);
    else if (memchr(json_string_value(r), '\0', json_string_length(r)))
        rc = convo__error(err, CONVO_EINVAL, NULL, "message \"role\" contains a NUL character");
    else if (!role_allowed(json_string_value(r), roles))
        rc = convo__error(err, CONVO_EINVAL, NULL, "message role \"%s\" is not allowed here",
                          json_string_value(r));
    else if (!(*role = strdup(json_string_value(r))))
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    json_decref(msg);
    return rc;
}

int convo__check_extra_patch(const char *json, const convo_limits *limits, char **compact,
                             void **obj, convo_error *err)
{
    *compact = NULL;
    *obj = NULL;
    if (!json)
        return convo__error(err, CONVO_EINVAL, NULL, "extra patch is NULL");
    size_t len = strlen(json);
    if (len > limits->max_extra_bytes)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "extra patch of %zu bytes exceeds the limit of %zu bytes", len,
                            limits->max_extra_bytes);
    json_error_t jerr;
    json_t *patch = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
    if (!patch)
        return convo__error(err, CONVO_EINVAL, NULL, "extra is not valid JSON: %s at byte %d",
                            jerr.text, jerr.position);
    if (!json_is_object(patch)) {
        json_decref(patch);
        return convo__error(err, CONVO_EINVAL, NULL, "extra is not a JSON object");
    }
    *compact = json_dumps(patch, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!*compact) {
        json_decref(patch);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    *obj = patch;
    return 0;
}
