/* checkpoint.c — the checkpoint calls: validate a snapshot, its channels and
 * pending writes, hand them to the driver, and the result objects drivers
 * build with convo__checkpoint_*. */
#include "internal.h"
#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- result objects ---- */

static char *dup_or_null(const char *s, int *failed)
{
    if (!s)
        return NULL;
    char *c = strdup(s);
    if (!c)
        *failed = 1;
    return c;
}

static void *dup_bytes(const void *b, size_t len, int *failed)
{
    void *c = malloc(len ? len : 1);
    if (!c)
        *failed = 1;
    else if (len)
        memcpy(c, b, len);
    return c;
}

static void channel_free(cp_channel *c)
{
    free(c->channel);
    free(c->version);
    free(c->type);
    free(c->bytes);
    convo__items_free(c->items);
}

static void write_free(cp_write *w)
{
    free(w->task_id);
    free(w->task_path);
    free(w->channel);
    free(w->type);
    free(w->bytes);
    convo__items_free(w->items);
}

void convo_checkpoint_free(convo_checkpoint *cp)
{
    if (!cp)
        return;
    for (size_t i = 0; i < cp->nchannels; i++)
        channel_free(&cp->channels[i]);
    for (size_t i = 0; i < cp->nwrites; i++)
        write_free(&cp->writes[i]);
    free(cp->channels);
    free(cp->writes);
    free(cp->thread_id);
    free(cp->ns);
    free(cp->id);
    free(cp->parent_id);
    free(cp->metadata);
    free(cp->body_type);
    free(cp->body);
    free(cp);
}

convo_checkpoint *convo__checkpoint_new(const char *thread_id, const char *ns, const char *id,
                                        const char *parent_id, const char *metadata_json,
                                        const char *body_type, const void *body, size_t body_len,
                                        int64_t log_length, int64_t created_at)
{
    convo_checkpoint *cp = calloc(1, sizeof *cp);
    if (!cp)
        return NULL;
    int failed = 0;
    cp->thread_id = dup_or_null(thread_id, &failed);
    cp->ns = dup_or_null(ns ? ns : "", &failed);
    cp->id = dup_or_null(id, &failed);
    cp->parent_id = dup_or_null(parent_id, &failed);
    cp->metadata = dup_or_null(metadata_json ? metadata_json : "{}", &failed);
    cp->body_type = dup_or_null(body_type, &failed);
    if (body_type)
        cp->body = dup_bytes(body, body_len, &failed);
    cp->body_len = body_type ? body_len : 0;
    cp->log_length = log_length;
    cp->created_at = created_at;
    cp->generation = -1;
    cp->origin = -1;
    if (failed) {
        convo_checkpoint_free(cp);
        return NULL;
    }
    return cp;
}

int convo__checkpoint_add_channel(convo_checkpoint *cp, const char *channel, const char *version,
                                  const char *type, const void *bytes, size_t len)
{
    if (cp->nchannels == cp->ccap) {
        size_t cap = cp->ccap ? cp->ccap * 2 : 8;
        cp_channel *c = realloc(cp->channels, cap * sizeof *c);
        if (!c)
            return CONVO_ENOMEM;
        cp->channels = c;
        cp->ccap = cap;
    }
    int failed = 0;
    cp_channel c = {dup_or_null(channel, &failed), dup_or_null(version, &failed),
                    dup_or_null(type, &failed), type ? dup_bytes(bytes, len, &failed) : NULL,
                    type ? len : 0, NULL};
    cp->channels[cp->nchannels++] = c; /* freed with cp even when a copy failed */
    return failed ? CONVO_ENOMEM : 0;
}

