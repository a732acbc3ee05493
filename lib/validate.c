/* validate.c — every input is checked here, before any driver sees it, so a
 * bad call writes nothing: thread ids, messages (parsed with jansson), roles,
 * extra patches and the configured limits. */
#include "internal.h"
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Eight bytes at a time: every message is checked twice (UTF-8, then the
 * scanner), and most of its bytes are plain ASCII text. Each test below is
 * exact as a whole (it may point at the wrong byte, never at none). */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static uint64_t load8(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* Some byte of w is below n (n <= 0x80). */
static uint64_t has_below(uint64_t w, unsigned n)
{
    return (w - ONES * n) & ~w & HIGHS;
}

/* Some byte of w equals c. */
static uint64_t has_byte(uint64_t w, unsigned c)
{
    return has_below(w ^ (ONES * c), 1);
}

/* Returns 1 when [s, s+len) is well-formed UTF-8 (no overlongs, no surrogates). */
int convo__check_utf8(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        size_t n;
        unsigned cp;
        if (end - p >= 8 && !(load8(p) & HIGHS)) {
            p += 8;
            continue;
        }
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
    return convo__check_key("thread id", id, 0, err);
}

/* The one rule for thread ids and checkpoint keys (namespace, ids, channel
 * names): at most CONVO_MAX_THREAD_ID_BYTES of valid UTF-8 without C0
 * controls, DEL or the C1 controls U+0080..U+009F (encoded C2 80..C2 9F). */
int convo__check_key(const char *what, const char *s, int may_be_empty, convo_error *err)
{
    if (!s)
        return convo__error(err, CONVO_EINVAL, NULL, "%s is missing", what);
    size_t len = strnlen(s, CONVO_MAX_THREAD_ID_BYTES + 1);
    if (len == 0 && !may_be_empty)
        return convo__error(err, CONVO_EINVAL, NULL, "%s is empty", what);
    if (len > CONVO_MAX_THREAD_ID_BYTES)
        return convo__error(err, CONVO_EINVAL, NULL, "%s is longer than %d bytes", what,
                            CONVO_MAX_THREAD_ID_BYTES);
    if (!convo__check_utf8(s, len))
        return convo__error(err, CONVO_EINVAL, NULL, "%s is not valid UTF-8", what);
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len; i++)
        if (p[i] < 0x20 || p[i] == 0x7F || (p[i] == 0xC2 && i + 1 < len && p[i + 1] < 0xA0))
            return convo__error(err, CONVO_EINVAL, NULL, "%s contains a control character", what);
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

/* ------------------------------------------------------------ fast path
 *
 * jansson builds a tree for every message it reads: about 4.6 µs for a
 * 260-byte message on the build machine, a fifth of a whole SQLite append.
 * The scanner below reads the common message in one pass without allocating
 * and answers only "sure": the bytes are a JSON object that jansson, with the
 * flags convo__check_message uses, accepts, and its top-level "role" is a
 * plain string of 1..CONVO_MAX_ROLE_BYTES bytes. Anything it is not sure of
 * (every error, escapes in keys or in the role, exponents, numbers over 300
 * characters, integers of 19 digits or more, nesting deeper than SCAN_MAX_DEPTH,
 * objects with more than SCAN_MAX_KEYS keys) goes to jansson, which decides and words the error.
 * tests/unit.c and tests/fuzz/fuzz_message.c hold it to jansson's answers. */

#define SCAN_MAX_DEPTH 16
#define SCAN_MAX_KEYS 32

typedef struct {
    const unsigned char *p, *end;
    const unsigned char *role;
    size_t role_len;
} scanner;

static int scan_value(scanner *s, int depth);

static void scan_ws(scanner *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int scan_hex4(const unsigned char *p, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

/* A string, s->p at its opening quote; *plain is 1 when it has no escapes.
 * UTF-8 was checked over the whole message before. */
static int scan_string(scanner *s, int *plain)
{
    const unsigned char *p = s->p + 1, *end = s->end;
    *plain = 1;
    while (p < end) {
        uint64_t w = end - p >= 8 ? load8(p) : 0;
        if (w && !(has_below(w, 0x20) | has_byte(w, '"') | has_byte(w, '\\'))) {
            p += 8; /* no quote, backslash or control character among these eight */
            continue;
        }
        unsigned c = *p;
        if (c == '"') {
            s->p = p + 1;
            return 1;
        }
        if (c < 0x20)
            return 0;
        if (c != '\\') {
            p++;
            continue;
        }
        *plain = 0;
        if (end - p < 2)
            return 0;
        c = p[1];
        if (c != 'u') {
            if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' &&
                c != 'r' && c != 't')
                return 0;
            p += 2;
            continue;
        }
        unsigned u, low;
        if (end - p < 6 || !scan_hex4(p + 2, &u) || (u >= 0xDC00 && u <= 0xDFFF))
            return 0;
        p += 6;
        if (u >= 0xD800 && u <= 0xDBFF) { /* a surrogate pair, or jansson refuses it */
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !scan_hex4(p + 2, &low) ||
                low < 0xDC00 || low > 0xDFFF)
                return 0;
            p += 6;
        }
    }
    return 0;
}

/* No exponent, at most 300 characters: then no double overflows. */
static int scan_number(scanner *s)
{
    const unsigned char *p = s->p, *end = s->end;
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0')
        p++;
    else if (p < end && *p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        return 0;
    /* an integer of 19 digits or more may not fit in 64 bits: jansson decides */
    int integer = !(p < end && (*p == '.' || *p == 'e' || *p == 'E'));
    if (integer && p - s->p - (*s->p == '-') >= 19)
        return 0;
    if (p < end && *p == '.') {
        if (++p == end || *p < '0' || *p > '9')
            return 0;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if ((p < end && (*p == 'e' || *p == 'E')) || p - s->p > 300)
        return 0;
    s->p = p;
    return 1;
}

static int scan_word(scanner *s, const char *word, size_t n)
{
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return 0;
    s->p += n;
    return 1;
}

static int scan_object(scanner *s, int depth)
{
    struct {
        const unsigned char *p;
        size_t n;
    } keys[SCAN_MAX_KEYS];
    unsigned nkeys = 0;
    s->p++;
    scan_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 1;
    }
    for (;;) {
        int plain;
        if (s->p == s->end || *s->p != '"' || nkeys == SCAN_MAX_KEYS)
            return 0;
        const unsigned char *key = s->p + 1;
        if (!scan_string(s, &plain) || !plain)
            return 0;
        size_t n = (size_t)(s->p - 1 - key);
        for (unsigned i = 0; i < nkeys; i++)
            if (keys[i].n == n && memcmp(keys[i].p, key, n) == 0)
                return 0; /* a duplicate: JSON_REJECT_DUPLICATES */
        keys[nkeys].p = key;
        keys[nkeys++].n = n;
        scan_ws(s);
        if (s->p == s->end || *s->p != ':')
            return 0;
        s->p++;
        scan_ws(s);
        if (depth == 1 && n == 4 && memcmp(key, "role", 4) == 0) {
            if (s->p == s->end || *s->p != '"')
                return 0;
            const unsigned char *value = s->p + 1;
            if (!scan_string(s, &plain) || !plain)
                return 0;
            s->role = value;
            s->role_len = (size_t)(s->p - 1 - value);
        } else if (!scan_value(s, depth)) {
            return 0;
        }
        scan_ws(s);
        if (s->p == s->end)
            return 0;
        if (*s->p == '}') {
            s->p++;
            return 1;
        }
        if (*s->p++ != ',')
            return 0;
        scan_ws(s);
    }
}

static int scan_array(scanner *s, int depth)
{
    s->p++;
    scan_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return 1;
    }
    for (;;) {
        if (!scan_value(s, depth))
            return 0;
        scan_ws(s);
        if (s->p == s->end)
            return 0;
        if (*s->p == ']') {
            s->p++;
            return 1;
        }
        if (*s->p++ != ',')
            return 0;
        scan_ws(s);
    }
}

/* A value inside a container at depth (the message itself is depth 1). */
static int scan_value(scanner *s, int depth)
{
    int plain;
    if (s->p == s->end)
        return 0;
    switch (*s->p) {
    case '"':
        return scan_string(s, &plain);
    case '{':
        return depth < SCAN_MAX_DEPTH && scan_object(s, depth + 1);
    case '[':
        return depth < SCAN_MAX_DEPTH && scan_array(s, depth + 1);
    case 't':
        return scan_word(s, "true", 4);
    case 'f':
        return scan_word(s, "false", 5);
    case 'n':
        return scan_word(s, "null", 4);
    default:
        return scan_number(s);
    }
}

int convo__scan_message(const char *bytes, size_t len, const char **role, size_t *role_len)
{
    scanner s = {(const unsigned char *)bytes, (const unsigned char *)bytes + len, NULL, 0};
    if (!convo__check_utf8(bytes, len))
        return 0;
    scan_ws(&s);
    if (s.p == s.end || *s.p != '{' || !scan_object(&s, 1))
        return 0;
    scan_ws(&s);
    if (s.p != s.end || !s.role || s.role_len == 0 || s.role_len > CONVO_MAX_ROLE_BYTES)
        return 0;
    *role = (const char *)s.role;
    *role_len = s.role_len;
    return 1;
}

int convo__json_object_valid(const char *bytes, size_t len)
{
    scanner s = {(const unsigned char *)bytes, (const unsigned char *)bytes + len, NULL, 0};
    if (convo__check_utf8(bytes, len)) {
        scan_ws(&s);
        if (s.p < s.end && *s.p == '{' && scan_object(&s, 1)) {
            scan_ws(&s);
            if (s.p == s.end)
                return 1;
        }
    }
    json_error_t jerr; /* what the scanner is not sure of */
    json_t *v = json_loadb(bytes, len, 0, &jerr);
    int ok = v && json_is_object(v);
    json_decref(v);
    return ok;
}

/* jansson's "too big integer" / "too big negative integer" (not a real's overflow) */
static int too_big_integer(const json_error_t *jerr)
{
    return json_error_code(jerr) == json_error_numeric_overflow && strstr(jerr->text, "integer");
}

int convo__check_message(const char *bytes, size_t len, const convo_limits *limits,
                         char *const *roles, char **role, convo_error *err)
{
    return convo__check_message_ex(bytes, len, limits, roles, 0, role, err);
}

int convo__check_message_ex(const char *bytes, size_t len, const convo_limits *limits,
                            char *const *roles, int restoring, char **role, convo_error *err)
{
    *role = NULL;
    if (!bytes)
        return convo__error(err, CONVO_EINVAL, NULL, "message is NULL");
    if (len > limits->max_message_bytes)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "message of %zu bytes exceeds the limit of %zu bytes", len,
                            limits->max_message_bytes);
    const char *plain;
    size_t plain_len;
    if (convo__scan_message(bytes, len, &plain, &plain_len)) {
        if (!(*role = strndup(plain, plain_len)))
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        if (role_allowed(*role, roles))
            return 0;
        int rc = convo__error(err, CONVO_EINVAL, NULL, "message role \"%s\" is not allowed here",
                              *role);
        free(*role);
        *role = NULL;
        return rc;
    }
    json_error_t jerr;
    /* One rule for messages and extra: integers fit in signed 64 bits (extra is
     * stored as parsed values; jansson and BSON hold no more). A message restored
     * by import was accepted once: it is kept as it was. */
    size_t flags = JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
    json_t *msg = json_loadb(bytes, len, restoring ? flags | JSON_DECODE_INT_AS_REAL : flags,
                             &jerr);
    if (!msg)
        return too_big_integer(&jerr)
                   ? convo__error(err, CONVO_EINVAL, NULL, "message holds an integer outside the "
                                  "signed 64-bit range at byte %d: send it as a string",
                                  jerr.position)
                   : convo__error(err, CONVO_EINVAL, NULL, "message is not valid JSON: %s at "
                                  "byte %d", jerr.text, jerr.position);
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
        return too_big_integer(&jerr)
                   ? convo__error(err, CONVO_EINVAL, NULL, "extra holds an integer outside the "
                                  "signed 64-bit range at byte %d: send it as a string",
                                  jerr.position)
                   : convo__error(err, CONVO_EINVAL, NULL, "extra is not valid JSON: %s at "
                                  "byte %d", jerr.text, jerr.position);
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

int convo__check_idempotency_key(const char *key, convo_error *err)
{
    if (!key)
        return 0;
    size_t klen = strnlen(key, 257);
    if (klen == 0 || klen > 256 || !convo__check_utf8(key, klen))
        return convo__error(err, CONVO_EINVAL, NULL, "idempotency key must be 1..256 bytes of UTF-8");
    return 0;
}
