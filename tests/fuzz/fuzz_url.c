/* fuzz_url.c — libFuzzer target for the store URL parser (lib/url.c): it must
 * never crash or leak, the redacted copy must never show a password, and
 * rebuilding a parsed URL must parse back to the same parts. */
#include "internal.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), abort())

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decodes a query key ('+' is a space), for recognising "password". */
static void decode_key(const char *s, size_t n, char *out, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else {
            out[o++] = s[i] == '+' ? ' ' : s[i];
        }
    }
    out[o] = '\0';
}

/* The URL text without the places a password may legitimately sit (the
 * authority's ":pass@" and every password=... value), pieces joined by '*'
 * so that no match can span a removed place. */
static char *strip_secrets(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(2 * n + 2), *o = out; /* a "*" may stand for an empty value */
    const char *colon = strchr(text, ':');
    const char *q = strchr(text, '?');
    const char *p = text;
    if (colon && strncmp(colon + 1, "//", 2) == 0) {
        const char *a = colon + 3, *end = a + strcspn(a, "/?"), *at = NULL;
        for (const char *c = a; c < end; c++)
            if (*c == '@')
                at = c;
        const char *pc = at ? memchr(a, ':', (size_t)(at - a)) : NULL;
        if (pc) {
            memcpy(o, text, (size_t)(pc + 1 - text));
            o += pc + 1 - text;
            *o++ = '*';
            p = at;
        }
    }
    while (*p) {
        if (q && p > q && (p[-1] == '?' || p[-1] == '&')) {
            size_t seg = strcspn(p, "&"), klen = strcspn(p, "=&");
            char key[16];
            decode_key(p, klen, key, sizeof key);
            if (klen < seg && strcmp(key, "password") == 0) {
                memcpy(o, p, klen + 1);
                o += klen + 1;
                *o++ = '*';
                p += seg;
                continue;
            }
        }
        *o++ = *p++;
    }
    *o = '\0';
    return out;
}

static void check_secret(const char *text, const char *redacted, const char *stripped,
                         const char *secret)
{
    /* short ones match by chance; '*' is what the mask is made of */
    if (!secret || strlen(secret) < 3 || strchr(secret, '*'))
        return;
    if (strstr(redacted, secret) && !strstr(stripped, secret))
        FAIL("password \"%s\" of URL \"%s\" shows in redacted \"%s\"", secret, text, redacted);
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* parse(rebuild(url)) gives the same parts. */
static void check_rebuild(const char *text, const convo_url *url)
{
    char *again = convo__url_rebuild(url);
    if (!again)
        FAIL("rebuild returned NULL");
    convo_url *u2;
    convo_error err;
    convo__error_clear(&err);
    if (convo__url_parse(&u2, again, &err) != 0)
        FAIL("URL \"%s\" rebuilt as \"%s\" does not parse: %s", text, again, err.message);
    if (!same(url->scheme, u2->scheme) || !same(url->rest, u2->rest) ||
        !same(url->user, u2->user) || !same(url->password, u2->password) ||
        !same(url->host, u2->host) || url->port != u2->port || !same(url->path, u2->path) ||
        url->nparams != u2->nparams)
        FAIL("URL \"%s\" rebuilt as \"%s\" parses differently", text, again);
    for (size_t i = 0; i < url->nparams; i++)
        if (!same(url->params[i].key, u2->params[i].key) ||
            !same(url->params[i].value, u2->params[i].value))
            FAIL("URL \"%s\" rebuilt as \"%s\": parameter %zu differs", text, again, i);
    convo__url_free(u2);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    convo_url *url;
    convo_error err;
    convo__error_clear(&err); /* as every public call does first */
    int rc = convo__url_parse(&url, text, &err);
    if (rc != 0) {
        if (err.code != rc || !err.message[0] || strpbrk(err.message, "\r\n"))
            FAIL("bad error for \"%s\": %d %s", text, rc, err.message);
        if (url)
            FAIL("a failed parse returned a URL");
        free(text);
        return 0;
    }
    char *stripped = strip_secrets(text);
    check_secret(text, url->redacted, stripped, url->password);
    for (size_t i = 0; i < url->nparams; i++)
        if (strcmp(url->params[i].key, "password") == 0)
            check_secret(text, url->redacted, stripped, url->params[i].value);
    check_rebuild(text, url);
    /* what a driver does: take its parameters, reject the rest */
    free(convo__url_take(url, "prefix"));
    free(convo__url_take(url, "schema"));
    convo__url_reject_rest(url, NULL);
    char *rebuilt = convo__url_rebuild(url);
    free(rebuilt);
    convo__url_free(url);
    free(stripped);
    free(text);
    return 0;
}