int convo__checkpoint_add_write(convo_checkpoint *cp, const char *task_id, const char *task_path,
                                int64_t idx, const char *channel, const char *type,
                                const void *bytes, size_t len)
{
    if (cp->nwrites == cp->wcap) {
        size_t cap = cp->wcap ? cp->wcap * 2 : 8;
        cp_write *w = realloc(cp->writes, cap * sizeof *w);
        if (!w)
            return CONVO_ENOMEM;
        cp->writes = w;
        cp->wcap = cap;
    }
    int failed = 0;
    cp_write w = {dup_or_null(task_id, &failed), dup_or_null(task_path ? task_path : "", &failed),
                  dup_or_null(channel, &failed),  dup_or_null(type ? type : "", &failed),
                  idx, dup_bytes(bytes, len, &failed), len, NULL};
    cp->writes[cp->nwrites++] = w;
    return failed ? CONVO_ENOMEM : 0;
}

static int cmp_channel(const void *a, const void *b)
{
    return strcmp(((const cp_channel *)a)->channel, ((const cp_channel *)b)->channel);
}

static int cmp_write(const void *a, const void *b)
{
    const cp_write *x = a, *y = b;
    int c = strcmp(x->task_id, y->task_id);
    if (c)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void convo__checkpoint_finish(convo_checkpoint *cp)
{
    if (cp->nchannels > 1)
        qsort(cp->channels, cp->nchannels, sizeof *cp->channels, cmp_channel);
    if (cp->nwrites > 1)
        qsort(cp->writes, cp->nwrites, sizeof *cp->writes, cmp_write);
}

convo_checkpoint_set *convo__checkpoint_set_new(void)
{
    return calloc(1, sizeof(convo_checkpoint_set));
}

int convo__checkpoint_set_add(convo_checkpoint_set *set, convo_checkpoint *cp)
{
    if (set->count == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 8;
        convo_checkpoint **items = realloc(set->items, cap * sizeof *items);
        if (!items) {
            convo_checkpoint_free(cp);
            return CONVO_ENOMEM;
        }
        set->items = items;
        set->cap = cap;
    }
    set->items[set->count++] = cp;
    return 0;
}

size_t convo_checkpoint_set_count(const convo_checkpoint_set *set) { return set ? set->count : 0; }

const convo_checkpoint *convo_checkpoint_set_get(const convo_checkpoint_set *set, size_t i)
{
    return set && i < set->count ? set->items[i] : NULL;
}

void convo_checkpoint_set_free(convo_checkpoint_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->count; i++)
        convo_checkpoint_free(set->items[i]);
    free(set->items);
    free(set);
}

const char *convo_checkpoint_thread_id(const convo_checkpoint *cp) { return cp ? cp->thread_id : NULL; }
const char *convo_checkpoint_ns(const convo_checkpoint *cp) { return cp ? cp->ns : NULL; }
const char *convo_checkpoint_id(const convo_checkpoint *cp) { return cp ? cp->id : NULL; }
const char *convo_checkpoint_parent_id(const convo_checkpoint *cp) { return cp ? cp->parent_id : NULL; }
const char *convo_checkpoint_metadata(const convo_checkpoint *cp) { return cp ? cp->metadata : NULL; }
int64_t convo_checkpoint_log_length(const convo_checkpoint *cp) { return cp ? cp->log_length : 0; }
int64_t convo_checkpoint_created_at(const convo_checkpoint *cp) { return cp ? cp->created_at : 0; }
int64_t convo_checkpoint_generation(const convo_checkpoint *cp) { return cp ? cp->generation : -1; }
int64_t convo_checkpoint_log_origin(const convo_checkpoint *cp) { return cp ? cp->origin : -1; }
size_t convo_checkpoint_channel_count(const convo_checkpoint *cp) { return cp ? cp->nchannels : 0; }
size_t convo_checkpoint_write_count(const convo_checkpoint *cp) { return cp ? cp->nwrites : 0; }

convo_blob convo_checkpoint_body(const convo_checkpoint *cp)
{
    convo_blob b = {NULL, NULL, 0};
    if (cp) {
        b.type = cp->body_type;
        b.bytes = cp->body;
        b.len = cp->body_len;
    }
    return b;
}

