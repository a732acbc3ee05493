/* items.c — log references: a list of items (messages) kept in the thread's
 * log, stored as seq ranges of the log plus the items that are not in it
 * (docs/checkpoints.md "Log references"). A put plans them (what enters the
 * log, what stays inline, which values of the parent become references), get
 * and list resolve them with one load of the log per checkpoint.
 *
 * Stored layout, version 1 (blob type "convo/items", msgpack):
 *   [1, key: str|nil, rest_type: str|nil, rest: bin|nil, segs: [seg...]]
 *   seg = [from, to]  (the log's messages from <= seq < to, from < to)
 *       | str         (one item kept inline: a message's JSON text)        */
#include "items.h"
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#define ITEMS_LAYOUT 1
/* A reference naming more items than this is corrupt (a guard for decoding). */
#define MAX_ITEMS 10000000

void convo__ref_free(ref *r)
{
    msgpack_unpacked_destroy(&r->up);
    free(r->segs);
    memset(r, 0, sizeof *r);
}

static int corrupt(convo_error *err, const char *why)
{
    return convo__error(err, CONVO_ECORRUPT, NULL, "a log reference (%s) is malformed: %s",
                        CONVO_ITEMS_TYPE, why);
}

static int opt_str(const msgpack_object *o, const char **s, size_t *len)
{
    if (o->type == MSGPACK_OBJECT_NIL)
        return 0;
    if (o->type != MSGPACK_OBJECT_STR)
        return -1;
    *s = o->via.str.ptr;
    *len = o->via.str.size;
    return 0;
}

int convo__ref_decode(const void *bytes, size_t len, ref *r, convo_error *err)
{
    memset(r, 0, sizeof *r);
    msgpack_unpacked_init(&r->up);
    size_t off = 0;
    if (!bytes || msgpack_unpack_next(&r->up, bytes, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        off != len)
        return corrupt(err, "not one msgpack value");
    const msgpack_object *o = &r->up.data;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 5)
        return corrupt(err, "not an array of 5");
    const msgpack_object *a = o->via.array.ptr;
    int64_t v;
    if (convo__unpack_int(&a[0], &v) != 0 || v != ITEMS_LAYOUT)
        return corrupt(err, "unknown layout version");
    if (opt_str(&a[1], &r->key, &r->key_len) || opt_str(&a[2], &r->rest_type, &r->rest_type_len))
        return corrupt(err, "key or rest type not a string");
    if (a[3].type == MSGPACK_OBJECT_BIN) {
        r->rest = a[3].via.bin.ptr;
        r->rest_len = a[3].via.bin.size;
    } else if (a[3].type != MSGPACK_OBJECT_NIL) {
        return corrupt(err, "rest not bytes");
    }
    if (!r->rest_type != !r->rest && !(r->rest_type && a[3].type == MSGPACK_OBJECT_BIN))
        return corrupt(err, "rest without its type");
    if (a[4].type != MSGPACK_OBJECT_ARRAY)
        return corrupt(err, "segments not an array");
    const msgpack_object_array *segs = &a[4].via.array;
    uint64_t total = 0;
    for (uint32_t i = 0; i < segs->size; i++) {
        const msgpack_object *g = &segs->ptr[i];
        int64_t f, t;
        if (g->type == MSGPACK_OBJECT_STR) {
            total++;
        } else if (g->type == MSGPACK_OBJECT_ARRAY && g->via.array.size == 2 &&
                   convo__unpack_int(&g->via.array.ptr[0], &f) == 0 &&
                   convo__unpack_int(&g->via.array.ptr[1], &t) == 0 && f >= 0 && t > f &&
                   t - f <= MAX_ITEMS) {
            total += (uint64_t)(t - f);
        } else {
            return corrupt(err, "a segment is neither [from, to) nor a text");
        }
        if (total > MAX_ITEMS)
            return corrupt(err, "too many items");
    }
    r->segs = malloc((segs->size ? segs->size : 1) * sizeof *r->segs);
    if (!r->segs)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    for (uint32_t i = 0; i < segs->size; i++) {
        const msgpack_object *g = &segs->ptr[i];
        if (g->type == MSGPACK_OBJECT_STR) {
            r->segs[r->nsegs++] = (seg){-1, 1, g->via.str.ptr, g->via.str.size};
            r->has_inline = 1;
            continue;
        }
        int64_t f, t;
        convo__unpack_int(&g->via.array.ptr[0], &f);
        convo__unpack_int(&g->via.array.ptr[1], &t);
        if (r->end == 0 || f < r->from)
            r->from = f;
        if (t > r->end)
            r->end = t;
        r->segs[r->nsegs++] = (seg){f, t - f, NULL, 0};
    }
    r->n = (int64_t)total;
    return 0;
}

