/* newdb.c — a failed command leaves no new, empty SQLite database behind (issue 23:
 * a failed `convo import` into a new path left a 64 KiB file). The tool notes that
 * the URL's file did not exist before it opened the store; when the command fails
 * and the store holds no thread, the file and its companions are removed. */
#include "newdb.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int hex(int c)
{
    return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

/* sqlite:PATH, sqlite://PATH: PATH up to '?', percent-decoded (docs/sqlite.md) */
static char *sqlite_path(const char *url)
{
    if (strncmp(url, "sqlite:", 7) != 0)
        return NULL;
    const char *p = url + 7;
    if (strncmp(p, "//", 2) == 0)
        p += 2;
    size_t n = strcspn(p, "?");
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '%' && i + 2 < n && isxdigit((unsigned char)p[i + 1]) &&
            isxdigit((unsigned char)p[i + 2])) {
            *o++ = (char)(hex((unsigned char)p[i + 1]) * 16 + hex((unsigned char)p[i + 2]));
            i += 2;
        } else {
            *o++ = p[i];
        }
    }
    *o = '\0';
    if (!*out || strcmp(out, ":memory:") == 0 || strlen(out) != (size_t)(o - out)) {
        free(out); /* no file, or a %00 the driver refuses anyway */
        return NULL;
    }
    return out;
}

char *newdb_path(const char *url)
{
    char *path = url ? sqlite_path(url) : NULL;
    if (path && access(path, F_OK) == 0) {
        free(path);
        return NULL;
    }
    return path;
}

void newdb_discard(const char *path, convo_store **s)
{
    if (!path || !*s)
        return;
    convo_thread_page *page;
    if (convo_thread_list(*s, NULL, 1, &page, NULL) != 0)
        return; /* cannot tell: keep it */
    size_t threads = convo_thread_page_count(page);
    convo_thread_page_free(page);
    if (threads != 0)
        return;
    convo_close(*s);
    *s = NULL;
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char name[4096];
        if ((size_t)snprintf(name, sizeof name, "%s%s", path, suffixes[i]) < sizeof name)
            unlink(name);
    }
}
