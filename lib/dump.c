/* dump.c — convo_export / convo_import / convo_copy: threads, messages, extra,
 * checkpoints and pending writes as a stream of msgpack records (format in
 * docs/dump-format.md). Memory stays bounded: messages move in chunks. */
#include "internal.h"
#include <jansson.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DUMP_MAGIC "convo-dump"
#define DUMP_VERSION 1
#define CHUNK_MESSAGES 1000
#define FLUSH_BYTES (256 * 1024)
#define RECORD_BYTES ((size_t)8 << 20)

/* ---------------------------------------------------------------- export */

typedef struct exporter {
    convo_store *s;
    msgpack_sbuffer buf; /* framed records waiting to be written */
    msgpack_packer out;
    msgpack_sbuffer rec; /* the record being built */
    msgpack_packer pk;
    int nomem;           /* a buffer could not grow: the record is incomplete */
    long fail_at;        /* test hook: the allocation that fails (0 = none) */
    convo_write_fn write;
    void *ctx;
    const convo_dump_opts *opts;
    convo_dump_stats *stats;
    convo_error *err;
} exporter;

/* CONVO_TEST_EXPORT_NOMEM=N (tests only, docs/testing.md) makes the N-th
 * allocation an export makes fail, so that every out-of-memory path is taken. */
static int alloc_fails(exporter *x)
{
    return x->fail_at > 0 && --x->fail_at == 0;
}

static char *x_strdup(exporter *x, const char *s)
{
    return alloc_fails(x) ? NULL : strdup(s);
}

/* The packers write here; a failed growth is remembered and reported by
 * end_record, so that no pack call needs its own check. */
static int x_write(exporter *x, msgpack_sbuffer *sb, const char *data, size_t len)
{
    if (x->nomem || (sb->alloc - sb->size < len && alloc_fails(x)) ||
        msgpack_sbuffer_write(sb, data, len) != 0) {
        x->nomem = 1;
        return -1;
    }
    return 0;
}

static int rec_write(void *data, const char *buf, size_t len)
{
    exporter *x = data;
    return x_write(x, &x->rec, buf, len);
}

static int out_write(void *data, const char *buf, size_t len)
{
    exporter *x = data;
    return x_write(x, &x->buf, buf, len);
}

/* FNV-1a, 64 bits: each frame carries it so that a flipped byte is caught. */
static uint64_t fnv1a(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static int out_of_memory(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

/* Frames the record just packed: [bin(record), fnv1a(record)]. */
static int end_record(exporter *x)
{
    if (!x->nomem) {
        msgpack_pack_array(&x->out, 2);
        convo__pack_bin(&x->out, x->rec.data, x->rec.size);
        msgpack_pack_uint64(&x->out, fnv1a(x->rec.data, x->rec.size));
    }
    msgpack_sbuffer_clear(&x->rec);
    return x->nomem ? out_of_memory(x->err) : 0;
}

static int flush(exporter *x, int force)
{
    if (x->buf.size == 0 || (!force && x->buf.size < FLUSH_BYTES))
        return 0;
    if (x->write(x->ctx, x->buf.data, x->buf.size) != 0)
        return convo__error(x->err, CONVO_EIO, NULL, "writing the dump failed");
    x->stats->bytes += x->buf.size;
    msgpack_sbuffer_clear(&x->buf);
    return 0;
}

static void report(const convo_dump_opts *opts, const convo_dump_stats *stats)
{
    if (opts && opts->progress)
        opts->progress(opts->progress_ctx, stats);
}

/* What identifies one life of a thread: its first message (its time and bytes).
 * A thread deleted and created again under the same id has another one. */
typedef struct thread_mark {
    int64_t length; /* the thread's length when its export began */
    int64_t first_at;
    uint64_t first_hash;
} thread_mark;

static void mark_of(const convo_history *h, thread_mark *m)
{
    m->length = convo_history_length(h);
    m->first_at = 0;
    m->first_hash = 0;
    if (convo_history_count(h) > 0 && convo_history_seq(h, 0) == 0) {
        size_t len;
        const char *b = convo_history_message(h, 0, &len);
        m->first_at = convo_history_created_at(h, 0);
        m->first_hash = fnv1a(b, len);
    }
}

static int changed(exporter *x, const char *id)
{
    convo__error_clear(x->err);
    return convo__error(x->err, CONVO_ECONFLICT, NULL,
                        "thread %s was deleted or replaced while it was exported; the dump is "
                        "incomplete: export again", id);
}

/* CONVO_ECONFLICT unless thread id is still the life of it that the export
 * began with and still has at least its first `length` messages. */
static int check_same(exporter *x, const char *id, const thread_mark *m)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.with_extra = 0;
    lo.limit = 1;
    convo_history *h;
    int rc = convo_load(x->s, id, &lo, &h, x->err);
    if (rc == CONVO_ENOTFOUND)
        return changed(x, id);
    if (rc != 0)
        return rc;
    thread_mark now;
    mark_of(h, &now);
    convo_history_free(h);
    if (now.length < m->length || now.first_at != m->first_at || now.first_hash != m->first_hash)
        return changed(x, id);
    return 0;
}

/* Packs messages [from, from + count(h)) of h into records. */
static int pack_messages(exporter *x, const char *id, const convo_history *h, int64_t from)
{
    size_t n = convo_history_count(h);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        /* one record holds what fits in RECORD_BYTES (at least one message) */
        size_t k = 0, bytes = 0;
        while (i + k < n && (k == 0 || bytes < RECORD_BYTES)) {
            size_t len;
            convo_history_message(h, i + k, &len);
            bytes += len;
            k++;
        }
        msgpack_pack_array(&x->pk, 4);
        convo__pack_str(&x->pk, "messages");
        convo__pack_str(&x->pk, id);
        msgpack_pack_int64(&x->pk, from + (int64_t)i);
        msgpack_pack_array(&x->pk, k);
        for (size_t j = i; j < i + k; j++) {
            size_t len;
            const char *m = convo_history_message(h, j, &len);
            msgpack_pack_array(&x->pk, 3);
            msgpack_pack_int64(&x->pk, convo_history_created_at(h, j));
            convo__pack_str(&x->pk, convo_history_role(h, j));
            convo__pack_bin(&x->pk, m, len);
        }
        rc = end_record(x);
        i += k;
        if (rc == 0)
            rc = flush(x, 0);
    }
    x->stats->messages += n;
    if (rc == 0 && x->stats->messages % 10000 < n)
        report(x->opts, x->stats);
    return rc;
}