/* Run i continues run i - 1 of the log (the two are stored as one). */
static int continues(const seg *segs, size_t i)
{
    return i > 0 && segs[i].seq >= 0 && segs[i - 1].seq >= 0 &&
           segs[i].seq == segs[i - 1].seq + segs[i - 1].count;
}

/* Packs a reference; runs of consecutive seqs become one [from, to]. */
static int ref_encode(const char *key, const convo_blob *rest, const seg *segs, size_t n,
                      msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    size_t nsegs = 0;
    for (size_t i = 0; i < n; i++)
        nsegs += !continues(segs, i);
    int bad = msgpack_pack_array(&pk, 5) || msgpack_pack_int64(&pk, ITEMS_LAYOUT) ||
              convo__pack_str(&pk, key);
    if (rest && rest->type)
        bad = bad || convo__pack_str(&pk, rest->type) ||
              convo__pack_bin(&pk, rest->bytes, rest->len);
    else
        bad = bad || msgpack_pack_nil(&pk) || msgpack_pack_nil(&pk);
    bad = bad || msgpack_pack_array(&pk, nsegs);
    for (size_t i = 0; !bad && i < n;) {
        if (segs[i].seq < 0) {
            bad = msgpack_pack_str(&pk, segs[i].len) ||
                  msgpack_pack_str_body(&pk, segs[i].text, segs[i].len);
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && continues(segs, j))
            j++;
        bad = msgpack_pack_array(&pk, 2) || msgpack_pack_int64(&pk, segs[i].seq) ||
              msgpack_pack_int64(&pk, segs[j - 1].seq + segs[j - 1].count);
        i = j;
    }
    return bad ? CONVO_ENOMEM : 0;
}

int convo__items_check(const void *bytes, size_t len, int64_t *end, convo_error *err)
{
    ref r;
    int rc = convo__ref_decode(bytes, len, &r, err);
    if (rc == CONVO_ECORRUPT) {
        if (err)
            err->code = CONVO_EINVAL;
        rc = CONVO_EINVAL;
    }
    if (rc == 0 && end)
        *end = r.end;
    convo__ref_free(&r);
    return rc;
}

void convo__items_free(cp_items *it)
{
    if (!it)
        return;
    for (size_t i = 0; i < it->pub.n; i++)
        free(it->texts[i]);
    free(it->texts);
    free(it->lengths);
    free(it->seqs);
    free(it->key);
    free(it->rest_type);
    free(it->rest);
    free(it);
}

/* ---- reading the log ---- */

/* Messages [from, to) of the thread, all of them, else CONVO_ECORRUPT. */
int convo__items_load(convo_store *s, const char *thread_id, int64_t from, int64_t to,
                      convo_history **out, convo_error *err)
{
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.from_seq = from;
    o.limit = to - from;
    o.with_extra = 0;
    *out = NULL;
    int rc = convo__scrubbed(s, s->driver->load(s->backend, thread_id, &o, out, err), err);
    if (rc == CONVO_ENOTFOUND)
        rc = 0; /* a reference into a thread that is gone: the check below */
    if (rc != 0)
        return rc;
    convo_history *h = *out;
    if (!h || (int64_t)h->count != to - from || (h->count && h->msgs[0].seq != from)) {
        convo_history_free(h);
        *out = NULL;
        convo__error_clear(err);
        return convo__error(err, CONVO_ECORRUPT, NULL,
                            "a log reference names messages %lld..%lld that the thread does not "
                            "have",
                            (long long)from, (long long)to - 1);
    }
    return 0;
}

