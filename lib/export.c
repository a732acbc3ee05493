/* export.c — convo_export: threads, messages, extra, checkpoints and pending
 * writes as a stream of framed msgpack records (docs/dump-format.md). Each
 * thread is one consistent snapshot; memory stays bounded: messages move in
 * chunks. */
#include "dump.h"
#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static int out_of_memory(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

/* Frames the record just packed: [bin(record), convo__dump_hash(record)]. */
static int end_record(exporter *x)
{
    if (!x->nomem) {
        msgpack_pack_array(&x->out, 2);
        convo__pack_bin(&x->out, x->rec.data, x->rec.size);
        msgpack_pack_uint64(&x->out, convo__dump_hash(x->rec.data, x->rec.size));
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

/* What identifies one life of a thread: its first message (its time and bytes).
 * A thread deleted and created again under the same id has another one. */
typedef struct thread_mark {
    int64_t length; /* the thread's length when its export began */
    int64_t generation; /* its generation then: a tail rewrite changes it */
    int64_t first_at;
    uint64_t first_hash;
} thread_mark;

static void mark_of(const convo_history *h, thread_mark *m)
{
    m->length = convo_history_length(h);
    m->generation = convo_history_generation(h);
    m->first_at = 0;
    m->first_hash = 0;
    if (convo_history_count(h) > 0 && convo_history_seq(h, 0) == 0) {
        size_t len;
        const char *b = convo_history_message(h, 0, &len);
        m->first_at = convo_history_created_at(h, 0);
        m->first_hash = convo__dump_hash(b, len);
    }
}

static int changed(exporter *x, const char *id)
{
    convo__error_clear(x->err);
    return convo__error(x->err, CONVO_ECONFLICT, NULL,
                        "thread %s was deleted, replaced or its tail rewritten while it was "
                        "exported; the dump is incomplete: export again", id);
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
    if (now.length < m->length || now.generation != m->generation ||
        now.first_at != m->first_at || now.first_hash != m->first_hash)
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
        convo__dump_report(x->opts, x->stats);
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
        if ((int64_t)convo_history_count(h) != lo.limit ||
            convo_history_generation(h) != m->generation)
            rc = changed(x, id); /* it shrank or its tail was rewritten */
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
        rc = convo__checkpoint_get_raw(x->s, id, keys[i].ns, keys[i].id, &cp, x->err);
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
static int export_one(exporter *x, const char *id, int64_t expected_generation)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.limit = CHUNK_MESSAGES;
    convo_history *h;
    int rc = convo_load(x->s, id, &lo, &h, x->err);
    if (rc != 0)
        return rc;
    thread_mark m;
    mark_of(h, &m);
    if (expected_generation >= 0 && m.generation != expected_generation) {
        convo_history_free(h);
        return convo__error(x->err, CONVO_ECONFLICT, NULL,
                            "thread %s is at generation %lld, not %lld: nothing of it written",
                            id, (long long)m.generation, (long long)expected_generation);
    }
    msgpack_pack_array(&x->pk, 4);
    convo__pack_str(&x->pk, "thread");
    convo__pack_str(&x->pk, id);
    convo__pack_str(&x->pk, convo_history_extra(h));
    msgpack_pack_int64(&x->pk, m.generation);
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
    convo__dump_report(x->opts, x->stats);
    return flush(x, 0);
}

/* export_one, with an error that names the thread (a driver's may not) */
static int export_thread(exporter *x, const char *id, int64_t expected_generation)
{
    int rc = export_one(x, id, expected_generation);
    if (rc != 0)
        convo__error_name_thread(x->err, id);
    return rc;
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
            rc = export_thread(x, convo_thread_page_id(p, i), -1);
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
    if (opts && (opts->version < 1 || opts->version > CONVO_DUMP_OPTS_VERSION))
        return convo__error(err, CONVO_EINVAL, NULL, "unsupported convo_dump_opts version %u",
                            opts->version);
    const int64_t *generations = opts && opts->version >= 2 ? opts->expected_generations : NULL;
    if (generations && n == 0)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "expected generations need the threads named");
    for (size_t i = 0; generations && i < n; i++)
        if (generations[i] < -1)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "expected generation must be >= 0 or -1");
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
        rc = export_thread(&x, thread_ids[i], generations ? generations[i] : -1);
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