/* Messages [0, m->length): first holds the first chunk, loaded with the mark;
 * every later chunk is checked to come from the same life of the thread. */
static int export_messages(exporter *x, const char *id, const convo_history *first,
                           const thread_mark *m)
{
    int rc = pack_messages(x, id, first, 0);
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.with_extra = 0;
    for (int64_t from = (int64_t)convo_history_count(first); rc == 0 && from < m->length;) {
        convo_history *h;
        lo.from_seq = from;
        lo.limit = m->length - from < CHUNK_MESSAGES ? m->length - from : CHUNK_MESSAGES;
        rc = convo_load(x->s, id, &lo, &h, x->err);
        if (rc == CONVO_ENOTFOUND)
            return changed(x, id);
        if (rc != 0)
            return rc;
        if ((int64_t)convo_history_count(h) != lo.limit)
            rc = changed(x, id); /* it shrank: deleted, maybe created again */
        if (rc == 0)
            rc = check_same(x, id, m);
        if (rc == 0)
            rc = pack_messages(x, id, h, from);
        convo_history_free(h);
        from += lo.limit;
    }
    return rc;
}

typedef struct cp_key {
    char *ns, *id;
} cp_key;

static void free_keys(cp_key *keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(keys[i].ns);
        free(keys[i].id);
    }
    free(keys);
}

/* Appends the keys of set to *keys. */
static int add_keys(exporter *x, const convo_checkpoint_set *set, cp_key **keys, size_t *n)
{
    size_t got = convo_checkpoint_set_count(set);
    cp_key *grown = alloc_fails(x) ? NULL : realloc(*keys, (*n + got + 1) * sizeof **keys);
    if (!grown)
        return out_of_memory(x->err);
    *keys = grown;
    for (size_t i = 0; i < got; i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        cp_key k = {x_strdup(x, convo_checkpoint_ns(cp)), x_strdup(x, convo_checkpoint_id(cp))};
        if (!k.ns || !k.id) {
            free(k.ns);
            free(k.id);
            return out_of_memory(x->err);
        }
        (*keys)[(*n)++] = k;
    }
    return 0;
}

/* Every checkpoint key of the thread, newest first, paging with `before`. */
static int checkpoint_keys(exporter *x, const char *id, cp_key **out, size_t *count)
{
    cp_key *keys = NULL;
    size_t n = 0;
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = id;
    lo.limit = 256;
    int rc = 0;
    for (;;) {
        convo_checkpoint_set *set;
        lo.before = n ? keys[n - 1].id : NULL;
        rc = convo_checkpoint_list(x->s, &lo, &set, x->err);
        if (rc != 0)
            break;
        size_t got = convo_checkpoint_set_count(set);
        rc = add_keys(x, set, &keys, &n);
        convo_checkpoint_set_free(set);
        if (rc != 0 || got < lo.limit)
            break;
    }
    if (rc == CONVO_ENOTSUP) {
        convo__error_clear(x->err);
        rc = 0;
    }
    if (rc != 0) {
        free_keys(keys, n);
        keys = NULL;
        n = 0;
    }
    *out = keys;
    *count = n;
    return rc;
}

/* Whether the value of (ns, channel, version) goes into the stream here: the
 * first time it is met (seen holds those already written). -1 out of memory. */
static int first_value(exporter *x, json_t *seen, const char *ns, const char *ch,
                       const char *version)
{
    char *key = NULL;
    if (alloc_fails(x) || asprintf(&key, "%s\x1f%s\x1f%s", ns, ch, version) < 0)
        return -1;
    int first = !json_object_get(seen, key);
    if (first && (alloc_fails(x) || json_object_set_new(seen, key, json_true()) != 0))
        first = -1;
    free(key);
    return first;
}

static int export_checkpoint(exporter *x, const convo_checkpoint *cp, json_t *seen)
{
    msgpack_packer *pk = &x->pk;
    convo_blob body = convo_checkpoint_body(cp);
    msgpack_pack_array(pk, 12);
    convo__pack_str(pk, "checkpoint");
    convo__pack_str(pk, convo_checkpoint_thread_id(cp));
    convo__pack_str(pk, convo_checkpoint_ns(cp));
    convo__pack_str(pk, convo_checkpoint_id(cp));
    convo__pack_str(pk, convo_checkpoint_parent_id(cp));
    convo__pack_str(pk, convo_checkpoint_metadata(cp));
    convo__pack_str(pk, body.type);
    if (body.type)
        convo__pack_bin(pk, body.bytes, body.len);
    else
        msgpack_pack_nil(pk);
    msgpack_pack_int64(pk, convo_checkpoint_log_length(cp));
    msgpack_pack_int64(pk, convo_checkpoint_created_at(cp));
    size_t nc = convo_checkpoint_channel_count(cp);
    msgpack_pack_array(pk, nc);
    for (size_t i = 0; i < nc; i++) {
        const char *version;
        convo_blob v;
        const char *ch = convo_checkpoint_channel(cp, i, &version, &v);
        int first = v.type ? first_value(x, seen, convo_checkpoint_ns(cp), ch, version) : 0;
        if (first < 0)
            x->nomem = 1; /* a value left out would be lost: fail the record */
        msgpack_pack_array(pk, 4);
        convo__pack_str(pk, ch);
        convo__pack_str(pk, version);
        convo__pack_str(pk, first > 0 ? v.type : NULL);
        if (first > 0)
            convo__pack_bin(pk, v.bytes, v.len);
        else
            msgpack_pack_nil(pk);
    }
    size_t nw = convo_checkpoint_write_count(cp);
    msgpack_pack_array(pk, nw);
    for (size_t i = 0; i < nw; i++) {
        const char *path, *channel;
        int64_t idx;
        convo_blob v;
        const char *task = convo_checkpoint_write(cp, i, &path, &idx, &channel, &v);
        msgpack_pack_array(pk, 6);
        convo__pack_str(pk, task);
        convo__pack_str(pk, path);
        msgpack_pack_int64(pk, idx);
        convo__pack_str(pk, channel);
        convo__pack_str(pk, v.type);
        convo__pack_bin(pk, v.bytes, v.len);
    }
    int rc = end_record(x);
    if (rc == 0) {
        x->stats->checkpoints++;
        x->stats->writes += nw;
    }
    return rc;
}

