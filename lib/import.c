/* import.c — convo_import: applies a dump (docs/dump-format.md) record by
 * record; a thread the store lacks is staged under another id and made visible
 * whole, the end record's counts are checked, and a failure undoes only what
 * the import itself wrote. */
#include "dump.h"
#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    int64_t generation; /* the thread's, as the dump says */
    int version;        /* the dump format's */
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
                 (unsigned long long)convo__dump_hash(&seed, sizeof seed)) < 0) {
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
    int64_t generation = 0; /* format 1 has none: every thread was at 0 */
    size_t fields = im->version >= 2 ? 4 : 3;
    if (rec->via.array.size != fields || get_str(&rec->via.array.ptr[1], &id) || !id ||
        get_str(&rec->via.array.ptr[2], &extra) ||
        (fields == 4 && (convo__unpack_int(&rec->via.array.ptr[3], &generation) ||
                         generation < 0))) {
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
    im->generation = generation;
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
    if (rc != 0)
        return rc; /* the staged copy stays named: undo_thread tries again, or says so */
    free(im->staging);
    im->staging = NULL;
    im->target = im->thread;
    return 0;
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
        rc = convo__check_message_ex(msgs[i].bytes, msgs[i].len, &im->s->limits,
                                     im->s->roles, 1, &parsed_role, im->err);
        msgs[i].role = parsed_role;
        if (rc == 0 && (strlen(parsed_role) != role->via.str.size ||
                        memcmp(parsed_role, role->via.str.ptr, role->via.str.size) != 0))
            rc = corrupt(im, "a message's role does not match its record");
    }
    int skipped = 0;
    if (rc == 0)
        rc = convo__scrubbed(im->s,
                             im->s->driver->thread_import(im->s->backend, im->target, first,
                                                          msgs, at, n, im->generation,
                                                          &skipped, im->err),
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
            convo__dump_report(im->opts, im->stats);
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
    convo__dump_report(im->opts, im->stats);
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
        if (version < 1 || version > DUMP_VERSION)
            return convo__error(im->err, CONVO_ENOTSUP, NULL,
                                "dump format version %lld is not supported (this is %d)",
                                (long long)version, DUMP_VERSION);
        im->version = (int)version;
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
    if (convo__dump_hash(bin, len) != sum)
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
    if (rc != 0) {
        convo__error_name_thread(err, im.thread); /* a driver's message may not */
        undo_thread(&im);
    }
    free(im.thread);
    return rc;
}
