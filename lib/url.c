/* url.c — parses store URLs ("scheme:rest?k=v&...", with an optional
 * "//user:pass@host:port/path" authority) and keeps a redacted copy, so
 * that no error message ever shows a password. */
#include "internal.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes [s, s+n) into a new string; NULL on a bad escape or NUL byte. */
static char *decode(const char *s, size_t n)
{
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) {
                free(out);
                return NULL;
            }
            int a = hexval((unsigned char)s[i + 1]), b = hexval((unsigned char)s[i + 2]);
            if (a < 0 || b < 0 || (a == 0 && b == 0)) {
                free(out);
                return NULL;
            }
            *o++ = (char)(a * 16 + b);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

static char *dup_range(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

void convo__url_free(convo_url *url)
{
    if (!url)
        return;
    free(url->scheme);
    free(url->rest);
    free(url->user);
    free(url->password);
    free(url->host);
    free(url->path);
    for (size_t i = 0; i < url->nparams; i++) {
        free(url->params[i].key);
        free(url->params[i].value);
    }
    free(url->params);
    free(url->redacted);
    free(url);
}

static int parse_query(convo_url *url, const char *q, convo_error *err)
{
    while (*q) {
        size_t n = strcspn(q, "&");
        if (n > 0) {
            const char *eq = memchr(q, '=', n);
            size_t klen = eq ? (size_t)(eq - q) : n;
            convo_url_param *grown = realloc(url->params, (url->nparams + 1) * sizeof *grown);
            if (!grown)
                return convo__error(err, CONVO_ENOMEM, NULL, "out of memory parsing the URL");
            url->params = grown;
            convo_url_param *p = &url->params[url->nparams];
            p->key = decode(q, klen);
            p->value = eq ? decode(eq + 1, n - klen - 1) : dup_range("", 0);
            if (!p->key || !p->value || !*p->key) {
                free(p->key);
                free(p->value);
                return convo__error(err, CONVO_EINVAL, NULL,
                                    "bad URL: malformed query parameter");
            }
            for (size_t i = 0; i < url->nparams; i++)
                if (strcmp(url->params[i].key, p->key) == 0) {
                    free(p->key);
                    free(p->value);
                    return convo__error(err, CONVO_EINVAL, NULL,
                                        "bad URL: parameter '%s' given twice", url->params[i].key);
                }
            url->nparams++;
        }
        q += n;
        if (*q == '&')
            q++;
    }
    return 0;
}

/* "//[user[:pass]@]host[:port][/path]" */
static int parse_authority(convo_url *url, const char *a, convo_error *err)
{
    const char *end = a + strcspn(a, "/");
    const char *at = NULL;
    for (const char *p = a; p < end; p++)
        if (*p == '@')
            at = p;
    const char *hp = a;
    if (at) {
        const char *colon = memchr(a, ':', (size_t)(at - a));
        size_t ulen = colon ? (size_t)(colon - a) : (size_t)(at - a);
        url->user = decode(a, ulen);
        if (colon)
            url->password = decode(colon + 1, (size_t)(at - colon - 1));
        if (!url->user || (colon && !url->password))
            return convo__error(err, CONVO_EINVAL, NULL, "bad URL: malformed user or password");
        hp = at + 1;
    }
    const char *port = NULL, *hend = end;
    if (*hp == '[') {
        const char *rb = memchr(hp, ']', (size_t)(end - hp));
        if (!rb)
            return convo__error(err, CONVO_EINVAL, NULL, "bad URL: unclosed '[' in host");
        url->host = decode(hp + 1, (size_t)(rb - hp - 1));
        if (rb + 1 < end && rb[1] == ':')
            port = rb + 2;
        else if (rb + 1 != end)
            return convo__error(err, CONVO_EINVAL, NULL, "bad URL: junk after ']' in host");
    } else {
        const char *colon = memchr(hp, ':', (size_t)(end - hp));
        /* several hosts (mongodb://a:1,b:2) are the client library's business */
        if (colon && !memchr(hp, ',', (size_t)(end - hp))) {
            port = colon + 1;
            hend = colon;
        }
        url->host = decode(hp, (size_t)(hend - hp));
    }
    if (!url->host)
        return convo__error(err, CONVO_EINVAL, NULL, "bad URL: malformed host");
    if (port) {
        if (port == end || (size_t)(end - port) > 5)
            return convo__error(err, CONVO_EINVAL, NULL, "bad URL: malformed port");
        long v = 0;
        for (const char *p = port; p < end; p++) {
            if (!isdigit((unsigned char)*p))
                return convo__error(err, CONVO_EINVAL, NULL, "bad URL: malformed port");
            v = v * 10 + (*p - '0');
        }
        if (v < 1 || v > 65535)
            return convo__error(err, CONVO_EINVAL, NULL, "bad URL: port out of range");
        url->port = (int)v;
    }
    if (*end == '/') {
        url->path = decode(end + 1, strlen(end + 1));
        if (!url->path)
            return convo__error(err, CONVO_EINVAL, NULL, "bad URL: malformed path");
    }
    return 0;
}

/* Whether the query parameter starting at p is named "password", however encoded. */
static int is_password_param(const char *p)
{
    size_t klen = strcspn(p, "=&");
    if (p[klen] != '=')
        return 0;
    char *key = decode(p, klen);
    int yes = key && strcmp(key, "password") == 0;
    free(key);
    return yes;
}

/* The URL text with the password (in the authority or a password= parameter) masked. */
static char *redact(const char *text)
{
    size_t n = strlen(text);
    /* each mask may outgrow what it hides by 3 bytes ("a:@" -> "a:***@",
     * "password=&" -> "password=***&"), so twice the length always fits */
    char *out = malloc(2 * n + 16);
    if (!out)
        return NULL;
    const char *scheme_end = strchr(text, ':');
    const char *q = strchr(text, '?');
    size_t o = 0;
    size_t i = 0;
    if (scheme_end && strncmp(scheme_end, "://", 3) == 0) {
        const char *a = scheme_end + 3;
        const char *end = a + strcspn(a, "/?");
        const char *at = NULL;
        for (const char *p = a; p < end; p++)
            if (*p == '@')
                at = p;
        const char *colon = at ? memchr(a, ':', (size_t)(at - a)) : NULL;
        if (colon) {
            memcpy(out, text, (size_t)(colon + 1 - text));
            o = (size_t)(colon + 1 - text);
            memcpy(out + o, "***", 3);
            o += 3;
            i = (size_t)(at - text);
        }
    }
    /* copy the rest, masking password= values */
    while (i < n) {
        if (q && text + i > q && (text[i - 1] == '?' || text[i - 1] == '&') &&
            is_password_param(text + i)) {
            memcpy(out + o, "password=***", 12);
            o += 12;
            while (i < n && text[i] != '&')
                i++;
            continue;
        }
        out[o++] = text[i++];
    }
    out[o] = '\0';
    return out;
}

/* ---- secrets: what no message may show ---- */

static int add_secret(char **list, size_t *n, size_t max, const char *s, size_t len, int decoded)
{
    if (len == 0 || *n >= max)
        return 0;
    char *v = decoded ? decode(s, len) : dup_range(s, len);
    if (!v)
        return decoded ? 0 : -1; /* a bad escape: the URL is refused anyway */
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i], v) == 0) {
            free(v);
            return 0;
        }
    list[(*n)++] = v;
    return 0;
}