/* The thread's checkpoints, oldest first (import keeps the order). One put
 * after the export began that refers to messages past m->length is left out:
 * the dump holds the thread as it was then. */
static int export_checkpoints(exporter *x, const char *id, const thread_mark *m,
                              uint64_t *count)
{
    cp_key *keys;
    size_t n;
    int rc = checkpoint_keys(x, id, &keys, &n);
    json_t *seen = rc == 0 && !alloc_fails(x) ? json_object() : NULL;
    if (rc == 0 && !seen)
        rc = out_of_memory(x->err);
    for (size_t i = n; rc == 0 && i-- > 0;) {
        convo_checkpoint *cp;
        rc = convo_checkpoint_get(x->s, id, keys[i].ns, keys[i].id, &cp, x->err);
        if (rc == CONVO_ENOTFOUND) { /* pruned meanwhile */
            convo__error_clear(x->err);
            rc = 0;
            continue;
        }
        if (rc != 0)
            break;
        if (convo_checkpoint_log_length(cp) <= m->length) {
            rc = export_checkpoint(x, cp, seen);
            (*count)++;
            if (rc == 0)
                rc = flush(x, 0);
        }
        convo_checkpoint_free(cp);
    }
    free_keys(keys, n);
    json_decref(seen);
    return rc;
}

/* CONVO_ENOTFOUND, with nothing written, when the thread does not exist. */
static int export_thread(exporter *x, const char *id)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.limit = CHUNK_MESSAGES;
    convo_history *h;
    int rc = convo_load(x->s, id, &lo, &h, x->err);
    if (rc != 0)
        return rc;
    thread_mark m;
    mark_of(h, &m);
    msgpack_pack_array(&x->pk, 3);
    convo__pack_str(&x->pk, "thread");
    convo__pack_str(&x->pk, id);
    convo__pack_str(&x->pk, convo_history_extra(h));
    rc = end_record(x);
    uint64_t before = x->stats->messages, checkpoints = 0;
    if (rc == 0)
        rc = export_messages(x, id, h, &m);
    convo_history_free(h);
    if (rc == 0)
        rc = export_checkpoints(x, id, &m, &checkpoints);
    if (rc == 0)
        rc = check_same(x, id, &m);
    if (rc != 0)
        return rc == CONVO_ENOTFOUND ? changed(x, id) : rc;
    msgpack_pack_array(&x->pk, 4);
    convo__pack_str(&x->pk, "thread-end");
    convo__pack_str(&x->pk, id);
    msgpack_pack_int64(&x->pk, (int64_t)(x->stats->messages - before));
    msgpack_pack_int64(&x->pk, (int64_t)checkpoints);
    if ((rc = end_record(x)) != 0)
        return rc;
    x->stats->threads++;
    report(x->opts, x->stats);
    return flush(x, 0);
}

static int export_all(exporter *x)
{
    char *after = NULL;
    int rc = 0;
    do {
        convo_thread_page *p;
        rc = convo_thread_list(x->s, after, 1000, &p, x->err);
        free(after);
        after = NULL;
        if (rc != 0)
            break;
        for (size_t i = 0; i < convo_thread_page_count(p) && rc == 0; i++) {
            rc = export_thread(x, convo_thread_page_id(p, i));
            if (rc == CONVO_ENOTFOUND) { /* deleted since it was listed: nothing written */
                convo__error_clear(x->err);
                rc = 0;
            }
        }
        if (rc == 0 && convo_thread_page_next(p) &&
            !(after = x_strdup(x, convo_thread_page_next(p))))
            rc = out_of_memory(x->err);
        convo_thread_page_free(p);
    } while (rc == 0 && after);
    free(after);
    return rc;
}

int convo_export(convo_store *s, const char *const *thread_ids, size_t n, convo_write_fn write,
                 void *write_ctx, const convo_dump_opts *opts, convo_dump_stats *stats,
                 convo_error *err)
{
    convo__error_clear(err);
    convo_dump_stats local = {0};
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    if (!s || !write)
        return convo__error(err, CONVO_EINVAL, NULL, "store and write function are required");
    const char *hook = getenv("CONVO_TEST_EXPORT_NOMEM");
    exporter x = {.s = s, .write = write, .ctx = write_ctx, .opts = opts, .stats = stats,
                  .err = err, .fail_at = hook ? atol(hook) : 0};
    msgpack_sbuffer_init(&x.buf);
    msgpack_packer_init(&x.out, &x, out_write);
    msgpack_sbuffer_init(&x.rec);
    msgpack_packer_init(&x.pk, &x, rec_write);
    msgpack_pack_array(&x.pk, 3);
    convo__pack_str(&x.pk, DUMP_MAGIC);
    msgpack_pack_int64(&x.pk, DUMP_VERSION);
    convo__pack_str(&x.pk, "convo " CONVO_VERSION);
    int rc = end_record(&x);
    if (rc == 0 && n == 0)
        rc = export_all(&x);
    json_t *named = n && rc == 0 ? json_object() : NULL;
    if (n && rc == 0 && !named)
        rc = out_of_memory(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = convo__check_thread_id(thread_ids[i], err);
        if (rc == 0 && json_object_get(named, thread_ids[i]))
            rc = convo__error(err, CONVO_EINVAL, NULL, "thread %s is named twice",
                              thread_ids[i]);
        if (rc == 0 && json_object_set_new(named, thread_ids[i], json_true()) != 0)
            rc = out_of_memory(err);
    }
    json_decref(named);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = export_thread(&x, thread_ids[i]);
    if (rc == 0) {
        msgpack_pack_array(&x.pk, 3);
        convo__pack_str(&x.pk, "end");
        msgpack_pack_int64(&x.pk, (int64_t)stats->threads);
        msgpack_pack_int64(&x.pk, (int64_t)stats->messages);
        rc = end_record(&x);
    }
    if (rc == 0)
        rc = flush(&x, 1);
    msgpack_sbuffer_destroy(&x.buf);
    msgpack_sbuffer_destroy(&x.rec);
    return rc;
}

