/* sqlite.c — the SQLite driver: one database file in WAL mode, shared by the
 * threads of a process through a small pool of connections and by other
 * processes through SQLite's own file locks; every write is one BEGIN IMMEDIATE
 * transaction. This file holds the driver table, the URL and its options, open
 * and close; sqlite_int.h says where the rest is. The stored layout is
 * described in docs/sqlite.md. */
#include "config.h"
#include "sqlite_int.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_BUSY_MS 5000
#define DEFAULT_POOL 4
#define MAX_POOL 64

/* ---- opening ---- */

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* The file name from the URL: "sqlite:PATH" or "sqlite://PATH" (so
 * "sqlite:///abs" is "/abs"), percent-decoded. */
static int url_path(const convo_url *url, char **out, convo_error *err)
{
    const char *s = url->rest;
    if (strncmp(s, "//", 2) == 0)
        s += 2;
    size_t n = strlen(s);
    char *path = malloc(n + 1), *o = path;
    if (!path)
        return no_memory(err);
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] != '%') {
            *o++ = s[i];
        } else if (i + 2 < n && (hi = hexval((unsigned char)s[i + 1])) >= 0 &&
                   (lo = hexval((unsigned char)s[i + 2])) >= 0 && (hi | lo) != 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            free(path);
            return convo__error(err, CONVO_EINVAL, NULL, "sqlite: bad %%-escape in the path");
        }
    }
    *o = '\0';
    if (!*path) {
        free(path);
        return convo__error(err, CONVO_EINVAL, NULL,
                            "sqlite: a path is needed, e.g. sqlite:convo.db or sqlite::memory:");
    }
    *out = path;
    return 0;
}

/* Creates the file mode 0600 if it does not exist yet; an existing file keeps
 * its mode. SQLite then creates -wal and -shm with the mode of this file. */
static int create_private(const char *path, convo_error *err)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            return 0;
        return convo__error(err, CONVO_EIO, NULL, "sqlite: cannot create %s: %s", path,
                            strerror(errno));
    }
    /* the umask may have taken bits off 0600; the file is ours and empty */
    int rc = fchmod(fd, 0600) != 0 ? convo__error(err, CONVO_EIO, NULL,
                                                  "sqlite: cannot chmod %s: %s", path,
                                                  strerror(errno))
                                   : 0;
    close(fd);
    return rc;
}

/* Integer parameter key in [min, max], def when absent. */
static int int_param(convo_url *url, const char *key, long min, long max, long def, int *out,
                     convo_error *err)
{
    long long n = def;
    int rc = convo__url_take_int(url, key, min, max, &n, err);
    *out = (int)n;
    return rc;
}

static int take_ttl(convo_url *url, int *ttl_s, convo_error *err)
{
    int64_t seconds;
    int rc = convo__url_take_ttl(url, &seconds, err);
    *ttl_s = (int)seconds; /* CONVO_MAX_TTL_SECONDS is INT32_MAX */
    return rc;
}

static int sync_param(convo_url *url, int *full, convo_error *err)
{
    char *v = convo__url_take(url, "synchronous");
    int rc = 0;
    *full = 0;
    if (v && strcasecmp(v, "full") == 0)
        *full = 1;
    else if (v && strcasecmp(v, "normal") != 0)
        rc = convo__error(err, CONVO_EINVAL, NULL, "sqlite: synchronous must be normal or full");
    free(v);
    return rc;
}

static int parse_params(convo_backend *b, convo_url *url, int *pool, convo_error *err)
{
    int rc = int_param(url, "busy_timeout", 0, INT_MAX, DEFAULT_BUSY_MS, &b->busy_ms, err);
    if (rc == 0)
        rc = int_param(url, "pool", 1, MAX_POOL, DEFAULT_POOL, pool, err);
    if (rc == 0)
        rc = take_ttl(url, &b->ttl_s, err);
    if (rc == 0)
        rc = sync_param(url, &b->sync_full, err);
    if (rc == 0) /* layout 17: 0 = this store's puts seal nothing (A/B, the older layouts' tests) */
        rc = int_param(url, "seal", 0, 1, 1, &b->seal, err);
    return rc ? rc : convo__url_reject_rest(url, err);
}

