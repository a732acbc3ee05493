/* dump.c — `convo export`, `convo import` and `convo copy`: move threads
 * between stores as a msgpack stream (docs/dump-format.md), with progress on
 * stderr when it is a terminal. */
#include "dump.h"
#include "newdb.h"
#include <convo.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct progress_state {
    const char *verb;
    int quiet; /* --quiet: no progress, no summary */
    double start, last;
} progress_state;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void show_progress(void *ctx, const convo_dump_stats *st)
{
    progress_state *p = ctx;
    double t = now_s();
    if (t - p->last < 0.25)
        return;
    p->last = t;
    double secs = t - p->start;
    fprintf(stderr, "\r%s: %llu threads, %llu messages, %.0f messages/s   ", p->verb,
            (unsigned long long)st->threads, (unsigned long long)st->messages,
            secs > 0 ? (double)st->messages / secs : 0.0);
}

/* "1 thread" / "2 threads" */
static const char *plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* The summary line on stderr (issue 23: the commands printed nothing on success):
 * "export: 2 threads, 5 messages, 1 checkpoint, 1234 bytes in 0.1 s". After an
 * error only a terminal gets it, to end the progress line. */
static void done(const progress_state *p, const convo_dump_stats *st, int rc)
{
    if (p->quiet || (rc != 0 && !isatty(2)))
        return;
    double secs = now_s() - p->start;
    fprintf(stderr, "%s%s: %llu %s, %llu %s", isatty(2) ? "\r" : "", p->verb,
            (unsigned long long)st->threads, plural(st->threads, "thread", "threads"),
            (unsigned long long)st->messages, plural(st->messages, "message", "messages"));
    if (st->skipped)
        fprintf(stderr, " (%llu there already)", (unsigned long long)st->skipped);
    fprintf(stderr, ", %llu %s, %llu %s in %.1f s%s\n", (unsigned long long)st->checkpoints,
            plural(st->checkpoints, "checkpoint", "checkpoints"), (unsigned long long)st->bytes,
            plural(st->bytes, "byte", "bytes"), secs, rc ? " (stopped by an error)" : "");
}

static void set_progress(convo_dump_opts *o, progress_state *p, const char *verb, int quiet)
{
    p->verb = verb;
    p->quiet = quiet;
    p->start = p->last = now_s();
    if (isatty(2) && !quiet) {
        o->progress = show_progress;
        o->progress_ctx = p;
    }
}

static int write_errno; /* why the dump could not be written */

static int file_write(void *ctx, const void *buf, size_t len)
{
    errno = 0;
    if (fwrite(buf, 1, len, ctx) == len)
        return 0;
    write_errno = errno;
    return -1;
}

static int read_errno; /* why the dump could not be read */

static long file_read(void *ctx, void *buf, size_t len)
{
    errno = 0;
    size_t n = fread(buf, 1, len, ctx);
    if (n == 0 && ferror((FILE *)ctx)) {
        read_errno = errno;
        return -1;
    }
    return (long)n;
}

static int status(int rc, const convo_error *err)
{
    if (rc == 0)
        return 0;
    fprintf(stderr, "convo: %s\n", err->message[0] ? err->message : convo_strerror(rc));
    return rc == CONVO_ENOTFOUND ? 3 : rc == CONVO_ECONFLICT ? 4 : rc == CONVO_ETOOLARGE ? 5 : 1;
}

int convo_tool_export(convo_store *s, int nthreads, char **threads, int quiet)
{
    if (isatty(1)) {
        fprintf(stderr, "convo: export writes binary data; redirect it to a file\n");
        return 2;
    }
    convo_dump_opts o = CONVO_DUMP_OPTS_INIT;
    progress_state p;
    set_progress(&o, &p, "export", quiet);
    convo_dump_stats st;
    convo_error err;
    int rc = convo_export(s, (const char *const *)threads, (size_t)nthreads, file_write, stdout,
                          &o, &st, &err);
    errno = 0;
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout)))
        write_errno = errno;
    if ((rc == 0 || rc == CONVO_EIO) && write_errno) {
        fprintf(stderr, "convo: writing the dump failed: %s\n", strerror(write_errno));
        return 1;
    }
    if (rc == 0 && ferror(stdout)) {
        fprintf(stderr, "convo: writing the dump failed\n");
        return 1;
    }
    done(&p, &st, rc);
    return status(rc, &err);
}

int convo_tool_import(convo_store *s, int quiet)
{
    convo_dump_opts o = CONVO_DUMP_OPTS_INIT;
    progress_state p;
    set_progress(&o, &p, "import", quiet);
    convo_dump_stats st = {0};
    convo_error err;
    int rc = convo_import(s, file_read, stdin, &o, &st, &err);
    done(&p, &st, rc);
    if (rc == CONVO_EIO && read_errno) {
        fprintf(stderr, "convo: reading the dump from standard input failed at byte %llu: %s\n",
                (unsigned long long)st.bytes, strerror(read_errno));
        return 1;
    }
    return status(rc, &err);
}

int convo_tool_copy(const char *src_url, const char *dst_url, int nthreads, char **threads,
                    int quiet)
{
    convo_store *src = NULL, *dst = NULL;
    convo_error err;
    char *created = NULL; /* the destination's SQLite file, when this open creates it */
    int rc = convo_open(&src, src_url, &err);
    if (rc == 0) {
        created = newdb_path(dst_url);
        rc = convo_open(&dst, dst_url, &err);
    }
    convo_dump_stats st = {0};
    progress_state p;
    if (rc == 0) {
        convo_dump_opts o = CONVO_DUMP_OPTS_INIT;
        set_progress(&o, &p, "copy", quiet);
        rc = convo_copy(src, dst, (const char *const *)threads, (size_t)nthreads, &o, &st, &err);
        done(&p, &st, rc);
    }
    if (rc != 0)
        newdb_discard(created, &dst);
    free(created);
    convo_close(src);
    convo_close(dst);
    return status(rc, &err);
}