const char *convo_checkpoint_channel(const convo_checkpoint *cp, size_t i, const char **version,
                                     convo_blob *value)
{
    if (!cp || i >= cp->nchannels)
        return NULL;
    const cp_channel *c = &cp->channels[i];
    if (version)
        *version = c->version;
    if (value) {
        value->type = c->type;
        value->bytes = c->bytes;
        value->len = c->len;
    }
    return c->channel;
}

const char *convo_checkpoint_write(const convo_checkpoint *cp, size_t i, const char **task_path,
                                   int64_t *idx, const char **channel, convo_blob *value)
{
    if (!cp || i >= cp->nwrites)
        return NULL;
    const cp_write *w = &cp->writes[i];
    if (task_path)
        *task_path = w->task_path;
    if (idx)
        *idx = w->idx;
    if (channel)
        *channel = w->channel;
    if (value) {
        value->type = w->type;
        value->bytes = w->bytes;
        value->len = w->len;
    }
    return w->task_id;
}

static int items_of(const cp_items *it, convo_items *out)
{
    if (!it)
        return 0;
    if (out)
        *out = it->pub;
    return 1;
}

int convo_checkpoint_channel_items(const convo_checkpoint *cp, size_t i, convo_items *out)
{
    return cp && i < cp->nchannels ? items_of(cp->channels[i].items, out) : 0;
}

int convo_checkpoint_write_items(const convo_checkpoint *cp, size_t i, convo_items *out)
{
    return cp && i < cp->nwrites ? items_of(cp->writes[i].items, out) : 0;
}

/* ---- metadata filter ---- */

static int contains(json_t *doc, json_t *want)
{
    if (json_is_object(want)) {
        if (!json_is_object(doc))
            return 0;
        const char *k;
        json_t *v;
        json_object_foreach(want, k, v) {
            json_t *d = json_object_get(doc, k);
            if (!d || !contains(d, v))
                return 0;
        }
        return 1;
    }
    if (json_is_array(want)) {
        if (!json_is_array(doc))
            return 0;
        size_t i, j;
        json_t *v, *d;
        json_array_foreach(want, i, v) {
            int found = 0;
            json_array_foreach(doc, j, d) {
                if (contains(d, v)) {
                    found = 1;
                    break;
                }
            }
            if (!found)
                return 0;
        }
        return 1;
    }
    /* scalars: 3 and 3.0 are equal, as in jsonb */
    if (json_is_number(want) && json_is_number(doc))
        return json_number_value(want) == json_number_value(doc);
    return json_equal(doc, want);
}

int convo__json_contains(const char *metadata_json, size_t len, void *filter)
{
    if (!filter)
        return 1;
    json_t *doc = json_loadb(metadata_json, len, 0, NULL);
    int r = doc && contains(doc, (json_t *)filter);
    json_decref(doc);
    return r;
}

/* ---- validation and the public calls ---- */

#define check_key convo__check_key

static int check_blob(const char *what, const convo_blob *b, convo_error *err)
{
    if (!b->type || !*b->type || strlen(b->type) > CONVO_MAX_ROLE_BYTES)
        return convo__error(err, CONVO_EINVAL, NULL, "%s needs a type of 1..%d bytes", what,
                            CONVO_MAX_ROLE_BYTES);
    if (b->len && !b->bytes)
        return convo__error(err, CONVO_EINVAL, NULL, "%s has a length but no bytes", what);
    /* a stored reference, as export gives it, comes back in with import */
    if (strcmp(b->type, CONVO_ITEMS_TYPE) == 0)
        return convo__items_check(b->bytes, b->len, NULL, err);
    if (strcmp(b->type, CONVO_DELTA_TYPE) == 0)
        return convo__body_check(b->bytes, b->len, err);
    if (strncmp(b->type, "convo/", 6) == 0)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "%s has type '%s': types starting with convo/ are the library's", what,
                            b->type);
    return 0;
}