/* ---------------------------------------------------------------- import */

typedef struct importer {
    convo_store *s;
    const convo_dump_opts *opts;
    convo_dump_stats *stats;
    convo_error *err;
    uint64_t offset; /* stream offset of the record being applied */
    char *thread;    /* the thread being imported, or NULL between threads */
    /* A thread the store does not have is restored under a staging id first and
     * made visible by one fork when its messages are in: it appears whole or not
     * at all, and a failed import never deletes what another writer stored. */
    char *staging;   /* the staging id while the thread is staged, else NULL */
    const char *target; /* where messages go: staging, or thread itself */
    int64_t next_seq;
    uint64_t thread_checkpoints;
    int ended;
    json_t *seen;    /* the ids of the threads met so far: a repeated one is refused */
} importer;

static int corrupt(importer *im, const char *what)
{
    return convo__error(im->err, CONVO_ECORRUPT, NULL, "corrupt dump at byte %llu: %s",
                        (unsigned long long)im->offset, what);
}

/* Field access with type checks; each returns 0 or -1 (integers:
 * convo__unpack_int, lib/pack.c). */
static int get_str(const msgpack_object *o, char **out)
{
    if (o->type == MSGPACK_OBJECT_NIL) {
        *out = NULL;
        return 0;
    }
    if (o->type != MSGPACK_OBJECT_STR)
        return -1;
    *out = strndup(o->via.str.ptr, o->via.str.size);
    /* a NUL inside a string would be silently cut: refuse it */
    return *out && strlen(*out) == o->via.str.size ? 0 : -1;
}

static const msgpack_object *field(const msgpack_object *rec, size_t i, msgpack_object_type t)
{
    if (rec->type != MSGPACK_OBJECT_ARRAY || i >= rec->via.array.size)
        return NULL;
    const msgpack_object *o = &rec->via.array.ptr[i];
    return o->type == t ? o : NULL;
}

static int is_tag(const msgpack_object *rec, const char *tag)
{
    const msgpack_object *o = field(rec, 0, MSGPACK_OBJECT_STR);
    return o && o->via.str.size == strlen(tag) && memcmp(o->via.str.ptr, tag, o->via.str.size) == 0;
}

static int same_thread(importer *im, const msgpack_object *rec)
{
    const msgpack_object *o = field(rec, 1, MSGPACK_OBJECT_STR);
    return im->thread && o && o->via.str.size == strlen(im->thread) &&
           memcmp(o->via.str.ptr, im->thread, o->via.str.size) == 0;
}

#define STAGING_PREFIX ".convo-import-"

static int new_staging_id(importer *im)
{
    static unsigned counter;
    struct {
        int64_t now;
        long pid;
        unsigned n;
        const void *im;
    } seed;
    memset(&seed, 0, sizeof seed); /* the padding is hashed too */
    seed.now = convo__now_micros();
    seed.pid = (long)getpid();
    seed.n = __atomic_fetch_add(&counter, 1, 0);
    seed.im = im;
    if (asprintf(&im->staging, STAGING_PREFIX "%016llx",
                 (unsigned long long)fnv1a(&seed, sizeof seed)) < 0) {
        im->staging = NULL;
        return convo__error(im->err, CONVO_ENOMEM, NULL, "out of memory");
    }
    return 0;
}

static int import_thread_start(importer *im, const msgpack_object *rec)
{
    char *id = NULL, *extra = NULL;
    if (im->thread)
        return corrupt(im, "a thread starts before the previous one ended");
    if (rec->via.array.size != 3 || get_str(&rec->via.array.ptr[1], &id) || !id ||
        get_str(&rec->via.array.ptr[2], &extra)) {
        free(id);
        free(extra);
        return corrupt(im, "malformed thread record");
    }
    int rc = convo__check_thread_id(id, im->err);
    if (rc == 0 && json_object_get(im->seen, id))
        rc = convo__error(im->err, CONVO_ECORRUPT, NULL, "corrupt dump at byte %llu: thread %s "
                          "appears twice", (unsigned long long)im->offset, id);
    if (rc == 0 && json_object_set_new(im->seen, id, json_true()) != 0)
        rc = convo__error(im->err, CONVO_ENOMEM, NULL, "out of memory");
    convo_history *h = NULL;
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.limit = 1;
    lo.with_extra = 0;
    if (rc == 0) {
        rc = convo_load(im->s, id, &lo, &h, im->err);
        convo_history_free(h);
        if (rc == CONVO_ENOTFOUND) {
            convo__error_clear(im->err);
            rc = new_staging_id(im);
        }
    }
    im->thread = id;
    im->target = im->staging ? im->staging : id;
    im->next_seq = 0;
    im->thread_checkpoints = 0;
    if (rc == 0)
        rc = convo_save_extra(im->s, im->target, extra ? extra : "{}", im->err);
    free(extra);
    return rc;
}

/* A thread that is not there yet becomes visible here, whole: one fork of its
 * staged copy (messages and extra). CONVO_ECONFLICT when another writer
 * created it meanwhile: that writer's thread is left as it is. */
