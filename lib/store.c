/* store.c — the public calls: open a store by URL, validate every input, then
 * hand it to the driver. Nothing reaches a driver unchecked. */
#include "internal.h"
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const char *const known_schemes[] = {"sqlite", "redis", "rediss", "redis+unix",
                                            "postgres", "postgresql", "mongodb",
                                            "mongodb+srv", NULL};

static void free_roles(char **roles)
{
    if (!roles)
        return;
    for (char **r = roles; *r; r++)
        free(*r);
    free(roles);
}

static char **copy_roles(const char *const *roles)
{
    size_t n = 0;
    while (roles[n])
        n++;
    char **copy = calloc(n + 1, sizeof *copy);
    for (size_t i = 0; copy && i < n; i++) {
        if (!(copy[i] = strdup(roles[i]))) {
            free_roles(copy);
            return NULL;
        }
    }
    return copy;
}

static size_t or_default(size_t v, size_t def)
{
    return v ? v : def;
}

/* jansson seeds its hash function lazily; doing it once here keeps threads
 * that validate messages concurrently from racing on that first call. */
static void seed_json(void)
{
    json_object_seed(0);
}

int convo_open(convo_store **out, const char *url, convo_error *err)
{
    return convo_open_ex(out, url, NULL, err);
}

int convo_open_ex(convo_store **out, const char *url_text, const convo_store_opts *opts,
                  convo_error *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, seed_json);
    convo__error_clear(err);
    if (!out)
        return convo__error(err, CONVO_EINVAL, NULL, "out is NULL");
    *out = NULL;
    if (opts && (opts->version < 1 || opts->version > CONVO_STORE_OPTS_VERSION))
        return convo__error(err, CONVO_EINVAL, NULL, "unsupported convo_store_opts version %u",
                            opts->version);
    convo_url *url;
    int rc = convo__url_parse(&url, url_text, err);
    if (rc != 0)
        return rc;
    const convo_driver *driver = convo__driver_find(url->scheme);
    if (!driver) {
        for (const char *const *k = known_schemes; *k; k++)
            if (strcmp(*k, url->scheme) == 0) {
                rc = convo__error(err, CONVO_ENOTSUP, NULL,
                                  "this libconvo was built without the driver for %s:",
                                  url->scheme);
                convo__url_free(url);
                return rc;
            }
        rc = convo__error(err, CONVO_EINVAL, NULL, "unknown URL scheme '%s'", url->scheme);
        convo__url_free(url);
        return rc;
    }
    if (driver->version < 1 || driver->version > CONVO_DRIVER_VERSION) {
        convo__url_free(url);
        return convo__error(err, CONVO_ENOTSUP, NULL, "driver %s has unsupported version %u",
                            driver->name, driver->version);
    }
    convo_wait_hooks wait = {NULL, NULL};
    if (opts && opts->version >= 3) {
        wait.enter = opts->wait_enter;
        wait.leave = opts->wait_leave;
    }
    if (!wait.enter != !wait.leave) {
        convo__url_free(url);
        return convo__error(err, CONVO_EINVAL, NULL,
                            "wait_enter and wait_leave are set together or not at all");
    }
    convo_store *s = calloc(1, sizeof *s);
    if (!s) {
        convo__url_free(url);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    s->driver = driver;
    s->limits.wait = wait;
    s->limits.max_message_bytes =
        or_default(opts ? opts->max_message_bytes : 0, CONVO_DEFAULT_MAX_MESSAGE_BYTES);
    s->limits.max_batch_messages =
        or_default(opts ? opts->max_batch_messages : 0, CONVO_DEFAULT_MAX_BATCH_MESSAGES);
    s->limits.max_extra_bytes =
        or_default(opts ? opts->max_extra_bytes : 0, CONVO_DEFAULT_MAX_EXTRA_BYTES);
    s->limits.max_checkpoint_bytes =
        or_default(opts ? opts->max_checkpoint_bytes : 0, CONVO_DEFAULT_MAX_CHECKPOINT_BYTES);
    if ((opts && opts->roles && !(s->roles = copy_roles(opts->roles))) ||
        !(s->secrets = convo__url_secrets(url_text))) {
        convo__url_free(url);
        free_roles(s->roles);
        free(s);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    rc = convo__index_keys_copy(opts && opts->version >= 2 ? opts->indexed_keys : NULL,
                                &s->indexed_keys, err);
    s->limits.indexed_keys = s->indexed_keys;
    if (rc == 0)
        rc = convo__scrubbed(s, driver->open(&s->backend, url, &s->limits, err), err);
    convo__url_free(url);
    if (rc != 0) {
        free_roles(s->roles);
        convo__index_keys_free(s->indexed_keys);
        convo__secrets_free(s->secrets);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void convo_close(convo_store *s)
{
    if (!s)
        return;
    s->driver->close(s->backend);
    free_roles(s->roles);
    convo__index_keys_free(s->indexed_keys);
    convo__secrets_free(s->secrets);
    free(s);
}

int convo__scrubbed(const convo_store *s, int rc, convo_error *err)
{
    if (rc != 0 && err) {
        convo__scrub(err->message, sizeof err->message, s->secrets);
        convo__scrub(err->backend_code, sizeof err->backend_code, s->secrets);
    }
    return rc;
}

const char *convo_store_driver(const convo_store *s)
{
    return s ? s->driver->name : NULL;
}

#define CHECK_STORE(s, err)                                                                  \
    do {                                                                                     \
        convo__error_clear(err);                                                             \
        if (!(s))                                                                            \
            return convo__error(err, CONVO_EINVAL, NULL, "store is NULL");                   \
    } while (0)

/* A replayed idempotency key must name the same batch: the messages it stored
 * (immutable, byte for byte) are compared with this one. Another batch under a
 * used key is refused, as Stripe-style idempotency does, instead of returning
 * the first result and dropping it. No hash is stored with the key: the stored
 * messages are the batch's own fingerprint, on every driver and layout. */
int convo__check_replay(convo_store *s, const char *thread_id, const convo_message_in *in,
                        size_t n, const char *key, int64_t first_seq, size_t count,
                        convo_error *err)
{
    convo_append_result rr = {first_seq, count, 1};
    const convo_append_result *r = &rr;
    if (n == 0 && count == 0)
        return 0; /* a replayed pop: nothing to compare (limit 0 would load all) */
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.from_seq = r->first_seq;
    lo.limit = (int64_t)r->count;
    lo.with_extra = 0;
    convo_history *h;
    int rc = convo_load(s, thread_id, &lo, &h, err);
    if (rc != 0)
        return rc;
    int same = convo_history_count(h) == n && r->count == n;
    for (size_t i = 0; same && i < n; i++) {
        size_t len;
        const char *m = convo_history_message(h, i, &len);
        same = len == in[i].len && memcmp(m, in[i].bytes, len) == 0;
    }
    convo_history_free(h);
    if (same)
        return 0;
    return convo__error(err, CONVO_ECONFLICT, NULL, "idempotency key %s was used for another "
                        "batch (seq %lld, %zu messages): this one is not stored",
                        key, (long long)r->first_seq, r->count);
}

/* Validates a batch as convo_append does (JSON object, role, size, allowed
 * roles) into *out for the driver; free it with convo__messages_free. */
int convo__messages_in(const convo_store *s, const char *const *messages, const size_t *lengths,
                       size_t n, convo_message_in **out, convo_error *err)
{
    *out = NULL;
    if (n == 0 || !messages)
        return convo__error(err, CONVO_EINVAL, NULL, "no messages to append");
    if (n > s->limits.max_batch_messages)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "batch of %zu messages exceeds the limit of %zu", n,
                            s->limits.max_batch_messages);
    convo_message_in *in = calloc(n, sizeof *in);
    if (!in)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        in[i].bytes = messages[i];
        in[i].len = lengths ? lengths[i] : (messages[i] ? strlen(messages[i]) : 0);
        char *role;
        rc = convo__check_message(in[i].bytes, in[i].len, &s->limits, s->roles, &role, err);
        in[i].role = role;
        if (rc != 0 && err && n > 1) {
            /* say which message of the batch was rejected */
            char m[sizeof err->message];
            int k = snprintf(m, sizeof m, "message %zu: ", i);
            if (k > 0 && (size_t)k < sizeof m) {
                snprintf(m + k, sizeof m - (size_t)k, "%.*s", (int)(sizeof m - (size_t)k - 1),
                         err->message);
                memcpy(err->message, m, sizeof m);
            }
        }
    }
    if (rc != 0) {
        convo__messages_free(in, n);
        return rc;
    }
    *out = in;
    return 0;
}

void convo__messages_free(convo_message_in *in, size_t n)
{
    for (size_t i = 0; in && i < n; i++)
        free((char *)in[i].role);
    free(in);
}

int convo_append(convo_store *s, const char *thread_id, const char *const *messages,
                 const size_t *lengths, size_t n, const convo_append_opts *opts,
                 convo_append_result *res, convo_error *err)
{
    CHECK_STORE(s, err);
    int rc = convo__check_thread_id(thread_id, err);
    if (rc != 0)
        return rc;
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    if (opts) {
        if (opts->version < 1 || opts->version > CONVO_APPEND_OPTS_VERSION)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "unsupported convo_append_opts version %u", opts->version);
        /* a version 1 caller's struct ends before expected_generation */
        o.idempotency_key = opts->idempotency_key;
        o.expected_length = opts->expected_length;
        if (opts->version >= 2)
            o.expected_generation = opts->expected_generation;
    }
    if (o.expected_length < -1)
        return convo__error(err, CONVO_EINVAL, NULL, "expected length must be >= 0 or -1");
    if (o.expected_generation < -1)
        return convo__error(err, CONVO_EINVAL, NULL, "expected generation must be >= 0 or -1");
    if ((rc = convo__check_idempotency_key(o.idempotency_key, err)) != 0)
        return rc;
    convo_message_in *in;
    if ((rc = convo__messages_in(s, messages, lengths, n, &in, err)) != 0)
        return rc;
    convo_append_result r = {0, 0, 0};
    rc = convo__scrubbed(s, s->driver->append(s->backend, thread_id, in, n, &o, &r, err), err);
    if (rc == 0 && r.replayed)
        rc = convo__check_replay(s, thread_id, in, n, o.idempotency_key, r.first_seq, r.count,
                                 err);
    convo__messages_free(in, n);
    if (rc == 0 && res)
        *res = r;
    return rc;
}