static char *dupn(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = 0;
    }
    return c;
}

/* The resolved list of r, texts of the log from h (messages from h_from on);
 * items whose seq is below `known` get no text (the caller holds it). */
static cp_items *build_items(const ref *r, const convo_history *h, int64_t h_from, int64_t known)
{
    cp_items *it = calloc(1, sizeof *it);
    if (!it)
        return NULL;
    size_t n = (size_t)r->n, i = 0;
    it->texts = calloc(n ? n : 1, sizeof *it->texts);
    it->lengths = malloc((n ? n : 1) * sizeof *it->lengths);
    it->seqs = malloc((n ? n : 1) * sizeof *it->seqs);
    int failed = !it->texts || !it->lengths || !it->seqs;
    for (size_t g = 0; !failed && g < r->nsegs; g++) {
        const seg *e = &r->segs[g];
        for (int64_t q = 0; !failed && q < e->count; q++, i++) {
            int64_t seq = e->seq >= 0 ? e->seq + q : -1;
            const char *t = e->text;
            size_t len = e->len;
            if (seq >= 0 && seq < known) {
                t = NULL;
                len = 0;
            } else if (seq >= 0) {
                const convo_history_msg *m = &h->msgs[seq - h_from];
                t = m->bytes;
                len = m->len;
            }
            it->texts[i] = t ? dupn(t, len) : NULL;
            it->lengths[i] = len;
            it->seqs[i] = seq;
            failed = t && !it->texts[i];
            it->pub.n = i + 1; /* what the free below releases */
        }
    }
    if (!failed && r->key)
        failed = !(it->key = dupn(r->key, r->key_len));
    if (!failed && r->rest_type) {
        failed = !(it->rest_type = dupn(r->rest_type, r->rest_type_len)) ||
                 !(it->rest = malloc(r->rest_len ? r->rest_len : 1));
        if (!failed && r->rest_len)
            memcpy(it->rest, r->rest, r->rest_len);
    }
    if (failed) {
        convo__items_free(it);
        return NULL;
    }
    it->pub.n = n;
    it->pub.items = (const char *const *)it->texts;
    it->pub.lengths = it->lengths;
    it->pub.seqs = it->seqs;
    it->pub.key = it->key;
    it->pub.rest.type = it->rest_type;
    it->pub.rest.bytes = it->rest;
    it->pub.rest.len = it->rest_type ? r->rest_len : 0;
    return it;
}

int convo__is_items(const char *type)
{
    return type && strcmp(type, CONVO_ITEMS_TYPE) == 0;
}

/* The log under cp's references, [from, end), into *h (messages from *h_from
 * on). When the caller knows [0, known->length) of this very thread at this
 * generation, only [min(length, end) - 1, end) and message 0 are read, and
 * *elide says below which seq the texts are left out. */
static int load_log(convo_store *s, convo_checkpoint *cp, const convo__known *known,
                    int64_t from, int64_t end, convo_history **h, int64_t *h_from,
                    int64_t *elide, convo_error *err)
{
    *h = NULL;
    *h_from = from;
    *elide = 0;
    if (known && known->length > from) {
        int64_t lo = (known->length < end ? known->length : end) - 1;
        convo_history *first = NULL;
        /* the tail first, then message 0: a thread deleted and started again
         * between the two reads shows a new origin, never the old one */
        int rc = convo__items_load(s, cp->thread_id, lo, end, h, err);
        if (rc == 0 && lo > 0)
            rc = convo__items_load(s, cp->thread_id, 0, 1, &first, err);
        if (rc != 0) {
            convo_history_free(*h);
            *h = NULL;
            return rc;
        }
        const convo_history *zero = lo > 0 ? first : *h;
        int same = (*h)->generation == known->generation &&
                   zero->generation == known->generation &&
                   zero->msgs[0].created_at == known->origin;
        convo_history_free(first);
        if (same) {
            *h_from = lo;
            *elide = known->length;
            cp->generation = known->generation;
            cp->origin = known->origin;
            return 0;
        }
        convo_history_free(*h);
        *h = NULL;
    }
    int rc = convo__items_load(s, cp->thread_id, from, end, h, err);
    if (rc == 0) {
        cp->generation = (*h)->generation;
        cp->origin = from == 0 ? (*h)->msgs[0].created_at : -1;
    }
    return rc;
}