/* Whether the decoded key [k, k + n) names a password ("password",
 * "tlsCertificateKeyFilePassword", ...). */
static int names_password(const char *k, size_t n)
{
    char *key = decode(k, n);
    size_t len = key ? strlen(key) : 0;
    int yes = len >= 8 && strcasecmp(key + len - 8, "password") == 0;
    free(key);
    return yes;
}

char **convo__url_secrets(const char *text)
{
    enum { MAX = 8 };
    char **list = calloc(MAX + 1, sizeof *list);
    size_t n = 0;
    if (!list || !text)
        return list;
    int rc = 0;
    const char *colon = strchr(text, ':');
    const char *q = strchr(text, '?');
    if (colon && strncmp(colon, "://", 3) == 0) {
        const char *a = colon + 3, *end = a + strcspn(a, "/?"), *at = NULL;
        for (const char *p = a; p < end; p++)
            if (*p == '@')
                at = p;
        const char *c = at ? memchr(a, ':', (size_t)(at - a)) : NULL;
        if (c) {
            rc |= add_secret(list, &n, MAX, c + 1, (size_t)(at - c - 1), 0);
            rc |= add_secret(list, &n, MAX, c + 1, (size_t)(at - c - 1), 1);
        }
    }
    for (const char *p = q ? q + 1 : ""; *p;) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);
        if (eq && names_password(p, (size_t)(eq - p))) {
            rc |= add_secret(list, &n, MAX, eq + 1, len - (size_t)(eq + 1 - p), 0);
            rc |= add_secret(list, &n, MAX, eq + 1, len - (size_t)(eq + 1 - p), 1);
        }
        p += len;
        if (*p == '&')
            p++;
    }
    if (rc != 0) {
        convo__secrets_free(list);
        return NULL;
    }
    return list;
}