int convo_load(convo_store *s, const char *thread_id, const convo_load_opts *opts,
               convo_history **out, convo_error *err)
{
    CHECK_STORE(s, err);
    if (!out)
        return convo__error(err, CONVO_EINVAL, NULL, "out is NULL");
    *out = NULL;
    int rc = convo__check_thread_id(thread_id, err);
    if (rc != 0)
        return rc;
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    if (opts) {
        if (opts->version < 1 || opts->version > CONVO_LOAD_OPTS_VERSION)
            return convo__error(err, CONVO_EINVAL, NULL, "unsupported convo_load_opts version %u",
                                opts->version);
        o = *opts;
    }
    if (o.from_seq < 0 || o.limit < 0 || o.tail < 0)
        return convo__error(err, CONVO_EINVAL, NULL, "from, limit and tail must not be negative");
    return convo__scrubbed(s, s->driver->load(s->backend, thread_id, &o, out, err), err);
}

int convo_save_extra(convo_store *s, const char *thread_id, const char *patch_json,
                     convo_error *err)
{
    CHECK_STORE(s, err);
    int rc = convo__check_thread_id(thread_id, err);
    if (rc != 0)
        return rc;
    char *compact;
    void *obj;
    if ((rc = convo__check_extra_patch(patch_json, &s->limits, &compact, &obj, err)) != 0)
        return rc;
    rc = convo__scrubbed(s, s->driver->save_extra(s->backend, thread_id, compact, obj, err), err);
    free(compact);
    json_decref((json_t *)obj);
    return rc;
}

