/* items_put.c — planning a checkpoint put whose channels are lists of items
 * (log references, include/convo.h): which items are the log's messages
 * already, which fresh ones enter the log with this put, which stay inline,
 * and which values of the parent checkpoint become references in the same
 * atomic write (the driver's checkpoint_put_refs). */
#include "items.h"
#include <stdlib.h>
#include <string.h>

/* Puts retried after another writer grew the log (when the library chose the length). */
#define MAX_RETRIES 8
#define FRESH (-2) /* an item that enters the log with this put */

/* A list given as the log's first k messages and the items after them
 * (convo_checkpoint_in.channel_log_prefix), spelled out item by item. */
typedef struct expanded {
    convo_items_in in;
    const char **items;
    size_t *lengths;
    int64_t *seqs, *seqs_out;
} expanded;

typedef struct chplan {
    size_t ch;                /* its index in cp->channels */
    const convo_items_in *in; /* the caller's list, or &x.in when it has a log prefix */
    const convo_items_in *given;
    int64_t prefix;           /* the caller's channel_log_prefix (0 = none) */
    expanded x;
    ref parent;               /* the parent's list of this channel (n 0 when none) */
    int64_t *known;           /* per item: its log seq, or -1 */
    elem *els;                /* the plan: seq, FRESH, or -1 with an inline text */
    size_t first_fresh, nfresh;
    int64_t fresh_seq;        /* the seq of its first fresh item in the current attempt */
    void *bytes;              /* the encoded reference of the current attempt */
    size_t len;
} chplan;

/* A value of the parent that holds fresh items inline: it becomes a reference. */
typedef struct swapplan {
    ref r;
    const char *task_id, *channel, *version;
    int64_t idx;
    const char *type;
    const void *bytes;
    size_t len;
    int64_t *fresh_at; /* per element of r: the index among the put's fresh items, or -1 */
    void *enc;
    size_t enc_len;
    int64_t end;       /* 1 + the highest seq of the encoded reference */
} swapplan;

typedef struct plan {
    convo_store *s;
    const convo_checkpoint_in *cp;
    convo_checkpoint *parent;
    chplan *chs;
    size_t nchs;
    const elem **fresh; /* the fresh items in append order */
    size_t nfresh;
    swapplan *sw;
    size_t nsw;
    convo_body_plan body;
} plan;

static size_t text_len(const convo_items_in *it, size_t i)
{
    return it->lengths ? it->lengths[i] : strlen(it->items[i]);
}

static int same_text(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && memcmp(a, b, alen) == 0;
}

static void plan_free(plan *p)
{
    for (size_t k = 0; k < p->nchs; k++) {
        expanded *x = &p->chs[k].x;
        free(x->items);
        free(x->lengths);
        free(x->seqs);
        free(x->seqs_out);
        convo__ref_free(&p->chs[k].parent);
        free(p->chs[k].known);
        free(p->chs[k].els);
        free(p->chs[k].bytes);
    }
    for (size_t k = 0; k < p->nsw; k++) {
        convo__ref_free(&p->sw[k].r);
        free(p->sw[k].fresh_at);
        free(p->sw[k].enc);
    }
    free(p->chs);
    free(p->sw);
    free(p->fresh);
    convo__body_plan_free(&p->body);
    convo_checkpoint_free(p->parent);
}

