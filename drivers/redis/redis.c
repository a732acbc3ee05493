/* redis.c — the Redis driver (hiredis): threads, their messages, extra and
 * checkpoints. Every mutating call is one Lua script run with EVALSHA on the
 * keys of a single thread, which all share one {hash tag}; on one server the
 * scripts also keep the thread index (sorted sets of their own). See
 * docs/redis.md. This file: the driver's table, open and close, the URL's
 * options. The rest, by concern: conn.c, cmd.c, index.c, threads.c,
 * checkpoints.c, maint.c, scripts.c (the *.lua files), cluster.c. */
#include "redis_int.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- open / close ---- */

static int parse_int(const char *name, const char *v, long long lo, long long hi, long long *out,
                     convo_error *err)
{
    char *end;
    errno = 0;
    long long x = v && *v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || errno || *end || x < lo || x > hi)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "redis URL: %s must be an integer in %lld..%lld", name, lo, hi);
    *out = x;
    return 0;
}

static int check_prefix(const char *p, convo_error *err)
{
    size_t n = strlen(p);
    if (n == 0 || n > MAX_PREFIX_BYTES)
        return convo__error(err, CONVO_EINVAL, NULL, "redis URL: prefix must be 1..%d bytes",
                            MAX_PREFIX_BYTES);
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c < 0x20 || *c == 0x7f || *c == '{' || *c == '}')
            return convo__error(err, CONVO_EINVAL, NULL, "redis URL: prefix must not contain "
                                "'{', '}' or control characters");
    return 0;
}

/* Host, port, socket path and database from the URL's authority and path. */
static int parse_location(convo_backend *b, convo_url *url, long long *db, convo_error *err)
{
    if (strncmp(url->rest, "//", 2) != 0)
        return convo__error(err, CONVO_EINVAL, NULL, "redis URL: expected %s://...", url->scheme);
    if (url->user && !url->password)
        return convo__error(err, CONVO_EINVAL, NULL, "redis URL: a user needs a password");
    if (url->password && !(b->password = strdup(url->password)))
        return convo__rd_oom(err);
    if (url->user && *url->user && !(b->user = strdup(url->user)))
        return convo__rd_oom(err);
    if (strcmp(url->scheme, "redis+unix") == 0) {
        if ((url->host && *url->host) || url->port || !url->path || !*url->path)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "redis URL: expected redis+unix:///path/to/socket");
        if (!(b->socket_path = malloc(strlen(url->path) + 2)))
            return convo__rd_oom(err);
        sprintf(b->socket_path, "/%s", url->path);
        return 0;
    }
    b->port = url->port ? url->port : 6379;
    if (strcmp(url->scheme, "redis+cluster") == 0) {
        /* the seed list; "h:p,h:p" stays whole in url->host */
        const char *h = url->host && *url->host ? url->host : "127.0.0.1";
        if (!(b->host = malloc(strlen(h) + 8)))
            return convo__rd_oom(err);
        if (url->port)
            sprintf(b->host, "%s:%d", h, url->port);
        else
            strcpy(b->host, h);
        if (url->path && *url->path && strcmp(url->path, "0") != 0)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "redis+cluster URL: a cluster has only database 0");
        return 0;
    }
    if (!(b->host = strdup(url->host && *url->host ? url->host : "127.0.0.1")))
        return convo__rd_oom(err);
    if (url->path && *url->path)
        return parse_int("the database (path)", url->path, 0, INT_MAX, db, err);
    return 0;
}

static int parse_params(convo_backend *b, convo_url *url, convo_error *err, long long *pool)
{
    long long db = -1, qdb = -1, ct = DEFAULT_TIMEOUT_MS, t = DEFAULT_TIMEOUT_MS;
    int64_t ttl = 0;
    int rc = parse_location(b, url, &db, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "db", 0, INT_MAX, &qdb, err);
    if (rc == 0 && db >= 0 && qdb >= 0)
        rc = convo__error(err, CONVO_EINVAL, NULL, "redis URL: database given twice");
    if (rc == 0)
        rc = convo__url_take_ttl(url, &ttl, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "connect_timeout", 0, INT_MAX, &ct, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "timeout", 0, INT_MAX, &t, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "pool", 1, 1024, pool, err);
    long long wait = 0, wait_t = 1000;
    if (rc == 0)
        rc = convo__url_take_int(url, "wait", 0, 64, &wait, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "wait_timeout", 1, INT_MAX, &wait_t, err);
    if (rc == 0 && wait > 0 && t > 0 && wait_t >= t)
        rc = convo__error(err, CONVO_EINVAL, NULL,
                          "redis URL: wait_timeout must be shorter than timeout");
    if (rc == 0 && qdb > 0 && strcmp(url->scheme, "redis+cluster") == 0)
        rc = convo__error(err, CONVO_EINVAL, NULL,
                          "redis+cluster URL: a cluster has only database 0");
    long long guess = 1; /* a page's batch sends the rows of last time's candidates (rows.c) */
    if (rc == 0)
        rc = convo__url_take_int(url, "page_guess", 0, 1, &guess, err);
    long long beside = 1; /* cluster: an append's :r entries beside its script (beside.c) */
    if (rc == 0)
        rc = convo__url_take_int(url, "index_beside", 0, 1, &beside, err);
    b->wait_replicas = (int)wait;
    b->wait_timeout_ms = (int)wait_t;
    if (rc != 0)
        return rc;
    if (guess && !(b->guess = convo__rd_guess_new()))
        return convo__rd_oom(err);
    if (beside && strcmp(url->scheme, "redis+cluster") == 0 &&
        !(b->beside = convo__rd_beside_new()))
        return convo__rd_oom(err);
    char *prefix = convo__url_take(url, "prefix");
    b->prefix = prefix ? prefix : strdup(DEFAULT_PREFIX);
    if (!b->prefix)
        return convo__rd_oom(err);
    if ((rc = check_prefix(b->prefix, err)) != 0 || (rc = convo__url_reject_rest(url, err)) != 0)
        return rc;
    b->db = (int)(db >= 0 ? db : qdb >= 0 ? qdb : 0);
    b->ttl_ms = ttl * 1000;
    b->connect_timeout_ms = (int)ct;
    b->timeout_ms = (int)t;
    if (!(b->index_key = malloc(strlen(b->prefix) + 16)) ||
        !(b->store_key = malloc(strlen(b->prefix) + 16)))
        return convo__rd_oom(err);
    sprintf(b->index_key, "%s:threads", b->prefix);
    sprintf(b->store_key, "%s:store", b->prefix);
    return 0;
}