static int check_channels(const convo_checkpoint_in *cp, size_t *bytes, convo_error *err)
{
    for (size_t i = 0; i < cp->nchannels; i++) {
        const convo_channel_in *c = &cp->channels[i];
        int rc = check_key("channel name", c->channel, 0, err);
        if (rc == 0)
            rc = check_key("channel version", c->version, 0, err);
        const convo_items_in *it =
            cp->version >= 4 && cp->channel_items ? cp->channel_items[i] : NULL;
        if (rc == 0 && it && c->value)
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "channel '%s' has both a value and items", c->channel);
        if (rc == 0 && c->value)
            rc = check_blob("channel value", c->value, err);
        int64_t prefix = cp->version >= 5 && cp->channel_log_prefix ? cp->channel_log_prefix[i] : 0;
        if (rc == 0 && prefix < 0)
            rc = convo__error(err, CONVO_EINVAL, NULL, "channel '%s' has a log prefix of %lld",
                              c->channel, (long long)prefix);
        if (rc == 0 && prefix > 0 && !it)
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "channel '%s' has a log prefix but no items", c->channel);
        if (rc != 0)
            return rc;
        for (size_t k = 0; it && it->items && k < it->n; k++)
            if (it->items[k] && (!it->seqs || it->seqs[k] < 0)) /* a seq's text is not read */
                *bytes += it->lengths ? it->lengths[k] : strlen(it->items[k]);
        for (size_t j = 0; j < i; j++)
            if (strcmp(cp->channels[j].channel, c->channel) == 0)
                return convo__error(err, CONVO_EINVAL, NULL, "channel '%s' listed twice",
                                    c->channel);
        *bytes += strlen(c->channel) + strlen(c->version) + (c->value ? c->value->len : 0);
    }
    return 0;
}