static int publish(importer *im)
{
    if (!im->staging)
        return 0;
    int rc = convo_thread_fork(im->s, im->staging, im->thread, -1, im->err);
    if (rc == CONVO_ECONFLICT) {
        convo__error_clear(im->err);
        rc = convo__error(im->err, CONVO_ECONFLICT, NULL, "thread %s was created by another "
                          "writer while it was imported: not restored, the other writer's "
                          "thread is left as it is", im->thread);
    }
    if (rc != 0)
        return rc;
    rc = convo_thread_delete(im->s, im->staging, im->err);
    free(im->staging);
    im->staging = NULL;
    im->target = im->thread;
    return rc;
}

/* A chunk the store had already (skipped) must be the dump's own messages:
 * another thread under the same id is reported, not silently kept. */
static int check_skipped(importer *im, int64_t first, const convo_message_in *msgs, size_t n)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.with_extra = 0;
    lo.from_seq = first;
    lo.limit = (int64_t)n;
    convo_history *h;
    int rc = convo_load(im->s, im->target, &lo, &h, im->err);
    if (rc != 0)
        return rc;
    size_t differs = convo_history_count(h) == n ? n : 0;
    for (size_t i = 0; i < n && differs == n; i++) {
        size_t len;
        const char *m = convo_history_message(h, i, &len);
        if (len != msgs[i].len || memcmp(m, msgs[i].bytes, len) != 0)
            differs = i;
    }
    convo_history_free(h);
    if (differs == n)
        return 0;
    return convo__error(im->err, CONVO_ECONFLICT, NULL, "thread %s exists with other messages "
                        "(seq %lld differs from the dump's): not imported", im->thread,
                        (long long)(first + (int64_t)differs));
}

static int import_messages(importer *im, const msgpack_object *rec)
{
    const msgpack_object *list = field(rec, 3, MSGPACK_OBJECT_ARRAY);
    int64_t first;
    if (rec->via.array.size != 4 || !same_thread(im, rec) || !list ||
        convo__unpack_int(&rec->via.array.ptr[2], &first))
        return corrupt(im, "malformed messages record");
    if (first != im->next_seq)
        return corrupt(im, "messages are not contiguous");
    size_t n = list->via.array.size;
    if (n == 0)
        return 0;
    convo_message_in *msgs = calloc(n, sizeof *msgs);
    int64_t *at = calloc(n, sizeof *at);
    int rc = msgs && at ? 0 : convo__error(im->err, CONVO_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++) {
        const msgpack_object *m = &list->via.array.ptr[i];
        const msgpack_object *role = field(m, 1, MSGPACK_OBJECT_STR);
        const msgpack_object *bytes = field(m, 2, MSGPACK_OBJECT_BIN);
        if (m->via.array.size != 3 || !role || !bytes ||
            convo__unpack_int(&m->via.array.ptr[0], &at[i])) {
            rc = corrupt(im, "malformed message");
            break;
        }
        char *parsed_role;
        msgs[i].bytes = bytes->via.bin.ptr;
        msgs[i].len = bytes->via.bin.size;
        rc = convo__check_message(msgs[i].bytes, msgs[i].len, &im->s->limits, im->s->roles,
                                  &parsed_role, im->err);
        msgs[i].role = parsed_role;
        if (rc == 0 && (strlen(parsed_role) != role->via.str.size ||
                        memcmp(parsed_role, role->via.str.ptr, role->via.str.size) != 0))
            rc = corrupt(im, "a message's role does not match its record");
    }
    int skipped = 0;
    if (rc == 0)
        rc = convo__scrubbed(im->s,
                             im->s->driver->thread_import(im->s->backend, im->target, first,
                                                          msgs, at, n, &skipped, im->err),
                             im->err);
    if (rc == 0 && skipped)
        rc = check_skipped(im, first, msgs, n);
    for (size_t i = 0; msgs && i < n; i++)
        free((char *)msgs[i].role);
    free(msgs);
    free(at);
    if (rc == 0) {
        im->next_seq += (int64_t)n;
        im->stats->messages += n;
        if (skipped)
            im->stats->skipped += n;
        if (im->stats->messages % 10000 < n)
            report(im->opts, im->stats);
    }
    return rc;
}

typedef struct cp_fields {
    char *ns, *id, *parent, *metadata, *body_type;
    const msgpack_object *body, *channels, *writes;
    int64_t log_length, created_at;
} cp_fields;

static void cp_fields_free(cp_fields *f)
{
    free(f->ns);
    free(f->id);
    free(f->parent);
    free(f->metadata);
    free(f->body_type);
}

static int parse_cp(const msgpack_object *rec, cp_fields *f)
{
    const msgpack_object *a = rec->via.array.ptr;
    if (rec->via.array.size != 12 || get_str(&a[2], &f->ns) || !f->ns || get_str(&a[3], &f->id) ||
        !f->id || get_str(&a[4], &f->parent) || get_str(&a[5], &f->metadata) || !f->metadata ||
        get_str(&a[6], &f->body_type) || convo__unpack_int(&a[8], &f->log_length) ||
        convo__unpack_int(&a[9], &f->created_at))
        return -1;
    f->body = a[7].type == MSGPACK_OBJECT_BIN ? &a[7] : NULL;
    f->channels = a[10].type == MSGPACK_OBJECT_ARRAY ? &a[10] : NULL;
    f->writes = a[11].type == MSGPACK_OBJECT_ARRAY ? &a[11] : NULL;
    return (f->body_type && !f->body) || !f->channels || !f->writes ? -1 : 0;
}

static int import_channels(const cp_fields *f, convo_channel_in **out, convo_blob **values,
                           char ***strs)
{
    size_t n = f->channels->via.array.size;
    *out = calloc(n + 1, sizeof **out);
    *values = calloc(n + 1, sizeof **values);
    *strs = calloc(3 * n + 1, sizeof **strs);
    if (!*out || !*values || !*strs)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *c = &f->channels->via.array.ptr[i];
        if (c->type != MSGPACK_OBJECT_ARRAY || c->via.array.size != 4)
            return -1;
        const msgpack_object *a = c->via.array.ptr;
        char **s = &(*strs)[3 * i];
        if (get_str(&a[0], &s[0]) || !s[0] || get_str(&a[1], &s[1]) || !s[1] ||
            get_str(&a[2], &s[2]))
            return -1;
        (*out)[i].channel = s[0];
        (*out)[i].version = s[1];
        if (s[2]) {
            if (a[3].type != MSGPACK_OBJECT_BIN)
                return -1;
            (*values)[i] = (convo_blob){s[2], a[3].via.bin.ptr, a[3].via.bin.size};
            (*out)[i].value = &(*values)[i];
        }
    }
    return 0;
}