void convo__secrets_free(char **secrets)
{
    for (char **p = secrets; p && *p; p++) {
        memset(*p, 0, strlen(*p));
        free(*p);
    }
    free(secrets);
}

/* Characters that end a word of a message: a secret is masked only as a
 * whole word, never inside another one ("e" in "connection"). */
static int ends_word(char c)
{
    return c == '\0' || isspace((unsigned char)c) || strchr("\"'`,;:()[]{}<>=&@/?#|", c);
}

static int word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Appends [s, s + n) to out (size bytes, *o used), cutting at the end. */
static void put(char *out, size_t size, size_t *o, const char *s, size_t n)
{
    while (n-- > 0 && *o + 1 < size)
        out[(*o)++] = *s++;
}

void convo__scrub(char *msg, size_t size, char *const *secrets)
{
    if (!msg || size == 0)
        return;
    size_t n = strlen(msg), o = 0;
    int full = n + 1 >= size; /* cut already: a URL at the end may be too */
    char *out = malloc(size);
    if (!out) { /* no room to do it right: say nothing rather than too much */
        snprintf(msg, size, "%s", "(message withheld: out of memory)");
        return;
    }
    for (size_t i = 0; i < n;) {
        /* a URL's password field: ://user:PASSWORD@ */
        if (strncmp(msg + i, "://", 3) == 0) {
            size_t a = i + 3, end = a + strcspn(msg + a, " \t\r\n\"'<>/?#");
            const char *at = NULL;
            for (size_t p = a; p < end; p++)
                if (msg[p] == '@')
                    at = msg + p;
            const char *c = memchr(msg + a, ':', (size_t)((at ? at : msg + end) - (msg + a)));
            if (c && (at || (full && end == n))) {
                put(out, size, &o, msg + i, (size_t)(c + 1 - (msg + i)));
                put(out, size, &o, "***", 3);
                i = at ? (size_t)(at - msg) : n;
                continue;
            }
        }
        /* a password parameter: password=VALUE, password = 'VALUE' */
        if ((i == 0 || !word_char(msg[i - 1])) && strncasecmp(msg + i, "password", 8) == 0) {
            size_t p = i + 8;
            while (msg[p] == ' ')
                p++;
            if (msg[p] == '=') {
                p++;
                while (msg[p] == ' ')
                    p++;
                char quote = msg[p] == '\'' || msg[p] == '"' ? msg[p] : 0;
                size_t v = quote ? p + 1 : p;
                size_t e = v + (quote ? strcspn(msg + v, quote == '"' ? "\"" : "'")
                                      : strcspn(msg + v, " \t\r\n&;,)'\""));
                if (e > v) {
                    put(out, size, &o, msg + i, v - i);
                    put(out, size, &o, "***", 3);
                    i = e;
                    continue;
                }
            }
        }
        /* a secret as a whole word */
        size_t hit = 0;
        if (i == 0 || ends_word(msg[i - 1]))
            for (char *const *s = secrets; s && *s && !hit; s++) {
                size_t len = strlen(*s);
                if (len && strncmp(msg + i, *s, len) == 0 && ends_word(msg[i + len]))
                    hit = len;
            }
        if (hit) {
            put(out, size, &o, "***", 3);
            i += hit;
            continue;
        }
        put(out, size, &o, msg + i, 1);
        i++;
    }
    out[o] = '\0';
    memcpy(msg, out, o + 1);
    memset(out, 0, size);
    free(out);
}

