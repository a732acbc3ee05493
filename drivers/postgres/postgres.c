/* postgres.c — the PostgreSQL driver (libpq): threads, messages, idempotency
 * keys and checkpoints in one schema, migrated forward on open. Every call is
 * one statement and one round trip; a write locks its thread's row first and,
 * with ttl=S, gives the thread a deadline after which it is gone. This file:
 * the driver table, open and close, the URL's parameters. The others:
 * conn.c (connections, errors, statements), schema.c (migrations), threads.c,
 * index.c (the thread index), checkpoints.c, maint.c (import, sweep, bench),
 * values.c (binary values), and
 * the SQL, one statement or migration per .sql file (docs/postgres.md). */
#include "config.h"
#include "pg_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SCHEMA "convo"
#define DEFAULT_POOL 4
#define MAX_POOL 100

/* /^[a-z_][a-z0-9_]{0,62}$/, not pg_*: safe to quote and use as is. */
static int valid_schema(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 63 || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return strncmp(s, "pg_", 3) != 0;
}

static int take_params(convo_backend *b, convo_url *url, convo_error *err)
{
    char *schema = convo__url_take(url, "schema");
    long long size = DEFAULT_POOL;
    int64_t seconds = 0;
    int rc = convo__url_take_int(url, "pool", 1, MAX_POOL, &size, err);
    if (rc == 0)
        rc = convo__url_take_ttl(url, &seconds, err);
    if (rc == 0 && schema && !valid_schema(schema))
        rc = convo__error(err, CONVO_EINVAL, NULL,
                          "postgres: schema must match [a-z_][a-z0-9_]{0,62} and not start "
                          "with pg_");
    snprintf(b->schema, sizeof b->schema, "%s", rc == 0 && schema ? schema : DEFAULT_SCHEMA);
    put64(b->ttl_interval, (uint64_t)seconds * 1000000);
    b->ttl = seconds > 0 ? b->ttl_interval : NULL;
    free(schema);
    snprintf(b->qschema, sizeof b->qschema, "\"%s\"", b->schema);
    if (rc == 0 && convo__pool_new(&b->pool, (size_t)size, &convo__pg_pool_ops, b) != 0)
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    return rc;
}

/* Whatever is left must be a libpq connection option ("ssl" is libpq's
 * URI alias for sslmode=require). */
static int check_libpq_params(const convo_url *url, convo_error *err)
{
    PQconninfoOption *defaults = PQconndefaults();
    if (!defaults)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < url->nparams && rc == 0; i++) {
        const char *key = url->params[i].key;
        int known = strcmp(key, "ssl") == 0;
        for (PQconninfoOption *o = defaults; o->keyword && !known; o++)
            known = strcmp(o->keyword, key) == 0;
        if (!known)
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "unknown URL parameter '%s' for %s: (neither convo's schema, "
                              "pool, ttl nor a libpq connection option)",
                              key, url->scheme);
    }
    PQconninfoFree(defaults);
    return rc;
}

static void pg_close(convo_backend *b)
{
    if (!b)
        return;
    convo__pool_free(b->pool);
    convo__pg_index_close(b);
    convo__pg_names_free(b);
    pthread_mutex_destroy(&b->index_lock);
    for (int i = 0; i < ST_COUNT; i++)
        free(b->sql[i]);
    free(b->conninfo);
    free(b);
}

/* A URI libpq cannot read is CONVO_EINVAL, found before connecting. */
static int check_uri(const convo_backend *b, convo_error *err)
{
    char *why = NULL;
    PQconninfoOption *parsed = PQconninfoParse(b->conninfo, &why);
    if (parsed) {
        PQconninfoFree(parsed);
        return 0;
    }
    int code = why ? CONVO_EINVAL : CONVO_ENOMEM;
    code = convo__error(err, code, NULL, "postgres: %s", why ? why : "out of memory");
    PQfreemem(why);
    return code;
}

static int setup(convo_backend *b, convo_url *url, convo_error *err)
{
    if (strncmp(url->rest, "//", 2) != 0)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "postgres: expected %s://[user[:password]@]host[:port]/database",
                            url->scheme);
    int rc = take_params(b, url, err);
    if (rc == 0)
        rc = check_libpq_params(url, err);
    if (rc != 0)
        return rc;
    if (!(b->conninfo = convo__url_rebuild(url)))
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    if ((rc = check_uri(b, err)) != 0)
        return rc;
    if (convo__pg_statements_init(b) != 0 || convo__pg_names_init(b) != 0)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    return 0;
}

static int pg_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                   convo_error *err)
{
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    b->limits = *limits;
    pthread_mutex_init(&b->index_lock, NULL);
    b->seg_rows = PG_SEGMENT_ROWS;
    b->seg_hot = PG_SEGMENT_HOT;
    int rc = setup(b, url, err);
    if (rc == 0)
        rc = convo__pg_migrate(b, err);
    if (rc == 0)
        rc = convo__pg_expiry_open(b, err);
    if (rc == 0)
        rc = convo__pg_index_open(b, err);
    if (rc != 0) {
        pg_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

static const char *const pg_schemes[] = {"postgres", "postgresql", NULL};

const convo_driver convo_driver_postgres = {
    .version = CONVO_DRIVER_VERSION,
    .name = "postgres",
    .schemes = pg_schemes,
    .open = pg_open,
    .close = pg_close,
    .append = convo__pg_append,
    .load = convo__pg_load,
    .save_extra = convo__pg_save_extra,
    .thread_delete = convo__pg_thread_delete,
    .thread_list = convo__pg_thread_list,
    .thread_fork = convo__pg_thread_fork,
    .checkpoint_put = convo__pg_checkpoint_put,
    .checkpoint_put_writes = convo__pg_checkpoint_put_writes,
    .checkpoint_get = convo__pg_checkpoint_get,
    .checkpoint_list = convo__pg_checkpoint_list,
    .checkpoint_prune = convo__pg_checkpoint_prune,
    .checkpoint_delete = convo__pg_checkpoint_delete,
    .thread_copy = convo__pg_thread_copy,
    .bench_raw = convo__pg_bench_raw,
    .stored_bytes = convo__pg_stored_bytes,
    .thread_import = convo__pg_thread_import,
    .sweep = convo__pg_sweep,
    .checkpoint_put_log = convo__pg_checkpoint_put_log,
    .checkpoint_put_refs = convo__pg_checkpoint_put_refs,
    .replace_tail = convo__pg_replace_tail,
    .thread_list_ex = convo__pg_thread_list_ex,
};