/* The log range [*from, *end) cp's references name (*end 0: none), decoded
 * as convo__items_resolve decodes them. */
static int refs_span(const convo_checkpoint *cp, int without_channel_items, int64_t *from,
                     int64_t *end, convo_error *err)
{
    *from = *end = 0;
    for (size_t k = 0; k < cp->nchannels + cp->nwrites; k++) {
        int channel = k < cp->nchannels;
        const cp_channel *c = channel ? &cp->channels[k] : NULL;
        const cp_write *w = channel ? NULL : &cp->writes[k - cp->nchannels];
        if (!convo__is_items(channel ? c->type : w->type) || (channel && without_channel_items))
            continue;
        ref r;
        int rc = convo__ref_decode(channel ? c->bytes : w->bytes, channel ? c->len : w->len, &r,
                                   err);
        if (rc != 0)
            return rc;
        if (r.end > 0) {
            if (*end == 0 || r.from < *from)
                *from = r.from;
            if (r.end > *end)
                *end = r.end;
        }
        convo__ref_free(&r);
    }
    return 0;
}

/* Every reference of cp resolved against h (messages from h_from on), texts
 * below `elide` left out. */
static int resolve_from(convo_checkpoint *cp, int without_channel_items, const convo_history *h,
                        int64_t h_from, int64_t elide, convo_error *err)
{
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < cp->nchannels + cp->nwrites; k++) {
        int channel = k < cp->nchannels;
        cp_channel *c = channel ? &cp->channels[k] : NULL;
        cp_write *w = channel ? NULL : &cp->writes[k - cp->nchannels];
        if (!convo__is_items(channel ? c->type : w->type))
            continue;
        ref r;
        if ((rc = convo__ref_decode(channel ? c->bytes : w->bytes, channel ? c->len : w->len, &r,
                                    err)) != 0)
            break;
        if (channel && without_channel_items)
            r.nsegs = 0, r.n = 0; /* its key and rest, no item */
        cp_items *it = build_items(&r, h, h_from, elide);
        convo__ref_free(&r);
        if (!it)
            rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        else if (channel)
            c->items = it;
        else
            w->items = it;
    }
    return rc;
}

int convo__items_resolve_many(convo_store *s, convo_checkpoint *const *cps, size_t n,
                              const convo__known *known, int without_channel_items,
                              convo_error *err)
{
    int64_t lo = 0, end = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int64_t f, e;
        rc = refs_span(cps[i], without_channel_items, &f, &e, err);
        if (rc == 0 && e > end)
            end = e;
        if (rc == 0 && i > 0 && strcmp(cps[i]->thread_id, cps[0]->thread_id) != 0)
            end = -1; /* not one thread: each on its own */
    }
    if (rc != 0)
        return rc;
    convo_history *h = NULL, *first = NULL;
    int same = 0;
    if (n > 1 && end > 0 && known && known->length > 0) {
        /* what load_log() checks for one, once for them all: the log's last
         * message they name and message 0 at the generation and origin known
         * (seqs are dense: every lower one is there too) */
        lo = (known->length < end ? known->length : end) - 1;
        rc = convo__items_load(s, cps[0]->thread_id, lo, end, &h, err);
        if (rc == 0 && lo > 0)
            rc = convo__items_load(s, cps[0]->thread_id, 0, 1, &first, err);
        if (rc == 0) {
            const convo_history *zero = lo > 0 ? first : h;
            same = h->generation == known->generation && zero->generation == known->generation &&
                   zero->msgs[0].created_at == known->origin;
        }
        convo_history_free(first);
        if (rc == CONVO_ECORRUPT)
            convo__error_name_thread(err, cps[0]->thread_id);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!same) {
            rc = convo__items_resolve(s, cps[i], known, without_channel_items, err);
            continue;
        }
        int64_t f, e;
        rc = refs_span(cps[i], without_channel_items, &f, &e, err);
        if (rc == 0 && e > 0) {
            cps[i]->generation = known->generation;
            cps[i]->origin = known->origin;
        }
        if (rc == 0)
            rc = resolve_from(cps[i], without_channel_items, h, lo, known->length, err);
    }
    convo_history_free(h);
    return rc;
}

