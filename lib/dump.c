/* dump.c — what export.c and import.c share (the frame checksum, progress
 * reports), and convo_copy: an export piped into an import through a socket
 * pair, the export on a thread of its own. Format in docs/dump-format.md. */
#include "dump.h"
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

/* FNV-1a, 64 bits: each frame's check of its record. */
uint64_t convo__dump_hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

void convo__dump_report(const convo_dump_opts *opts, const convo_dump_stats *stats)
{
    if (opts && opts->progress)
        opts->progress(opts->progress_ctx, stats);
}

/* ---------------------------------------------------------------- copy */

typedef struct copy_job {
    convo_store *src;
    const char *const *ids;
    size_t n;
    int fd;
    int rc;
    int write_failed; /* the import stopped reading: not the source's fault */
    convo_error err;
    convo_dump_stats stats;
} copy_job;

static int fd_write(void *ctx, const void *buf, size_t len)
{
    copy_job *j = ctx;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = send(j->fd, p, len, MSG_NOSIGNAL); /* the reader may stop early */
        if (w < 0) {
            j->write_failed = 1;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The import's end of the socket: the calling thread's wait for the export is
 * a wait between the destination's hooks (the export may need what they give
 * up: a connection of the source held by a thread waiting for the caller's
 * lock, as a Python callback does). */
typedef struct copy_reader {
    int fd;
    const convo_wait_hooks *wait;
} copy_reader;

static long fd_read(void *ctx, void *buf, size_t len)
{
    copy_reader *r = ctx;
    convo_wait w;
    convo__wait_begin(&w, r->wait);
    long n = (long)recv(r->fd, buf, len, 0);
    convo__wait_end(&w);
    return n;
}

static void *copy_export(void *arg)
{
    copy_job *j = arg;
    convo__wait_unhook_thread(); /* the source's hooks are the calling thread's */
    j->rc = convo_export(j->src, j->ids, j->n, fd_write, j, NULL, &j->stats, &j->err);
    shutdown(j->fd, SHUT_WR);
    return NULL;
}

int convo_copy(convo_store *src, convo_store *dst, const char *const *thread_ids, size_t n,
               const convo_dump_opts *opts, convo_dump_stats *stats, convo_error *err)
{
    convo__error_clear(err);
    if (!src || !dst)
        return convo__error(err, CONVO_EINVAL, NULL, "source and destination are required");
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
        return convo__error(err, CONVO_EIO, NULL, "socketpair failed");
    copy_job job = {.src = src, .ids = thread_ids, .n = n, .fd = fds[0]};
    pthread_t t;
    if (pthread_create(&t, NULL, copy_export, &job) != 0) {
        close(fds[0]);
        close(fds[1]);
        return convo__error(err, CONVO_ENOMEM, NULL, "cannot start the exporting thread");
    }
    copy_reader reader = {fds[1], &dst->limits.wait};
    int rc = convo_import(dst, fd_read, &reader, opts, stats, err);
    shutdown(fds[1], SHUT_RDWR); /* unblocks the exporter if the import stopped early */
    pthread_join(t, NULL);
    close(fds[0]);
    close(fds[1]);
    /* The source's failure is the root cause, unless the export failed only
     * because the import had stopped (and shut the socket): then the import's
     * error says what went wrong (a conflict, the destination's server gone). */
    if (job.rc != 0 && !(rc != 0 && job.write_failed)) {
        if (err)
            *err = job.err;
        return job.rc;
    }
    return rc;
}