int convo_thread_delete(convo_store *s, const char *thread_id, convo_error *err)
{
    CHECK_STORE(s, err);
    int rc = convo__check_thread_id(thread_id, err);
    return rc ? rc : convo__scrubbed(s, s->driver->thread_delete(s->backend, thread_id, err), err);
}

int convo_thread_list(convo_store *s, const char *after, size_t limit, convo_thread_page **out,
                      convo_error *err)
{
    CHECK_STORE(s, err);
    if (!out)
        return convo__error(err, CONVO_EINVAL, NULL, "out is NULL");
    *out = NULL;
    if (after && *after == '\0')
        after = NULL;
    if (limit == 0)
        limit = 100;
    if (limit > 10000)
        return convo__error(err, CONVO_EINVAL, NULL, "thread list limit must be at most 10000");
    return convo__scrubbed(s, s->driver->thread_list(s->backend, after, limit, out, err), err);
}

int convo_thread_fork(convo_store *s, const char *src, const char *dst, int64_t upto,
                      convo_error *err)
{
    return convo_thread_fork_ex(s, src, dst, upto, NULL, err);
}

int convo_thread_fork_ex(convo_store *s, const char *src, const char *dst, int64_t upto,
                         const convo_fork_opts *opts, convo_error *err)
{
    CHECK_STORE(s, err);
    convo_fork_opts o = CONVO_FORK_OPTS_INIT;
    if (opts) {
        if (opts->version < 1 || opts->version > CONVO_FORK_OPTS_VERSION)
            return convo__error(err, CONVO_EINVAL, NULL, "unsupported convo_fork_opts version %u",
                                opts->version);
        /* A version 1 caller's struct ends before with_checkpoints. */
        memcpy(&o, opts, opts->version >= 2 ? sizeof o
                                            : offsetof(convo_fork_opts, with_checkpoints));
        o.version = CONVO_FORK_OPTS_VERSION;
    }
    if (o.with_checkpoints != 0 && o.with_checkpoints != 1)
        return convo__error(err, CONVO_EINVAL, NULL, "with_checkpoints must be 0 or 1");
    if (o.expected_generation < -1)
        return convo__error(err, CONVO_EINVAL, NULL, "expected generation must be >= 0 or -1");
    int rc = convo__check_thread_id(src, err);
    if (rc == 0)
        rc = convo__check_thread_id(dst, err);
    if (rc != 0)
        return rc;
    if (strcmp(src, dst) == 0)
        return convo__error(err, CONVO_EINVAL, NULL, "fork source and destination are the same");
    if (upto < -1)
        return convo__error(err, CONVO_EINVAL, NULL, "fork upto must be >= 0 or -1 for all");
    if (o.with_checkpoints)
        return convo__thread_copy(s, src, dst, upto, o.expected_generation, err);
    return convo__scrubbed(s, s->driver->thread_fork(s->backend, src, dst, upto,
                                                              o.expected_generation, err),
                           err);
}