int convo__items_resolve(convo_store *s, convo_checkpoint *cp, const convo__known *known,
                         int without_channel_items, convo_error *err)
{
    size_t total = cp->nchannels + cp->nwrites, nrefs = 0;
    for (size_t i = 0; i < cp->nchannels; i++)
        nrefs += convo__is_items(cp->channels[i].type);
    for (size_t i = 0; i < cp->nwrites; i++)
        nrefs += convo__is_items(cp->writes[i].type);
    if (nrefs == 0)
        return 0;
    ref *refs = calloc(total, sizeof *refs);
    if (!refs)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    int rc = 0;
    int64_t from = 0, end = 0;
    for (size_t k = 0; rc == 0 && k < total; k++) {
        const char *type = k < cp->nchannels ? cp->channels[k].type
                                             : cp->writes[k - cp->nchannels].type;
        if (!convo__is_items(type))
            continue;
        const void *b = k < cp->nchannels ? cp->channels[k].bytes
                                          : cp->writes[k - cp->nchannels].bytes;
        size_t len = k < cp->nchannels ? cp->channels[k].len : cp->writes[k - cp->nchannels].len;
        rc = convo__ref_decode(b, len, &refs[k], err);
        if (rc == 0 && without_channel_items && k < cp->nchannels) {
            refs[k].nsegs = 0; /* its key and rest, no item: nothing of the log to read */
            refs[k].n = refs[k].from = refs[k].end = 0;
        }
        if (rc == 0 && refs[k].end > 0) {
            if (end == 0 || refs[k].from < from)
                from = refs[k].from;
            if (refs[k].end > end)
                end = refs[k].end;
        }
    }
    convo_history *h = NULL;
    int64_t h_from = from, elide = 0;
    if (rc == 0 && end > 0)
        rc = load_log(s, cp, known, from, end, &h, &h_from, &elide, err);
    for (size_t k = 0; rc == 0 && k < total; k++) {
        const char *type = k < cp->nchannels ? cp->channels[k].type
                                             : cp->writes[k - cp->nchannels].type;
        if (!convo__is_items(type))
            continue;
        cp_items *it = build_items(&refs[k], h, h_from, elide);
        if (!it)
            rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        else if (k < cp->nchannels)
            cp->channels[k].items = it;
        else
            cp->writes[k - cp->nchannels].items = it;
    }
    if (rc == CONVO_ECORRUPT)
        convo__error_name_thread(err, cp->thread_id);
    convo_history_free(h);
    for (size_t k = 0; k < total; k++)
        convo__ref_free(&refs[k]);
    free(refs);
    return rc;
}

/* ---- writing ---- */

static size_t item_len(const convo_items_in *it, size_t i)
{
    return it->lengths ? it->lengths[i] : strlen(it->items[i]);
}