/* Resolves the path once, so a later chdir() cannot point new connections elsewhere. */
static int set_path(convo_backend *b, char *path, convo_error *err)
{
    if (strcmp(path, ":memory:") == 0) {
        b->memory = 1;
        b->path = path;
        return 0;
    }
    int rc = create_private(path, err);
    if (rc == 0 && !(b->path = realpath(path, NULL)))
        rc = convo__error(err, CONVO_EIO, NULL, "sqlite: cannot resolve %s: %s", path,
                          strerror(errno));
    free(path);
    return rc;
}

static void sq_close(convo_backend *b)
{
    convo__pool_free(b->pool);
    free(b->path);
    free(b);
}

static int sq_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                   convo_error *err)
{
    if (!sqlite3_threadsafe())
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "sqlite: the SQLite library was built without thread support");
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return no_memory(err);
    b->limits = *limits;
    char *path = NULL;
    int pool = DEFAULT_POOL;
    int rc = parse_params(b, url, &pool, err);
    if (rc == 0 && (rc = url_path(url, &path, err)) == 0)
        rc = set_path(b, path, err);
    if (rc == 0 && convo__pool_new(&b->pool, b->memory ? 1 : (size_t)pool, &sq_pool_ops, b) != 0)
        rc = no_memory(err);
    if (rc == 0)
        convo__pool_set_wait(b->pool, &b->limits.wait);
    void *first;
    convo_error first_err;
    convo__error_clear(&first_err);
    /* open one connection now: a bad file or a too-new schema fails here, naming the file */
    if (rc == 0 && (rc = convo__pool_acquire(b->pool, &first, &first_err)) == 0)
        convo__pool_release(b->pool, first, false);
    else if (rc && first_err.code)
        convo__error(err, first_err.code, first_err.backend_code, "%s (%s)", first_err.message,
                     b->path);
    /* the declared index keys: recorded by the first open that has them, the same ever after */
    if (rc == 0 && limits->indexed_keys)
        rc = sq_index_declare(b, limits->indexed_keys, err);
    if (rc) {
        sq_close(b);
        return rc;
    }
    b->limits.indexed_keys = NULL; /* the core's; the recorded ones rule from here on */
    *out = b;
    return 0;
}

static const char *const sq_schemes[] = {"sqlite", NULL};

const convo_driver convo_driver_sqlite = {
    .version = CONVO_DRIVER_VERSION,
    .name = "sqlite",
    .schemes = sq_schemes,
    .open = sq_open,
    .close = sq_close,
    .append = sq_append,
    .load = sq_load,
    .save_extra = sq_save_extra,
    .thread_delete = sq_thread_delete,
    .thread_list = sq_thread_list,
    .thread_fork = sq_thread_fork,
    .checkpoint_put = sq_checkpoint_put,
    .checkpoint_put_writes = sq_checkpoint_put_writes,
    .checkpoint_get = sq_checkpoint_get,
    .checkpoint_list = sq_checkpoint_list,
    .checkpoint_prune = sq_checkpoint_prune,
    .checkpoint_delete = sq_checkpoint_delete,
    .thread_copy = sq_thread_copy,
    .bench_raw = sq_bench_raw,
    .stored_bytes = sq_stored_bytes,
    .thread_import = sq_thread_import,
    .sweep = sq_sweep,
    .checkpoint_put_log = sq_checkpoint_put_log,
    .replace_tail = sq_replace_tail,
    .thread_list_ex = sq_thread_list_ex,
    .checkpoint_put_refs = sq_checkpoint_put_refs,
};