static int check_metadata(const char *json, char **compact, convo_error *err)
{
    json_error_t jerr;
    json_t *m = json_loads(json ? json : "{}", JSON_REJECT_DUPLICATES, &jerr);
    if (!m)
        return convo__error(err, CONVO_EINVAL, NULL, "metadata is not valid JSON: %s", jerr.text);
    if (!json_is_object(m)) {
        json_decref(m);
        return convo__error(err, CONVO_EINVAL, NULL, "metadata is not a JSON object");
    }
    *compact = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return *compact ? 0 : convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

#define NEED_DRIVER(s, member, err)                                                          \
    do {                                                                                     \
        convo__error_clear(err);                                                             \
        if (!(s))                                                                            \
            return convo__error(err, CONVO_EINVAL, NULL, "store is NULL");                   \
        if ((s)->driver->version < 2 || !(s)->driver->member)                                \
            return convo__error(err, CONVO_ENOTSUP, NULL,                                    \
                                "the %s driver does not support checkpoints yet",            \
                                (s)->driver->name);                                          \
    } while (0)

int convo_checkpoint_put(convo_store *s, const convo_checkpoint_in *cp, convo_error *err)
{
    NEED_DRIVER(s, checkpoint_put, err);
    if (!cp || cp->version < 1 || cp->version > CONVO_CHECKPOINT_IN_VERSION)
        return convo__error(err, CONVO_EINVAL, NULL, "checkpoint is NULL or of an unknown version");
    int rc = convo__check_thread_id(cp->thread_id, err);
    if (rc == 0)
        rc = check_key("checkpoint namespace", cp->checkpoint_ns ? cp->checkpoint_ns : "", 1, err);
    if (rc == 0)
        rc = check_key("checkpoint id", cp->checkpoint_id, 0, err);
    if (rc == 0 && cp->parent_id)
        rc = check_key("parent checkpoint id", cp->parent_id, 0, err);
    if (rc == 0 && cp->body.type)
        rc = check_blob("checkpoint body", &cp->body, err);
    if (rc == 0 && cp->log_length < 0)
        rc = convo__error(err, CONVO_EINVAL, NULL, "log_length must not be negative");
    if (rc == 0 && cp->nchannels && !cp->channels)
        rc = convo__error(err, CONVO_EINVAL, NULL, "channels is NULL");
    size_t bytes = cp->body.type ? cp->body.len : 0;
    if (rc == 0)
        rc = check_channels(cp, &bytes, err);
    char *metadata = NULL;
    if (rc == 0)
        rc = check_metadata(cp->metadata_json, &metadata, err);
    if (rc == 0 && (bytes += strlen(metadata)) > s->limits.max_checkpoint_bytes)
        rc = convo__error(err, CONVO_ETOOLARGE, NULL,
                          "checkpoint of %zu bytes exceeds the limit of %zu bytes", bytes,
                          s->limits.max_checkpoint_bytes);
    size_t nmessages = cp->version >= 2 ? cp->nmessages : 0;
    convo_message_in *msgs = NULL;
    if (rc == 0 && nmessages > 0) {
        if (s->driver->version < 3 || !s->driver->checkpoint_put_log)
            rc = convo__error(err, CONVO_ENOTSUP, NULL,
                              "the %s driver cannot put a checkpoint with messages",
                              s->driver->name);
        else if (cp->expected_length < 0)
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "a put with messages needs expected_length >= 0");
        else if (cp->version >= 3 && cp->expected_generation < -1)
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "expected generation must be >= 0 or -1");
        /* both are >= 0: the difference cannot overflow, as the sum can */
        else if (cp->log_length > cp->expected_length &&
                 (uint64_t)(cp->log_length - cp->expected_length) > nmessages)
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "log_length %lld is past the %lld messages the thread will have",
                              (long long)cp->log_length,
                              (long long)(cp->expected_length + (int64_t)nmessages));
        else
            rc = convo__messages_in(s, cp->messages, cp->message_lengths, nmessages, &msgs, err);
    }
    if (rc == 0) {
        /* A version 1 caller's struct ends before the version 2 fields. */
        convo_checkpoint_in copy = CONVO_CHECKPOINT_IN_INIT;
        memcpy(&copy, cp, cp->version >= 5   ? sizeof copy
                          : cp->version == 4 ? offsetof(convo_checkpoint_in, channel_log_prefix)
                          : cp->version == 3 ? offsetof(convo_checkpoint_in, channel_items)
                          : cp->version == 2 ? offsetof(convo_checkpoint_in, expected_generation)
                                             : offsetof(convo_checkpoint_in, messages));
        copy.version = CONVO_CHECKPOINT_IN_VERSION;
        copy.checkpoint_ns = cp->checkpoint_ns ? cp->checkpoint_ns : "";
        copy.metadata_json = metadata;
        if (!copy.body.type)
            copy.body.len = 0, copy.body.bytes = NULL;
        if (nmessages == 0)
            copy.nmessages = 0, copy.messages = NULL, copy.message_lengths = NULL;
        if (copy.channel_items)
            rc = nmessages ? convo__error(err, CONVO_EINVAL, NULL,
                                          "a put with channel items takes no messages: the "
                                          "library appends the items that are new")
                           : convo__items_put(s, &copy, err);
        else
            rc = nmessages ? s->driver->checkpoint_put_log(s->backend, &copy, msgs, err)
                           : s->driver->checkpoint_put(s->backend, &copy, err);
        rc = convo__scrubbed(s, rc, err);
    }
    convo__messages_free(msgs, nmessages);
    free(metadata);
    return rc;
}

int convo_checkpoint_put_writes(convo_store *s, const char *thread_id, const char *checkpoint_ns,
                                const char *checkpoint_id, const char *task_id,
                                const char *task_path, const convo_write_in *writes, size_t n,
                                convo_error *err)
{
    convo_writes_in w = CONVO_WRITES_IN_INIT;
    w.thread_id = thread_id;
    w.checkpoint_ns = checkpoint_ns;
    w.checkpoint_id = checkpoint_id;
    w.task_id = task_id;
    w.task_path = task_path;
    w.writes = writes;
    w.n = n;
    return convo_checkpoint_put_writes_ex(s, &w, err);
}

