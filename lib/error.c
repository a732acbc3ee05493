/* error.c — error codes, their one-line texts, and filling a convo_error.
 * The first error set in a call is kept: it is the root cause. */
#include "internal.h"
#include <stdio.h>
#include <string.h>

const char *convo_strerror(int code)
{
    switch (code) {
    case CONVO_OK: return "success";
    case CONVO_ERROR: return "error";
    case CONVO_EINVAL: return "invalid argument";
    case CONVO_ENOTFOUND: return "not found";
    case CONVO_ECONFLICT: return "conflict";
    case CONVO_ETOOLARGE: return "too large";
    case CONVO_EIO: return "input/output error";
    case CONVO_ETIMEOUT: return "timed out";
    case CONVO_ENOMEM: return "out of memory";
    case CONVO_ENOTSUP: return "not supported";
    case CONVO_ECORRUPT: return "corrupt data";
    default: return "unknown error";
    }
}

const char *convo_version(void)
{
    return CONVO_VERSION;
}

void convo__error_clear(convo_error *err)
{
    if (err) {
        err->code = 0;
        err->backend_code[0] = '\0';
        err->message[0] = '\0';
    }
}

/* One line: backends sometimes answer with several (libpq: "refused\n\tIs the
 * server running..."); a line break with the blanks around it becomes one space. */
static void one_line(char *text)
{
    char *out = text;
    for (const char *p = text; *p;) {
        if (*p != '\n' && *p != '\r') {
            *out++ = *p++;
            continue;
        }
        while (out > text && (out[-1] == ' ' || out[-1] == '\t'))
            out--;
        while (*p == '\n' || *p == '\r' || *p == ' ' || *p == '\t')
            p++;
        *out++ = ' ';
    }
    *out = '\0';
}

int convo__error(convo_error *err, int code, const char *backend_code, const char *fmt, ...)
{
    if (!err || err->code != 0)
        return code;
    err->code = code;
    snprintf(err->backend_code, sizeof err->backend_code, "%s", backend_code ? backend_code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    one_line(err->message);
    size_t n = strlen(err->message);
    while (n > 0 && err->message[n - 1] == ' ')
        err->message[--n] = '\0';
    return code;
}

/* Names the thread an error is about unless its message already says "thread ID":
 * "thread ID: ...", or "thread ID ..." for a message that starts "thread ". A long id is cut (at a character boundary) to leave room for
 * the message itself. */
void convo__error_name_thread(convo_error *err, const char *thread_id)
{
    if (!err || err->code == 0 || !thread_id)
        return;
    size_t idlen = strlen(thread_id), room = 96;
    char named[128];
    if (idlen > room) {
        while (room > 0 && ((unsigned char)thread_id[room] & 0xc0) == 0x80)
            room--; /* not inside a UTF-8 character */
        snprintf(named, sizeof named, "thread %.*s...", (int)room, thread_id);
    } else {
        snprintf(named, sizeof named, "thread %s", thread_id);
    }
    /* an id from a dump may be invalid: a message stays one line of text */
    for (char *c = named; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    size_t nlen = strlen(named);
    for (const char *at = err->message; idlen <= 96 && (at = strstr(at, named)); at++)
        if (strchr(" :,;)", at[nlen])) /* "thread t exists", not "thread tx" */
            return;
    /* "thread not found" -> "thread ID not found"; else "thread ID: message" */
    int inside = strncmp(err->message, "thread ", 7) == 0;
    const char *rest = inside ? err->message + 6 : err->message;
    const char *sep = inside ? "" : ": ";
    size_t cap = sizeof err->message - 1, head = nlen + strlen(sep), len = strlen(rest);
    if (len > cap - head)
        len = cap - head; /* named is under 128 bytes: the message keeps the rest */
    memmove(err->message + head, rest, len);
    err->message[head + len] = '\0';
    memcpy(err->message, named, nlen);
    memcpy(err->message + nlen, sep, strlen(sep));
}