static int cluster_open(convo_backend *b, convo_error *err)
{
    rcl_config cfg = {.hosts = b->host,
                      .prefix = b->prefix,
                      .redacted = b->redacted,
                      .connect_timeout_ms = b->connect_timeout_ms,
                      .timeout_ms = b->timeout_ms,
                      .wait_replicas = b->wait_replicas,
                      .wait_timeout_ms = b->wait_timeout_ms,
                      .setup = convo__rd_node_setup,
                      .setup_ctx = b};
    return convo__rcl_new(&b->cluster, &cfg, err);
}

static int cluster_ping(convo_backend *b, rconn *c, convo_error *err)
{
    cmd ping = {0};
    redisReply *r = NULL;
    convo__rd_cmd_str(&ping, "PING");
    int rc = convo__rd_pipeline(b, c, &ping, 1, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    freeReplyObject(r);
    convo__rd_cmd_free(&ping);
    return rc;
}

static void rd_close(convo_backend *b)
{
    if (!b)
        return;
    convo__pool_free(b->pool);
    convo__rcl_free(b->cluster);
    free(b->host);
    free(b->socket_path);
    free(b->user);
    free(b->password);
    free(b->redacted);
    free(b->prefix);
    free(b->index_key);
    free(b->store_key);
    convo__rd_ix_free(b);
    convo__rd_guess_free(b->guess);
    convo__rd_beside_free(b->beside);
    free(b);
}

static int rd_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                   convo_error *err)
{
    if (strcmp(url->scheme, "rediss") == 0)
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "rediss: (TLS) is not supported: this build's hiredis has no TLS "
                            "support; use redis:// through a TLS tunnel");
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return convo__rd_oom(err);
    b->limits = *limits;
    atomic_init(&b->next_gen, 1);
    for (size_t i = 0; i < RECENT_SLOTS; i++) {
        atomic_init(&b->recent[i], 0);
        atomic_init(&b->moved[i], 0);
    }
    b->moved_epoch = convo__now_micros() - 1024; /* a time moved now is not 0 */
    atomic_init(&b->stale_below, 0);
    atomic_init(&b->order_hint, 0);
    long long pool = DEFAULT_POOL;
    int rc = (b->redacted = strdup(url->redacted)) ? parse_params(b, url, err, &pool)
                                                   : convo__rd_oom(err);
    if (rc == 0 && strcmp(url->scheme, "redis+cluster") == 0)
        rc = cluster_open(b, err);
    if (rc == 0 && convo__pool_new(&b->pool, (size_t)pool, &convo__rd_pool_ops, b) != 0)
        rc = convo__rd_oom(err);
    /* connect now: a wrong host or password is reported by open, and the SHAs are set */
    rconn *c;
    if (rc == 0 && (rc = convo__rd_acquire(b, &c, err)) == 0) {
        if (b->cluster) /* a first node connection: the map, the SHAs */
            rc = cluster_ping(b, c, err);
        int reindex = 0;
        if (rc == 0)
            rc = convo__rd_ix_open(b, c, &reindex, err);
        if (rc == 0)
            rc = convo__rd_layout_migrate(b, c, reindex, err);
        convo__rd_release(b, c);
    }
    if (rc != 0) {
        rd_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

/* ---- the driver ---- */

static const char *const rd_schemes[] = {"redis", "redis+unix", "rediss", "redis+cluster", NULL};

const convo_driver convo_driver_redis = {
    .version = CONVO_DRIVER_VERSION,
    .name = "redis",
    .schemes = rd_schemes,
    .open = rd_open,
    .close = rd_close,
    .append = convo__rd_append,
    .load = convo__rd_load,
    .save_extra = convo__rd_save_extra,
    .thread_delete = convo__rd_thread_delete,
    .thread_list = convo__rd_thread_list,
    .thread_fork = convo__rd_thread_fork,
    .checkpoint_put = convo__rd_checkpoint_put,
    .checkpoint_put_writes = convo__rd_checkpoint_put_writes,
    .checkpoint_get = convo__rd_checkpoint_get,
    .checkpoint_list = convo__rd_checkpoint_list,
    .checkpoint_prune = convo__rd_checkpoint_prune,
    .checkpoint_delete = convo__rd_checkpoint_delete,
    .thread_copy = convo__rd_thread_copy,
    .bench_raw = convo__rd_bench_raw,
    .stored_bytes = convo__rd_stored_bytes,
    .thread_import = convo__rd_thread_import,
    .sweep = convo__rd_sweep,
    .checkpoint_put_log = convo__rd_checkpoint_put_log,
    .checkpoint_put_refs = convo__rd_checkpoint_put_refs,
    .replace_tail = convo__rd_replace_tail,
    .thread_list_ex = convo__rd_thread_list_ex,
};