static void free_strs(char **strs, size_t n)
{
    for (size_t i = 0; strs && i < n; i++)
        free(strs[i]);
    free(strs);
}

/* Pending writes grouped by (task_id, task_path), as put_writes takes them. */
static int import_writes(importer *im, const cp_fields *f)
{
    size_t n = f->writes->via.array.size;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        char *task = NULL, *path = NULL;
        const msgpack_object *w0 = &f->writes->via.array.ptr[i];
        if (w0->type != MSGPACK_OBJECT_ARRAY || w0->via.array.size != 6 ||
            get_str(&w0->via.array.ptr[0], &task) || !task ||
            get_str(&w0->via.array.ptr[1], &path) || !path) {
            free(task);
            free(path);
            return corrupt(im, "malformed pending write");
        }
        size_t room = n - i;
        convo_write_in *ws = calloc(room, sizeof *ws);
        char **strs = calloc(2 * room + 2, sizeof *strs);
        size_t k = 0;
        for (; ws && strs && i < n && rc == 0; i++, k++) {
            const msgpack_object *w = &f->writes->via.array.ptr[i];
            char *t2 = NULL, *p2 = NULL;
            const msgpack_object *a = w->type == MSGPACK_OBJECT_ARRAY && w->via.array.size == 6
                                          ? w->via.array.ptr : NULL;
            if (!a || get_str(&a[0], &t2) || !t2 || get_str(&a[1], &p2) || !p2 ||
                convo__unpack_int(&a[2], &ws[k].idx) || get_str(&a[3], &strs[2 * k]) ||
                !strs[2 * k] || get_str(&a[4], &strs[2 * k + 1]) || !strs[2 * k + 1] ||
                a[5].type != MSGPACK_OBJECT_BIN) {
                free(t2);
                free(p2);
                rc = corrupt(im, "malformed pending write");
                break;
            }
            int same = strcmp(t2, task) == 0 && strcmp(p2, path) == 0;
            free(t2);
            free(p2);
            if (!same)
                break;
            ws[k].channel = strs[2 * k];
            ws[k].value = (convo_blob){strs[2 * k + 1], a[5].via.bin.ptr, a[5].via.bin.size};
        }
        if (!ws || !strs)
            rc = convo__error(im->err, CONVO_ENOMEM, NULL, "out of memory");
        if (rc == 0)
            rc = convo_checkpoint_put_writes(im->s, im->thread, f->ns, f->id, task, path, ws, k,
                                             im->err);
        im->stats->writes += k;
        free_strs(strs, 2 * k + 2);
        free(ws);
        free(task);
        free(path);
    }
    return rc;
}

static int import_checkpoint(importer *im, const msgpack_object *rec)
{
    int prc = publish(im); /* checkpoints go to the visible thread */
    if (prc != 0)
        return prc;
    cp_fields f = {0};
    if (!same_thread(im, rec) || parse_cp(rec, &f) != 0) {
        cp_fields_free(&f);
        return corrupt(im, "malformed checkpoint record");
    }
    convo_channel_in *channels = NULL;
    convo_blob *values = NULL;
    char **strs = NULL;
    size_t nc = f.channels->via.array.size;
    int rc = import_channels(&f, &channels, &values, &strs) ? corrupt(im, "malformed channel") : 0;
    if (rc == 0) {
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = im->thread;
        cp.checkpoint_ns = f.ns;
        cp.checkpoint_id = f.id;
        cp.parent_id = f.parent;
        cp.metadata_json = f.metadata;
        if (f.body_type)
            cp.body = (convo_blob){f.body_type, f.body->via.bin.ptr, f.body->via.bin.size};
        cp.channels = channels;
        cp.nchannels = nc;
        cp.log_length = f.log_length;
        rc = convo_checkpoint_put(im->s, &cp, im->err);
    }
    if (rc == 0)
        rc = import_writes(im, &f);
    if (rc == 0) {
        im->stats->checkpoints++;
        im->thread_checkpoints++;
    }
    free_strs(strs, 3 * nc);
    free(channels);
    free(values);
    cp_fields_free(&f);
    return rc;
}

static int import_thread_end(importer *im, const msgpack_object *rec)
{
    int64_t messages, checkpoints;
    if (rec->via.array.size != 4 || !same_thread(im, rec) ||
        convo__unpack_int(&rec->via.array.ptr[2], &messages) ||
        convo__unpack_int(&rec->via.array.ptr[3], &checkpoints))
        return corrupt(im, "malformed thread-end record");
    if (messages != im->next_seq || (uint64_t)checkpoints != im->thread_checkpoints)
        return corrupt(im, "thread-end counts do not match the records before it");
    int rc = publish(im);
    if (rc != 0)
        return rc;
    free(im->thread);
    im->thread = NULL;
    im->stats->threads++;
    report(im->opts, im->stats);
    return 0;
}

/* The end record's counts must be what the dump held: a thread whose frames
 * were cut out as a whole is caught here. */
static int import_end(importer *im, const msgpack_object *rec)
{
    int64_t threads, messages;
    if (im->thread)
        return corrupt(im, "the dump ends inside a thread");
    if (rec->via.array.size != 3 || convo__unpack_int(&rec->via.array.ptr[1], &threads) ||
        convo__unpack_int(&rec->via.array.ptr[2], &messages))
        return corrupt(im, "malformed end record");
    if ((uint64_t)threads != im->stats->threads || (uint64_t)messages != im->stats->messages)
        return corrupt(im, "the end record's counts do not match the threads before it");
    im->ended = 1;
    return 0;
}