int convo__url_parse(convo_url **out, const char *text, convo_error *err)
{
    *out = NULL;
    if (!text || !*text)
        return convo__error(err, CONVO_EINVAL, NULL, "bad URL: empty");
    const char *colon = strchr(text, ':');
    if (!colon || colon == text)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "bad URL: expected scheme:..., e.g. sqlite:convo.db");
    for (const char *p = text; p < colon; p++)
        if (!isalnum((unsigned char)*p) && *p != '+' && *p != '-' && *p != '.')
            return convo__error(err, CONVO_EINVAL, NULL, "bad URL: malformed scheme");
    convo_url *url = calloc(1, sizeof *url);
    if (!url)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory parsing the URL");
    int rc = CONVO_ENOMEM;
    url->redacted = redact(text);
    url->scheme = dup_range(text, (size_t)(colon - text));
    if (!url->redacted || !url->scheme)
        goto fail;
    for (char *p = url->scheme; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    const char *rest = colon + 1;
    const char *q = strchr(rest, '?');
    url->rest = dup_range(rest, q ? (size_t)(q - rest) : strlen(rest));
    if (!url->rest)
        goto fail;
    if (strncmp(url->rest, "//", 2) == 0 && (rc = parse_authority(url, url->rest + 2, err)) != 0)
        goto fail;
    if (q && (rc = parse_query(url, q + 1, err)) != 0)
        goto fail;
    *out = url;
    return 0;
fail:
    convo__url_free(url);
    return rc == CONVO_ENOMEM ? convo__error(err, rc, NULL, "out of memory parsing the URL") : rc;
}

char *convo__url_take(convo_url *url, const char *key)
{
    for (size_t i = 0; i < url->nparams; i++) {
        if (strcmp(url->params[i].key, key) == 0) {
            char *v = url->params[i].value;
            free(url->params[i].key);
            memmove(&url->params[i], &url->params[i + 1],
                    (url->nparams - i - 1) * sizeof *url->params);
            url->nparams--;
            return v;
        }
    }
    return NULL;
}

int convo__url_take_int(convo_url *url, const char *key, long long min, long long max,
                        long long *out, convo_error *err)
{
    char *v = convo__url_take(url, key);
    if (!v)
        return 0;
    /* digits only, one '-' first when negatives are allowed: no sign, space,
     * base prefix or suffix that strtoll would let through */
    const char *d = v[0] == '-' && min < 0 ? v + 1 : v;
    int ok = *d != '\0' && strspn(d, "0123456789") == strlen(d) && strlen(d) <= 19;
    long long n = 0;
    if (ok) {
        char *end;
        errno = 0;
        n = strtoll(v, &end, 10);
        ok = errno == 0 && *end == '\0' && n >= min && n <= max;
    }
    free(v);
    if (!ok)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "bad URL: %s must be a whole number from %lld to %lld", key, min, max);
    *out = n;
    return 0;
}

int convo__url_take_ttl(convo_url *url, int64_t *seconds, convo_error *err)
{
    long long n = 0;
    int rc = convo__url_take_int(url, "ttl", 1, CONVO_MAX_TTL_SECONDS, &n, err);
    *seconds = rc == 0 ? n : 0;
    return rc;
}

int convo__url_reject_rest(const convo_url *url, convo_error *err)
{
    if (url->nparams == 0)
        return 0;
    return convo__error(err, CONVO_EINVAL, NULL, "unknown URL parameter '%s' for %s:",
                        url->params[0].key, url->scheme);
}

static size_t encode_into(char *o, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/' || c == ':') {
            if (o) o[n] = (char)c;
            n++;
        } else {
            if (o) {
                o[n] = '%';
                o[n + 1] = hex[c >> 4];
                o[n + 2] = hex[c & 15];
            }
            n += 3;
        }
    }
    return n;
}

char *convo__url_rebuild(const convo_url *url)
{
    size_t n = strlen(url->scheme) + 1 + strlen(url->rest) + 2;
    for (size_t i = 0; i < url->nparams; i++)
        n += encode_into(NULL, url->params[i].key) + encode_into(NULL, url->params[i].value) + 2;
    char *out = malloc(n), *o = out;
    if (!out)
        return NULL;
    o += sprintf(o, "%s:%s", url->scheme, url->rest);
    for (size_t i = 0; i < url->nparams; i++) {
        *o++ = i == 0 ? '?' : '&';
        o += encode_into(o, url->params[i].key);
        *o++ = '=';
        o += encode_into(o, url->params[i].value);
    }
    *o = '\0';
    return out;
}