static int oom(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

/* The parent's list of channel `name`, when its value there is a reference. */
static int parent_list(plan *p, const char *name, ref *out, int *found, convo_error *err)
{
    memset(out, 0, sizeof *out);
    msgpack_unpacked_init(&out->up);
    for (size_t i = 0; p->parent && i < p->parent->nchannels; i++) {
        const cp_channel *c = &p->parent->channels[i];
        if (strcmp(c->channel, name) == 0 && convo__is_items(c->type)) {
            *found = 1;
            convo__ref_free(out);
            return convo__ref_decode(c->bytes, c->len, out, err);
        }
    }
    return 0;
}

/* A message channel the parent has no list of (the first checkpoint, a
 * parent put without it): its list is taken to be the log's first messages. */
static int log_prefix(plan *p, chplan *c, convo_error *err)
{
    if (c->in->n == 0)
        return 0;
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.limit = (int64_t)c->in->n;
    o.with_extra = 0;
    convo_history *h = NULL;
    int rc = convo__scrubbed(p->s, p->s->driver->load(p->s->backend, p->cp->thread_id, &o, &h,
                                                      err), err);
    if (rc == CONVO_ENOTFOUND) {
        convo__error_clear(err);
        return 0;
    }
    size_t n = rc == 0 ? h->count : 0;
    if (rc == 0 && !(c->parent.els = malloc((n ? n : 1) * sizeof *c->parent.els)))
        rc = oom(err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        c->parent.els[i] = (elem){(int64_t)i, NULL, 0};
    if (rc == 0)
        c->parent.n = n;
    convo_history_free(h);
    return rc;
}

/* Which items are the log's messages: the seq the caller gave, else (compared
 * by text with one load of the log) the parent's item at the same place. */
static int find_known(plan *p, convo_error *err)
{
    int64_t from = 0, end = 0;
    for (size_t k = 0; k < p->nchs; k++) {
        chplan *c = &p->chs[k];
        const convo_items_in *in = c->in;
        c->known = malloc((in->n ? in->n : 1) * sizeof *c->known);
        if (!c->known)
            return oom(err);
        for (size_t i = 0; i < in->n; i++) {
            c->known[i] = in->seqs ? in->seqs[i] : -1;
            int64_t q = i < c->parent.n ? c->parent.els[i].seq : -1;
            if (c->known[i] < 0 && q >= 0) {
                if (end == 0 || q < from)
                    from = q;
                if (q + 1 > end)
                    end = q + 1;
            }
        }
    }
    if (end == 0)
        return 0;
    convo_history *h = NULL;
    int rc = convo__items_load(p->s, p->cp->thread_id, from, end, &h, err);
    for (size_t k = 0; rc == 0 && k < p->nchs; k++) {
        chplan *c = &p->chs[k];
        for (size_t i = 0; i < c->in->n && i < c->parent.n; i++) {
            int64_t q = c->parent.els[i].seq;
            if (c->known[i] >= 0 || q < 0)
                continue;
            const convo_history_msg *m = &h->msgs[q - from];
            if (same_text(c->in->items[i], text_len(c->in, i), m->bytes, m->len))
                c->known[i] = q;
        }
    }
    convo_history_free(h);
    return rc;
}

/* Item i of c is the parent's item i (the same seq, or the same inline text). */
static int matches_parent(const chplan *c, size_t i)
{
    const elem *e = &c->parent.els[i];
    if (e->seq >= 0)
        return c->known[i] == e->seq;
    return c->known[i] < 0 && same_text(c->in->items[i], text_len(c->in, i), e->text, e->len);
}

/* The rule for what enters the log (include/convo.h). */
static int plan_channel(chplan *c, convo_error *err)
{
    const convo_items_in *in = c->in;
    c->els = malloc((in->n ? in->n : 1) * sizeof *c->els);
    if (!c->els)
        return oom(err);
    size_t m = 0;
    while (m < in->n && m < c->parent.n && matches_parent(c, m))
        m++;
    int append = in->log && m == c->parent.n;
    for (size_t i = m; append && i < in->n; i++)
        append = c->known[i] < 0;
    c->first_fresh = m;
    c->nfresh = append ? in->n - m : 0;
    for (size_t i = 0; i < in->n; i++) {
        if (c->known[i] >= 0)
            c->els[i] = (elem){c->known[i], NULL, 0};
        else
            c->els[i] = (elem){append ? FRESH : -1, in->items[i], text_len(in, i)};
    }
    return 0;
}

/* The parent's values holding fresh items inline: its pending writes (idx >= 0:
 * written once, never replaced) and its channel values. */
static int plan_swaps(plan *p, convo_error *err)
{
    convo_checkpoint *par = p->parent;
    if (!par || p->nfresh == 0)
        return 0;
    size_t total = par->nchannels + par->nwrites;
    p->sw = calloc(total ? total : 1, sizeof *p->sw);
    if (!p->sw)
        return oom(err);
    for (size_t k = 0; k < total; k++) {
        swapplan w = {0};
        if (k < par->nchannels) {
            const cp_channel *c = &par->channels[k];
            w.channel = c->channel, w.version = c->version;
            w.type = c->type, w.bytes = c->bytes, w.len = c->len;
        } else {
            const cp_write *x = &par->writes[k - par->nchannels];
            if (x->idx < 0)
                continue;
            w.task_id = x->task_id, w.idx = x->idx;
            w.type = x->type, w.bytes = x->bytes, w.len = x->len;
        }
        if (!convo__is_items(w.type))
            continue;
        int rc = convo__ref_decode(w.bytes, w.len, &w.r, err);
        if (rc == CONVO_ECORRUPT) { /* not ours to repair here: leave it as it is */
            convo__error_clear(err);
            convo__ref_free(&w.r);
            continue;
        }
        if (rc != 0 || !w.r.has_inline) {
            convo__ref_free(&w.r);
            if (rc != 0)
                return rc;
            continue;
        }
        w.fresh_at = malloc(w.r.n * sizeof *w.fresh_at);
        if (!w.fresh_at) {
            convo__ref_free(&w.r);
            return oom(err);
        }
        /* each inline item takes the next fresh item with the same text,
         * in order (a write of [a, b] appended as ... a, b) */
        size_t cursor = 0, matched = 0;
        for (size_t i = 0; i < w.r.n; i++) {
            w.fresh_at[i] = -1;
            const elem *e = &w.r.els[i];
            if (e->seq >= 0)
                continue;
            for (size_t t = 0; t < p->nfresh; t++) {
                size_t j = (cursor + t) % p->nfresh;
                if (same_text(e->text, e->len, p->fresh[j]->text, p->fresh[j]->len)) {
                    w.fresh_at[i] = (int64_t)j;
                    cursor = j + 1;
                    matched++;
                    break;
                }
            }
        }
        if (matched == 0) {
            convo__ref_free(&w.r);
            free(w.fresh_at);
            continue;
        }
        p->sw[p->nsw++] = w;
    }
    return 0;
}

/* Encodes the channels and swaps with the fresh items at seq base.. */
static int encode_attempt(plan *p, int64_t base, int64_t *log_length, convo_error *err)
{
    int64_t next = base;
    for (size_t k = 0; k < p->nchs; k++) {
        chplan *c = &p->chs[k];
        c->fresh_seq = next;
        for (size_t i = c->first_fresh; i < c->first_fresh + c->nfresh; i++)
            c->els[i].seq = next++;
        for (size_t i = 0; i < c->in->n; i++)
            if (c->els[i].seq + 1 > *log_length)
                *log_length = c->els[i].seq + 1;
        free(c->bytes);
        c->bytes = NULL;
        int rc = convo__ref_blob(c->in->key, &c->in->rest, c->els, c->in->n, &c->bytes, &c->len, err);
        if (rc != 0)
            return rc;
        for (size_t i = c->first_fresh; i < c->first_fresh + c->nfresh; i++)
            c->els[i].seq = FRESH; /* for the next attempt */
    }
    for (size_t k = 0; k < p->nsw; k++) {
        swapplan *w = &p->sw[k];
        elem *els = malloc(w->r.n * sizeof *els);
        if (!els)
            return oom(err);
        w->end = 0;
        for (size_t i = 0; i < w->r.n; i++) {
            els[i] = w->r.els[i];
            if (w->fresh_at[i] >= 0)
                els[i] = (elem){base + w->fresh_at[i], NULL, 0};
            if (els[i].seq + 1 > w->end)
                w->end = els[i].seq + 1;
        }
        free(w->enc);
        w->enc = NULL;
        convo_blob rest = {NULL, NULL, 0};
        char *key = NULL, *rtype = NULL;
        int rc = 0;
        if (w->r.key && !(key = strndup(w->r.key, w->r.key_len)))
            rc = oom(err);
        if (rc == 0 && w->r.rest_type) {
            if (!(rtype = strndup(w->r.rest_type, w->r.rest_type_len)))
                rc = oom(err);
            rest = (convo_blob){rtype, w->r.rest, w->r.rest_len};
        }
        if (rc == 0)
            rc = convo__ref_blob(key, &rest, els, w->r.n, &w->enc, &w->enc_len, err);
        free(key);
        free(rtype);
        free(els);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The thread's length and generation now (0, 0 for a thread not there yet). */
static int read_length(plan *p, int64_t *length, int64_t *generation, convo_error *err)
{
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.tail = 1;
    o.with_extra = 0;
    convo_history *h = NULL;
    convo_error e2;
    int rc = p->s->driver->load(p->s->backend, p->cp->thread_id, &o, &h, &e2);
    *length = *generation = 0;
    if (rc == 0) {
        *length = h->length;
        *generation = h->generation;
    } else if (rc != CONVO_ENOTFOUND) {
        *err = e2;
        convo_history_free(h);
        return rc;
    }
    convo_history_free(h);
    return 0;
}

static int put_once(plan *p, int64_t base, const convo_message_in *msgs, convo_error *err)
{
    const convo_checkpoint_in *cp = p->cp;
    int64_t log_length = cp->log_length;
    int rc = encode_attempt(p, base, &log_length, err);
    convo_channel_in *chans = rc == 0 ? malloc((cp->nchannels + 2) * sizeof *chans) : NULL;
    convo_blob *blobs = rc == 0 ? malloc((p->nchs + 1) * sizeof *blobs) : NULL;
    convo_swap *swaps = rc == 0 ? malloc((p->nsw + 1) * sizeof *swaps) : NULL;
    if (rc == 0 && (!chans || !blobs || !swaps))
        rc = oom(err);
    if (rc == 0) {
        memcpy(chans, cp->channels, cp->nchannels * sizeof *chans);
        for (size_t k = 0; k < p->nchs; k++) {
            blobs[k] = (convo_blob){CONVO_ITEMS_TYPE, p->chs[k].bytes, p->chs[k].len};
            chans[p->chs[k].ch].value = &blobs[k];
        }
        for (size_t k = 0; k < p->nsw; k++) {
            const swapplan *w = &p->sw[k];
            swaps[k] = (convo_swap){cp->parent_id, w->task_id, w->idx, w->channel, w->version,
                                    {w->type, w->bytes, w->len},
                                    {CONVO_ITEMS_TYPE, w->enc, w->enc_len}, w->end};
        }
        convo_checkpoint_in c = *cp;
        c.channels = chans;
        if (p->body.active) {
            chans[c.nchannels++] = p->body.channel;
            c.body = p->body.delta;
        }
        c.channel_items = NULL;
        c.log_length = log_length;
        c.expected_length = p->nfresh ? base : -1;
        c.messages = NULL, c.message_lengths = NULL, c.nmessages = p->nfresh;
        const convo_driver *d = p->s->driver;
        if (d->version >= 7 && d->checkpoint_put_refs)
            rc = d->checkpoint_put_refs(p->s->backend, &c, msgs, p->nfresh, swaps, p->nsw, err);
        else if (p->nfresh && d->version >= 3 && d->checkpoint_put_log)
            rc = d->checkpoint_put_log(p->s->backend, &c, msgs, err); /* swaps left out */
        else if (p->nfresh)
            rc = convo__error(err, CONVO_ENOTSUP, NULL,
                              "the %s driver cannot put a checkpoint with messages", d->name);
        else
            rc = d->checkpoint_put(p->s->backend, &c, err);
        rc = convo__scrubbed(p->s, rc, err);
    }
    free(chans);
    free(blobs);
    free(swaps);
    return rc;
}

/* The thread's length is at least k (one read when the parent does not say so):
 * a prefix past the log would be a dangling reference. */
static int prefix_in_log(plan *p, int64_t k, convo_error *err)
{
    if (k <= (p->parent ? p->parent->log_length : 0))
        return 0;
    int64_t length, generation;
    int rc = read_length(p, &length, &generation, err);
    if (rc == 0 && k > length)
        rc = convo__error(err, CONVO_ECONFLICT, NULL,
                          "channel items: a log prefix of %lld messages, past the thread's "
                          "%lld (a view of the log from before a rewrite or a delete?): "
                          "nothing written", (long long)k, (long long)length);
    return rc;
}

static int expand(chplan *c, convo_error *err)
{
    const convo_items_in *it = c->given;
    size_t k = (size_t)c->prefix, n = k + it->n;
    expanded *x = &c->x;
    x->items = calloc(n, sizeof *x->items);
    x->lengths = calloc(n, sizeof *x->lengths);
    x->seqs = malloc(n * sizeof *x->seqs);
    x->seqs_out = it->seqs_out ? malloc(n * sizeof *x->seqs_out) : NULL;
    if (!x->items || !x->lengths || !x->seqs || (it->seqs_out && !x->seqs_out))
        return oom(err);
    for (size_t i = 0; i < k; i++)
        x->seqs[i] = (int64_t)i;
    for (size_t j = 0; j < it->n; j++) {
        int64_t q = it->seqs ? it->seqs[j] : -1;
        const char *t = it->items ? it->items[j] : NULL;
        x->seqs[k + j] = q;
        x->items[k + j] = t;
        x->lengths[k + j] = it->lengths ? it->lengths[j] : t && q < 0 ? strlen(t) : 0;
    }
    x->in = *it;
    x->in.items = x->items;
    x->in.lengths = x->lengths;
    x->in.seqs = x->seqs;
    x->in.seqs_out = x->seqs_out;
    x->in.n = n;
    c->in = &x->in;
    return 0;
}

static int plan_make(plan *p, convo_error *err)
{
    const convo_checkpoint_in *cp = p->cp;
    for (size_t i = 0; i < cp->nchannels; i++)
        p->nchs += cp->channel_items[i] != NULL;
    p->chs = calloc(p->nchs ? p->nchs : 1, sizeof *p->chs);
    if (!p->chs)
        return oom(err);
    int rc = 0;
    for (size_t i = 0, k = 0; rc == 0 && i < cp->nchannels; i++) {
        if (!cp->channel_items[i])
            continue;
        chplan *c = &p->chs[k++];
        c->ch = i;
        c->in = c->given = cp->channel_items[i];
        c->prefix = cp->channel_log_prefix ? cp->channel_log_prefix[i] : 0;
        msgpack_unpacked_init(&c->parent.up);
        char what[300];
        snprintf(what, sizeof what, "channel '%s'", cp->channels[i].channel);
        rc = convo__items_validate(p->s, what, c->in, err);
    }
    if (rc == 0 && cp->parent_id) {
        rc = convo__checkpoint_get_raw(p->s, cp->thread_id, cp->checkpoint_ns, cp->parent_id,
                                       &p->parent, err);
        if (rc == CONVO_ENOTFOUND) {
            convo__error_clear(err);
            rc = 0;
        }
    }
    for (size_t k = 0; rc == 0 && k < p->nchs; k++)
        if (p->chs[k].prefix > 0 && (rc = prefix_in_log(p, p->chs[k].prefix, err)) == 0)
            rc = expand(&p->chs[k], err);
    for (size_t k = 0; rc == 0 && k < p->nchs; k++) {
        int found = 0;
        rc = parent_list(p, cp->channels[p->chs[k].ch].channel, &p->chs[k].parent, &found, err);
        if (rc == 0 && !found && p->chs[k].in->log)
            rc = log_prefix(p, &p->chs[k], err);
    }
    if (rc == 0) { /* a seq past the log would be a dangling reference */
        const convo_items_in **lists = malloc((p->nchs ? p->nchs : 1) * sizeof *lists);
        if (!lists)
            return oom(err);
        for (size_t k = 0; k < p->nchs; k++)
            lists[k] = p->chs[k].in;
        rc = convo__items_check_seqs(p->s, cp->thread_id, "channel items", lists, p->nchs,
                                     p->parent ? p->parent->log_length : 0, err);
        free(lists);
    }
    if (rc == 0)
        rc = find_known(p, err);
    for (size_t k = 0; rc == 0 && k < p->nchs; k++) {
        rc = plan_channel(&p->chs[k], err);
        p->nfresh += p->chs[k].nfresh;
    }
    if (rc == 0 && p->nfresh) {
        p->fresh = malloc(p->nfresh * sizeof *p->fresh);
        if (!p->fresh)
            return oom(err);
        size_t j = 0;
        for (size_t k = 0; k < p->nchs; k++)
            for (size_t i = p->chs[k].first_fresh; i < p->chs[k].first_fresh + p->chs[k].nfresh; i++)
                p->fresh[j++] = &p->chs[k].els[i];
    }
    if (rc == 0)
        rc = plan_swaps(p, err);
    if (rc == 0)
        rc = convo__body_plan(p->parent, cp, &p->body, err);
    return rc;
}

int convo__items_put(convo_store *s, const convo_checkpoint_in *cp, convo_error *err)
{
    plan p = {s, cp, NULL, NULL, 0, NULL, 0, NULL, 0, {0}};
    int rc = plan_make(&p, err);
    convo_message_in *msgs = NULL;
    if (rc == 0 && p.nfresh) {
        const char **texts = malloc(p.nfresh * sizeof *texts);
        size_t *lens = malloc(p.nfresh * sizeof *lens);
        if (!texts || !lens)
            rc = oom(err);
        for (size_t j = 0; rc == 0 && j < p.nfresh; j++)
            texts[j] = p.fresh[j]->text, lens[j] = p.fresh[j]->len;
        if (rc == 0)
            rc = convo__messages_in(s, texts, lens, p.nfresh, &msgs, err);
        free(texts);
        free(lens);
    }
    /* the length the fresh items go at: the caller's, else the highest the
     * parent knows of, then what the thread has when another writer was first */
    int64_t base = cp->expected_length;
    int chosen = base < 0;
    if (chosen && rc == 0) {
        base = p.parent ? p.parent->log_length : 0;
        for (size_t k = 0; k < p.nchs; k++)
            for (size_t i = 0; i < p.chs[k].in->n; i++)
                if (p.chs[k].known[i] + 1 > base)
                    base = p.chs[k].known[i] + 1;
    }
    for (int attempt = 0; rc == 0; attempt++) {
        rc = put_once(&p, base, msgs, err);
        if (rc != CONVO_ECONFLICT || !chosen || p.nfresh == 0 || attempt == MAX_RETRIES)
            break;
        int64_t length, generation;
        convo_error e2 = *err;
        if (read_length(&p, &length, &generation, err) != 0)
            break;
        if (length == base || (cp->expected_generation >= 0 && generation != cp->expected_generation)) {
            *err = e2;
            break;
        }
        convo__error_clear(err);
        base = length;
        rc = 0;
    }
    for (size_t k = 0; rc == 0 && k < p.nchs; k++) {
        const chplan *c = &p.chs[k];
        for (size_t i = 0; c->in->seqs_out && i < c->in->n; i++) {
            int fresh = i >= c->first_fresh && i < c->first_fresh + c->nfresh;
            c->in->seqs_out[i] = c->known[i] >= 0 ? c->known[i]
                                 : fresh          ? c->fresh_seq + (int64_t)(i - c->first_fresh)
                                                  : -1;
        }
        if (c->prefix > 0 && c->given->seqs_out)
            memcpy(c->given->seqs_out, c->in->seqs_out + c->prefix,
                   c->given->n * sizeof *c->given->seqs_out);
    }
    convo__messages_free(msgs, p.nfresh);
    plan_free(&p);
    return rc;
}