static int apply(importer *im, const msgpack_object *rec, int first)
{
    if (rec->type != MSGPACK_OBJECT_ARRAY || rec->via.array.size < 2 ||
        !field(rec, 0, MSGPACK_OBJECT_STR))
        return corrupt(im, "a record is not a tagged array");
    if (first) {
        int64_t version;
        if (!is_tag(rec, DUMP_MAGIC) || convo__unpack_int(&rec->via.array.ptr[1], &version))
            return corrupt(im, "not a convo dump");
        if (version != DUMP_VERSION)
            return convo__error(im->err, CONVO_ENOTSUP, NULL,
                                "dump format version %lld is not supported (this is %d)",
                                (long long)version, DUMP_VERSION);
        return 0;
    }
    if (im->ended)
        return corrupt(im, "data after the end record");
    if (is_tag(rec, "thread"))
        return import_thread_start(im, rec);
    if (is_tag(rec, "end"))
        return import_end(im, rec);
    if (!im->thread)
        return corrupt(im, "a record outside of a thread");
    if (is_tag(rec, "messages"))
        return import_messages(im, rec);
    if (is_tag(rec, "checkpoint"))
        return import_checkpoint(im, rec);
    if (is_tag(rec, "thread-end"))
        return import_thread_end(im, rec);
    return corrupt(im, "unknown record");
}

/* Whether every array, map, string and bin declared in the msgpack bytes
 * [p, p+n) fits in what remains, so that decoding never allocates for a count
 * a corrupt (or hostile) record merely claims. */
static int counts_fit(const unsigned char *p, size_t n)
{
    size_t pos = 0, pending = 1; /* objects still to read */
    while (pending > 0) {
        if (pos >= n || pending > n - pos)
            return 0;
        unsigned c = p[pos++];
        size_t width = 0, count = 0, body = 0;
        pending--;
        if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3)
            continue;
        if (c >= 0x80 && c <= 0x8f)
            count = 2 * (c & 0x0f);
        else if (c >= 0x90 && c <= 0x9f)
            count = c & 0x0f;
        else if (c >= 0xa0 && c <= 0xbf)
            body = c & 0x1f;
        else if (c == 0xcc || c == 0xd0) body = 1;
        else if (c == 0xcd || c == 0xd1) body = 2;
        else if (c == 0xca || c == 0xce || c == 0xd2) body = 4;
        else if (c == 0xcb || c == 0xcf || c == 0xd3) body = 8;
        else if (c >= 0xd4 && c <= 0xd8) body = 1 + ((size_t)1 << (c - 0xd4));
        else if (c == 0xc4 || c == 0xd9) width = 1;
        else if (c == 0xc5 || c == 0xda || c == 0xdc || c == 0xde) width = 2;
        else if (c == 0xc6 || c == 0xdb || c == 0xdd || c == 0xdf) width = 4;
        else if (c >= 0xc7 && c <= 0xc9) width = (size_t)1 << (c - 0xc7);
        else
            return 0; /* 0xc1 is never used */
        if (width) {
            if (n - pos < width)
                return 0;
            size_t v = 0;
            for (size_t k = 0; k < width; k++)
                v = (v << 8) | p[pos + k];
            pos += width;
            if (c == 0xdc || c == 0xdd)
                count = v;
            else if (c == 0xde || c == 0xdf)
                count = 2 * v;
            else
                body = v + (c >= 0xc7 && c <= 0xc9); /* ext carries a type byte */
        }
        if (body > n - pos)
            return 0;
        pos += body;
        pending += count;
    }
    return pos == n;
}