/* Every item has a text (a valid message) or a seq; the key and rest are sane. */
int convo__items_validate(convo_store *s, const char *what, const convo_items_in *it,
                       convo_error *err)
{
    if (it->n && !it->items && !it->seqs)
        return convo__error(err, CONVO_EINVAL, NULL, "%s: items is NULL", what);
    if (it->key && convo__check_key("items key", it->key, 0, err) != 0)
        return CONVO_EINVAL;
    if (it->rest.type && !it->key)
        return convo__error(err, CONVO_EINVAL, NULL, "%s: a rest without a key", what);
    if (it->rest.type && (!*it->rest.type || (it->rest.len && !it->rest.bytes)))
        return convo__error(err, CONVO_EINVAL, NULL, "%s: rest needs a type and its bytes",
                            what);
    for (size_t i = 0; i < it->n; i++) {
        int64_t q = it->seqs ? it->seqs[i] : -1;
        const char *t = it->items ? it->items[i] : NULL;
        if (q < -1)
            return convo__error(err, CONVO_EINVAL, NULL, "%s: item %zu has seq %lld", what, i,
                                (long long)q);
        if (!t && q < 0)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "%s: item %zu has neither a text nor a seq", what, i);
        if (q >= 0)
            continue; /* the log's message: its text is not read (O(new items) a put) */
        char *role = NULL;
        int rc = convo__check_message(t, item_len(it, i), &s->limits, s->roles, &role, err);
        free(role);
        if (rc != 0) {
            char m[sizeof err->message];
            snprintf(m, sizeof m, "%s", err->message);
            convo__error_clear(err);
            return convo__error(err, rc, NULL, "%s: item %zu: %s", what, i, m);
        }
    }
    return 0;
}

int convo__ref_blob(const char *key, const convo_blob *rest, const seg *segs, size_t nsegs,
                    void **bytes, size_t *len, convo_error *err)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (ref_encode(key, rest, segs, nsegs, &sb) != 0) {
        msgpack_sbuffer_destroy(&sb);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    *bytes = sb.data; /* the caller frees it */
    *len = sb.size;
    return 0;
}

/* The highest seq the caller gave in items (-1: none), and its index. */
static int64_t highest_seq(const convo_items_in *it, size_t *at)
{
    int64_t hi = -1;
    for (size_t i = 0; it->seqs && i < it->n; i++)
        if (it->seqs[i] > hi)
            hi = it->seqs[i], *at = i;
    return hi;
}

int convo__items_check_seqs(convo_store *s, const char *thread_id, const char *what,
                            const convo_items_in *const *lists, size_t n, int64_t covered,
                            convo_error *err)
{
    int64_t hi = -1;
    size_t at = 0, list = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = 0;
        int64_t q = lists[k] ? highest_seq(lists[k], &i) : -1;
        if (q > hi)
            hi = q, at = i, list = k;
    }
    if (hi < covered)
        return 0;
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.tail = 1;
    o.with_extra = 0;
    convo_history *h = NULL;
    int rc = convo__scrubbed(s, s->driver->load(s->backend, thread_id, &o, &h, err), err);
    int64_t length = rc == 0 ? h->length : 0;
    convo_history_free(h);
    if (rc == CONVO_ENOTFOUND) {
        convo__error_clear(err);
        rc = 0;
    }
    if (rc == 0 && hi >= length) {
        char where[64] = "";
        if (n > 1)
            snprintf(where, sizeof where, " of list %zu", list);
        rc = convo__error(err, CONVO_ECONFLICT, NULL,
                          "%s: item %zu%s has seq %lld, past the thread's %lld messages (a "
                          "view of the log from before a rewrite or a delete?): nothing written",
                          what, at, where, (long long)hi, (long long)length);
    }
    return rc;
}

int convo__items_encode_write(convo_store *s, const convo_items_in *it, void **bytes,
                              size_t *len, convo_error *err)
{
    *bytes = NULL;
    int rc = convo__items_validate(s, "write", it, err);
    seg *segs = rc == 0 ? malloc((it->n ? it->n : 1) * sizeof *segs) : NULL;
    if (rc == 0 && !segs)
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; rc == 0 && i < it->n; i++) {
        int64_t q = it->seqs ? it->seqs[i] : -1;
        segs[i] = q >= 0 ? (seg){q, 1, NULL, 0} : (seg){-1, 1, it->items[i], item_len(it, i)};
        if (it->seqs_out)
            it->seqs_out[i] = q;
    }
    if (rc == 0)
        rc = convo__ref_blob(it->key, &it->rest, segs, it->n, bytes, len, err);
    free(segs);
    return rc;
}