int convo_bench_raw(convo_store *s, const char *payload, size_t payload_len, size_t n,
                    double *seconds, convo_error *err)
{
    CHECK_STORE(s, err);
    if (!payload || !seconds || n == 0)
        return convo__error(err, CONVO_EINVAL, NULL, "payload, seconds and n are required");
    if (s->driver->version < 2 || !s->driver->bench_raw)
        return convo__error(err, CONVO_ENOTSUP, NULL, "the %s driver has no raw primitive",
                            s->driver->name);
    return convo__scrubbed(s, s->driver->bench_raw(s->backend, payload, payload_len, n, seconds, err),
                           err);
}

int convo_store_bytes(convo_store *s, int64_t *bytes, convo_error *err)
{
    CHECK_STORE(s, err);
    if (!bytes)
        return convo__error(err, CONVO_EINVAL, NULL, "bytes is NULL");
    if (s->driver->version < 2 || !s->driver->stored_bytes)
        return convo__error(err, CONVO_ENOTSUP, NULL, "the %s driver cannot report its size",
                            s->driver->name);
    return convo__scrubbed(s, s->driver->stored_bytes(s->backend, bytes, err), err);
}

int convo_sweep(convo_store *s, uint64_t *removed, convo_error *err)
{
    CHECK_STORE(s, err);
    uint64_t n = 0;
    /* bench_raw, stored_bytes and sweep are version 2 members: a version 1
     * table ends before them, so reading them would read past its end. */
    int rc = s->driver->version >= 2 && s->driver->sweep
                 ? convo__scrubbed(s, s->driver->sweep(s->backend, &n, err), err)
                 : 0;
    if (removed)
        *removed = rc == 0 ? n : 0;
    return rc;
}