/* A frame's record, checksum verified: decode it and apply it. */
static int apply_frame(importer *im, const unsigned char *bin, size_t len, uint64_t sum, int first)
{
    if (fnv1a(bin, len) != sum)
        return first ? corrupt(im, "not a convo dump") : corrupt(im, "checksum mismatch");
    if (!counts_fit(bin, len))
        return corrupt(im, "a frame does not hold one well-formed record");
    msgpack_unpacked rec;
    msgpack_unpacked_init(&rec);
    size_t off = 0;
    int rc;
    if (msgpack_unpack_next(&rec, (const char *)bin, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        off != len)
        rc = corrupt(im, "a frame does not hold one record");
    else
        rc = apply(im, &rec.data, first);
    msgpack_unpacked_destroy(&rec);
    return rc;
}

/* After a failure inside a staged thread, remove the staged copy: only what the
 * import itself wrote. A thread already visible is left (another writer may be
 * using it); its messages and extra are whole, its checkpoints may be partial. */
static void undo_thread(importer *im)
{
    if (im->staging) {
        convo_error derr;
        if (convo_thread_delete(im->s, im->staging, &derr) != 0 &&
            derr.code != CONVO_ENOTFOUND && im->err) {
            size_t used = strlen(im->err->message);
            snprintf(im->err->message + used, sizeof im->err->message - used,
                     "; its partial copy %s could not be removed: delete it", im->staging);
        }
    }
    free(im->staging);
    im->staging = NULL;
    free(im->thread);
    im->thread = NULL;
}

/* Frames are read by hand ([0x92, bin header, bytes, uint]) so that a length
 * is checked against MAX_FRAME before anything is allocated for it. */
#define MAX_FRAME ((size_t)256 << 20) /* see docs/dump-format.md */

typedef struct reader {
    convo_read_fn read;
    void *ctx;
    unsigned char *buf;
    size_t pos, len, cap;
    uint64_t offset; /* stream offset of buf[0] */
} reader;

/* Makes n bytes available at buf[pos]: 1, 0 at the end of input, -1 on a read error,
 * -2 out of memory. */
static int fill(reader *r, size_t n, uint64_t *bytes_read)
{
    while (r->len - r->pos < n) {
        if (r->pos > 0) { /* keep only what is unread */
            memmove(r->buf, r->buf + r->pos, r->len - r->pos);
            r->offset += r->pos;
            r->len -= r->pos;
            r->pos = 0;
        }
        if (r->cap - r->len < 64 * 1024 || r->cap < n) {
            size_t cap = r->cap ? r->cap * 2 : 256 * 1024;
            while (cap < n)
                cap *= 2;
            unsigned char *b = realloc(r->buf, cap);
            if (!b)
                return -2;
            r->buf = b;
            r->cap = cap;
        }
        long got = r->read(r->ctx, r->buf + r->len, r->cap - r->len);
        if (got < 0)
            return -1;
        if (got == 0)
            return 0;
        r->len += (size_t)got;
        *bytes_read += (uint64_t)got;
    }
    return 1;
}

/* Reads one frame; *bin points into the reader's buffer. 1 frame, 0 clean end,
 * or a negative convo code. */
static int next_frame(importer *im, reader *r, const unsigned char **bin, size_t *len,
                      uint64_t *sum)
{
    uint64_t *got = &im->stats->bytes;
    im->offset = r->offset + r->pos;
    int f = fill(r, 1, got);
    if (f == 0)
        return 0;
    if (f == 1)
        f = fill(r, 6, got);
    if (f < 0)
        return f == -2 ? convo__error(im->err, CONVO_ENOMEM, NULL, "out of memory")
                       : convo__error(im->err, CONVO_EIO, NULL, "reading the dump failed at "
                                      "byte %llu", (unsigned long long)*got);
    if (f == 0)
        return convo__error(im->err, CONVO_ECORRUPT, NULL, "truncated dump: it ends at byte %llu "
                            "inside a frame", (unsigned long long)*got);
    const unsigned char *p = r->buf + r->pos;
    size_t width = p[1] == 0xc4 ? 1 : p[1] == 0xc5 ? 2 : p[1] == 0xc6 ? 4 : 0;
    if (p[0] != 0x92 || width == 0)
        return corrupt(im, "not a frame");
    size_t n = 0;
    for (size_t k = 0; k < width; k++)
        n = (n << 8) | p[2 + k];
    if (n > MAX_FRAME)
        return corrupt(im, "a frame is larger than any convo writes");
    size_t head = 2 + width, total = head + n + 9;
    f = fill(r, head + n + 1, got);
    if (f == 1) {
        unsigned c = r->buf[r->pos + head + n];
        size_t sumw = c <= 0x7f ? 0 : c == 0xcc ? 1 : c == 0xcd ? 2 : c == 0xce ? 4 : c == 0xcf ? 8 : 9;
        if (sumw == 9)
            return corrupt(im, "a frame's checksum is not an unsigned integer");
        total = head + n + 1 + sumw;
        f = fill(r, total, got);
    }
    if (f < 0)
        return f == -2 ? convo__error(im->err, CONVO_ENOMEM, NULL, "out of memory")
                       : convo__error(im->err, CONVO_EIO, NULL, "reading the dump failed");
    if (f == 0)
        return convo__error(im->err, CONVO_ECORRUPT, NULL, "truncated dump: it ends at byte %llu "
                            "inside the frame that starts at byte %llu",
                            (unsigned long long)*got, (unsigned long long)im->offset);
    p = r->buf + r->pos;
    const unsigned char *s = p + head + n;
    uint64_t v = *s <= 0x7f ? *s : 0;
    for (size_t k = 1; k < total - head - n; k++)
        v = (v << 8) | s[k];
    *bin = p + head;
    *len = n;
    *sum = v;
    r->pos += total;
    return 1;
}

static int read_records(importer *im, convo_read_fn read, void *ctx)
{
    reader r = {.read = read, .ctx = ctx};
    int rc = 0, first = 1;
    for (;;) {
        const unsigned char *bin = NULL;
        size_t len = 0;
        uint64_t sum = 0;
        rc = next_frame(im, &r, &bin, &len, &sum);
        if (rc <= 0)
            break;
        rc = apply_frame(im, bin, len, sum, first);
        first = 0;
        if (rc != 0)
            break;
    }
    if (rc == 0 && !im->ended)
        rc = convo__error(im->err, CONVO_ECORRUPT, NULL,
                          "truncated dump: it ends at byte %llu without its end record",
                          (unsigned long long)im->stats->bytes);
    free(r.buf);
    return rc;
}

int convo_import(convo_store *s, convo_read_fn read, void *read_ctx, const convo_dump_opts *opts,
                 convo_dump_stats *stats, convo_error *err)
{
    convo__error_clear(err);
    convo_dump_stats local = {0};
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    if (!s || !read)
        return convo__error(err, CONVO_EINVAL, NULL, "store and read function are required");
    if (s->driver->version < 2 || !s->driver->thread_import)
        return convo__error(err, CONVO_ENOTSUP, NULL, "the %s driver cannot import yet",
                            s->driver->name);
    importer im = {.s = s, .opts = opts, .stats = stats, .err = err, .seen = json_object()};
    if (!im.seen)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    int rc = read_records(&im, read, read_ctx);
    json_decref(im.seen);
    if (rc != 0)
        undo_thread(&im);
    free(im.thread);
    return rc;
}

/* ---------------------------------------------------------------- copy */

typedef struct copy_job {
    convo_store *src;
    const char *const *ids;
    size_t n;
    int fd;
    int rc;
    convo_error err;
    convo_dump_stats stats;
} copy_job;

static int fd_write(void *ctx, const void *buf, size_t len)
{
    int fd = *(int *)ctx;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL); /* the reader may stop early */
        if (w < 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static long fd_read(void *ctx, void *buf, size_t len)
{
    return (long)recv(*(int *)ctx, buf, len, 0);
}

static void *copy_export(void *arg)
{
    copy_job *j = arg;
    j->rc = convo_export(j->src, j->ids, j->n, fd_write, &j->fd, NULL, &j->stats, &j->err);
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
    int rc = convo_import(dst, fd_read, &fds[1], opts, stats, err);
    shutdown(fds[1], SHUT_RDWR); /* unblocks the exporter if the import stopped early */
    pthread_join(t, NULL);
    close(fds[0]);
    close(fds[1]);
    if (job.rc != 0) { /* the source's failure is the root cause */
        if (err)
            *err = job.err;
        return job.rc;
    }
    return rc;
}