static void free_encoded(convo_write_in *ws, const convo_writes_in *w)
{
    for (size_t i = 0; ws && i < w->n; i++)
        if (w->items && w->items[i])
            free((void *)ws[i].value.bytes);
    free(ws);
}

int convo_checkpoint_put_writes_ex(convo_store *s, const convo_writes_in *w, convo_error *err)
{
    NEED_DRIVER(s, checkpoint_put_writes, err);
    if (!w || w->version < 1 || w->version > CONVO_WRITES_IN_VERSION)
        return convo__error(err, CONVO_EINVAL, NULL, "writes are NULL or of an unknown version");
    const char *ns = w->checkpoint_ns ? w->checkpoint_ns : "";
    const char *task_path = w->task_path ? w->task_path : "";
    size_t n = w->n;
    int rc = convo__check_thread_id(w->thread_id, err);
    if (rc == 0)
        rc = check_key("checkpoint namespace", ns, 1, err);
    if (rc == 0)
        rc = check_key("checkpoint id", w->checkpoint_id, 0, err);
    if (rc == 0)
        rc = check_key("task id", w->task_id, 0, err);
    if (rc == 0)
        rc = check_key("task path", task_path, 1, err);
    if (rc == 0 && n && !w->writes)
        rc = convo__error(err, CONVO_EINVAL, NULL, "writes is NULL");
    convo_write_in *ws = rc == 0 && n ? calloc(n, sizeof *ws) : NULL;
    if (rc == 0 && n && !ws)
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    size_t bytes = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        ws[i] = w->writes[i];
        rc = check_key("write channel", ws[i].channel, 0, err);
        if (rc == 0 && w->items && w->items[i]) {
            void *enc = NULL;
            size_t len = 0;
            rc = convo__items_encode_write(s, w->items[i], &enc, &len, err);
            ws[i].value.type = CONVO_ITEMS_TYPE;
            ws[i].value.bytes = enc;
            ws[i].value.len = len;
        } else if (rc == 0) {
            rc = check_blob("write value", &ws[i].value, err);
        }
        for (size_t j = 0; rc == 0 && j < i; j++)
            if (ws[j].idx == ws[i].idx)
                rc = convo__error(err, CONVO_EINVAL, NULL, "write idx %lld given twice",
                                  (long long)ws[i].idx);
        bytes += ws[i].value.len;
    }
    if (rc == 0 && bytes > s->limits.max_checkpoint_bytes)
        rc = convo__error(err, CONVO_ETOOLARGE, NULL,
                          "writes of %zu bytes exceed the limit of %zu bytes", bytes,
                          s->limits.max_checkpoint_bytes);
    if (rc == 0 && n > 0 && w->items) /* a seq past the log would be a dangling reference */
        rc = convo__items_check_seqs(s, w->thread_id, "write", w->items, n, 0, err);
    if (rc == 0 && n > 0)
        rc = convo__scrubbed(s,
                             s->driver->checkpoint_put_writes(s->backend, w->thread_id, ns,
                                                              w->checkpoint_id, w->task_id,
                                                              task_path, ws, n, err),
                             err);
    free_encoded(ws, w);
    return rc;
}

int convo_checkpoint_get(convo_store *s, const char *thread_id, const char *checkpoint_ns,
                         const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    convo_checkpoint_get_opts o = CONVO_CHECKPOINT_GET_OPTS_INIT;
    o.thread_id = thread_id;
    o.checkpoint_ns = checkpoint_ns;
    o.checkpoint_id = checkpoint_id;
    return convo_checkpoint_get_ex(s, &o, out, err);
}

/* What a caller says it holds of a thread's log: nothing, or a length at a
 * generation. */
static int check_known(const convo__known *k, convo_error *err)
{
    if (k->length < 0)
        return convo__error(err, CONVO_EINVAL, NULL, "known_length %lld is negative",
                            (long long)k->length);
    if (k->length > 0 && (k->generation < 0 || k->origin < 0))
        return convo__error(err, CONVO_EINVAL, NULL,
                            "known_length %lld needs the generation and the origin it was "
                            "read at (known_generation and known_origin >= 0)",
                            (long long)k->length);
    return 0;
}

int convo_checkpoint_get_ex(convo_store *s, const convo_checkpoint_get_opts *opts,
                            convo_checkpoint **out, convo_error *err)
{
    convo__error_clear(err);
    if (out)
        *out = NULL;
    if (!opts)
        return convo__error(err, CONVO_EINVAL, NULL, "opts is NULL");
    if (opts->version < 1 || opts->version > CONVO_CHECKPOINT_GET_OPTS_VERSION)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "unsupported convo_checkpoint_get_opts version %u", opts->version);
    convo__known k = {opts->known_generation, opts->known_length, opts->known_origin};
    int rc = check_known(&k, err);
    if (rc == 0)
        rc = convo__checkpoint_get_raw(s, opts->thread_id, opts->checkpoint_ns,
                                       opts->checkpoint_id, out, err);
    if (rc == 0 && (rc = convo__items_resolve(s, *out, &k, 0, err)) == 0)
        rc = convo__body_resolve(*out, err);
    if (rc != 0 && out && *out) {
        convo_checkpoint_free(*out);
        *out = NULL;
    }
    return rc;
}

int convo__checkpoint_get_raw(convo_store *s, const char *thread_id, const char *checkpoint_ns,
                              const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    NEED_DRIVER(s, checkpoint_get, err);
    if (!out)
        return convo__error(err, CONVO_EINVAL, NULL, "out is NULL");
    *out = NULL;
    if (!checkpoint_ns)
        checkpoint_ns = "";
    int rc = convo__check_thread_id(thread_id, err);
    if (rc == 0)
        rc = check_key("checkpoint namespace", checkpoint_ns, 1, err);
    if (rc == 0 && checkpoint_id)
        rc = check_key("checkpoint id", checkpoint_id, 0, err);
    if (rc == 0)
        rc = s->driver->checkpoint_get(s->backend, thread_id, checkpoint_ns, checkpoint_id, out,
                                       err);
    return convo__scrubbed(s, rc, err);
}

/* list opts v5 only_channel: cp as read by the driver, cut down to that channel
 * and its writes, without its body and metadata (before anything is resolved:
 * neither the log nor the body code is read for what is dropped). */
static int keep_channel(convo_checkpoint *cp, const char *channel, convo_error *err)
{
    char *empty = strdup("{}");
    if (!empty)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    free(cp->metadata);
    cp->metadata = empty;
    free(cp->body_type);
    free(cp->body);
    cp->body_type = NULL;
    cp->body = NULL;
    cp->body_len = 0;
    size_t n = 0;
    for (size_t i = 0; i < cp->nchannels; i++) {
        if (strcmp(cp->channels[i].channel, channel) == 0)
            cp->channels[n++] = cp->channels[i];
        else
            channel_free(&cp->channels[i]);
    }
    cp->nchannels = n;
    n = 0;
    for (size_t i = 0; i < cp->nwrites; i++) {
        if (strcmp(cp->writes[i].channel, channel) == 0)
            cp->writes[n++] = cp->writes[i];
        else
            write_free(&cp->writes[i]);
    }
    cp->nwrites = n;
    return 0;
}

int convo_checkpoint_list(convo_store *s, const convo_checkpoint_list_opts *opts,
                          convo_checkpoint_set **out, convo_error *err)
{
    NEED_DRIVER(s, checkpoint_list, err);
    if (!out)
        return convo__error(err, CONVO_EINVAL, NULL, "out is NULL");
    *out = NULL;
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    if (opts) {
        if (opts->version < 1 || opts->version > CONVO_CHECKPOINT_LIST_OPTS_VERSION)
            return convo__error(err, CONVO_EINVAL, NULL, "unknown checkpoint list opts version");
        memcpy(&o, opts,
               opts->version >= 5   ? sizeof o
               : opts->version == 4 ? offsetof(convo_checkpoint_list_opts, only_channel)
               : opts->version == 3 ? offsetof(convo_checkpoint_list_opts, without_channel_items)
               : opts->version == 2 ? offsetof(convo_checkpoint_list_opts, known_generation)
                                    : offsetof(convo_checkpoint_list_opts, before_thread_id));
        o.version = CONVO_CHECKPOINT_LIST_OPTS_VERSION;
    }
    convo__known k = {o.known_generation, o.known_length, o.known_origin};
    int rc = check_known(&k, err);
    if (rc == 0 && o.without_channel_items != 0 && o.without_channel_items != 1)
        rc = convo__error(err, CONVO_EINVAL, NULL, "without_channel_items is %d, not 0 or 1",
                          o.without_channel_items);
    if (rc == 0 && o.only_channel)
        rc = check_key("only_channel", o.only_channel, 0, err);
    if (rc == 0 && o.known_length > 0 && !o.thread_id)
        rc = convo__error(err, CONVO_EINVAL, NULL,
                          "known_length is what is known of one thread's log: it needs thread_id");
    if (rc == 0 && o.thread_id)
        rc = convo__check_thread_id(o.thread_id, err);
    if (rc == 0 && o.checkpoint_ns)
        rc = check_key("checkpoint namespace", o.checkpoint_ns, 1, err);
    if (!o.before)
        o.before_thread_id = o.before_ns = NULL;
    if (rc == 0 && o.before) {
        /* Drivers get `before` with its thread and namespace, always. */
        if (!o.before_thread_id)
            o.before_thread_id = o.thread_id;
        if (!o.before_ns)
            o.before_ns = o.checkpoint_ns ? o.checkpoint_ns : "";
        rc = check_key("before", o.before, 0, err);
        if (rc == 0 && !o.before_thread_id)
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "before needs its thread: before_thread_id or thread_id");
        if (rc == 0)
            rc = convo__check_thread_id(o.before_thread_id, err);
        if (rc == 0)
            rc = check_key("before namespace", o.before_ns, 1, err);
    }
    json_t *filter = NULL;
    if (rc == 0 && o.filter_json) {
        json_error_t jerr;
        filter = json_loads(o.filter_json, 0, &jerr);
        if (!filter || !json_is_object(filter))
            rc = convo__error(err, CONVO_EINVAL, NULL, "metadata filter is not a JSON object");
    }
    if (rc == 0)
        rc = convo__scrubbed(s, s->driver->checkpoint_list(s->backend, &o, filter, out, err), err);
    json_decref(filter);
    for (size_t i = 0; rc == 0 && o.only_channel && i < (*out)->count; i++)
        rc = keep_channel((*out)->items[i], o.only_channel, err);
    /* one read of the log for the whole set where the caller knows it (a walk
     * over ancestors: not two loads per checkpoint) */
    if (rc == 0)
        rc = convo__items_resolve_many(s, (*out)->items, (*out)->count, &k,
                                       o.only_channel ? 1 : o.without_channel_items, err);
    for (size_t i = 0; rc == 0 && !o.only_channel && i < (*out)->count; i++)
        rc = convo__body_resolve((*out)->items[i], err);
    if (rc != 0) {
        convo_checkpoint_set_free(*out);
        *out = NULL;
    }
    return rc;
}

int convo_checkpoint_prune(convo_store *s, const char *thread_id, size_t keep_last,
                           convo_error *err)
{
    NEED_DRIVER(s, checkpoint_prune, err);
    int rc = convo__check_thread_id(thread_id, err);
    if (rc == 0)
        rc = s->driver->checkpoint_prune(s->backend, thread_id, keep_last, err);
    return convo__scrubbed(s, rc, err);
}
