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

/* A channel's list, run by run: the caller's log prefix [0, k) as one run,
 * then one run per item it gave, so that planning a grown conversation costs
 * O(new items), not O(list). */
typedef struct chplan {
    size_t ch;                /* its index in cp->channels */
    const convo_items_in *in; /* the caller's items (after the prefix) */
    int64_t prefix;           /* the caller's channel_log_prefix (0 = none) */
    seg *segs;                /* the plan: a run of the log, or one item (seq -1: inline) */
    size_t nsegs, off;        /* off: the run of in's item 0 (1 after a prefix) */
    int64_t n;                /* items: prefix + in->n */
    ref parent;               /* the parent's list of this channel (n 0 when none) */
    int64_t *cand;            /* per run: the parent's seq at its place, for a text compare */
    size_t first_fresh, nfresh; /* the runs (one item each) that enter the log */
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
    int64_t *fresh_at; /* per run of r: the index among the put's fresh items, or -1 */
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
    const seg **fresh; /* the fresh items in append order */
    size_t nfresh;
    swapplan *sw;
    size_t nsw;
    convo_body_plan body;
} plan;

static int same_text(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && memcmp(a, b, alen) == 0;
}

static void plan_free(plan *p)
{
    for (size_t k = 0; k < p->nchs; k++) {
        convo__ref_free(&p->chs[k].parent);
        free(p->chs[k].segs);
        free(p->chs[k].cand);
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

/* The caller's list as runs: [0, prefix), then one per item. */
static int list_make(chplan *c, convo_error *err)
{
    const convo_items_in *in = c->in;
    c->off = c->prefix > 0;
    c->nsegs = c->off + in->n;
    c->n = c->prefix + (int64_t)in->n;
    c->segs = malloc((c->nsegs ? c->nsegs : 1) * sizeof *c->segs);
    c->cand = malloc((c->nsegs ? c->nsegs : 1) * sizeof *c->cand);
    if (!c->segs || !c->cand)
        return oom(err);
    if (c->off)
        c->segs[0] = (seg){0, c->prefix, NULL, 0};
    for (size_t j = 0; j < in->n; j++) {
        int64_t q = in->seqs ? in->seqs[j] : -1;
        const char *t = in->items ? in->items[j] : NULL;
        size_t len = q >= 0 ? 0 : in->lengths ? in->lengths[j] : strlen(t);
        c->segs[c->off + j] = q >= 0 ? (seg){q, 1, NULL, 0} : (seg){-1, 1, t, len};
    }
    return 0;
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

static int read_length(plan *p, int64_t *length, int64_t *generation, convo_error *err);

/* A message channel the parent has no list of (the first checkpoint, a
 * parent put without it): its list is taken to be the log's first messages,
 * one run as long as the list or the log, whichever is shorter. */
static int log_prefix(plan *p, chplan *c, convo_error *err)
{
    if (c->n == 0)
        return 0;
    int64_t length, generation;
    int rc = read_length(p, &length, &generation, err);
    if (rc != 0 || length == 0)
        return rc;
    if (!(c->parent.segs = malloc(sizeof *c->parent.segs)))
        return oom(err);
    c->parent.n = length < c->n ? length : c->n;
    c->parent.segs[0] = (seg){0, c->parent.n, NULL, 0};
    c->parent.nsegs = 1;
    return 0;
}

/* The parent's seq at each run of c that is one item without a seq (-1:
 * none); the walk over the parent's runs moves forward only. */
static void parent_seqs(chplan *c, int64_t *from, int64_t *end)
{
    size_t g = 0;
    int64_t start = 0, pos = c->prefix;
    for (size_t i = 0; i < c->nsegs; i++) {
        c->cand[i] = -1;
        if (i < c->off)
            continue;
        for (; g < c->parent.nsegs && start + c->parent.segs[g].count <= pos; g++)
            start += c->parent.segs[g].count;
        if (c->segs[i].seq < 0 && g < c->parent.nsegs && c->parent.segs[g].seq >= 0) {
            int64_t q = c->parent.segs[g].seq + (pos - start);
            c->cand[i] = q;
            if (*end == 0 || q < *from)
                *from = q;
            if (q + 1 > *end)
                *end = q + 1;
        }
        pos++;
    }
}

/* Which items are the log's messages: the seq the caller gave, else (compared
 * by text with one load of the log) the parent's item at the same place. */
static int find_known(plan *p, convo_error *err)
{
    int64_t from = 0, end = 0;
    for (size_t k = 0; k < p->nchs; k++)
        parent_seqs(&p->chs[k], &from, &end);
    if (end == 0)
        return 0;
    convo_history *h = NULL;
    int rc = convo__items_load(p->s, p->cp->thread_id, from, end, &h, err);
    for (size_t k = 0; rc == 0 && k < p->nchs; k++) {
        chplan *c = &p->chs[k];
        for (size_t i = 0; i < c->nsegs; i++) {
            int64_t q = c->cand[i];
            if (q < 0)
                continue;
            const convo_history_msg *m = &h->msgs[q - from];
            if (same_text(c->segs[i].text, c->segs[i].len, m->bytes, m->len))
                c->segs[i] = (seg){q, 1, NULL, 0};
        }
    }
    convo_history_free(h);
    return rc;
}

/* How many items c shares with its parent from the start (the same seqs, or
 * the same inline texts), run by run; *at: c's first run not shared whole. */
static int64_t common_start(const chplan *c, size_t *at, int64_t *at_off)
{
    size_t i = 0, j = 0;
    int64_t io = 0, jo = 0, m = 0;
    while (i < c->nsegs && j < c->parent.nsegs) {
        const seg *a = &c->segs[i], *b = &c->parent.segs[j];
        int64_t step = 1;
        if (a->seq >= 0 && b->seq >= 0) {
            if (a->seq + io != b->seq + jo)
                break;
            step = a->count - io < b->count - jo ? a->count - io : b->count - jo;
        } else if (a->seq >= 0 || b->seq >= 0 || !same_text(a->text, a->len, b->text, b->len)) {
            break;
        }
        m += step;
        if ((io += step) == a->count)
            i++, io = 0;
        if ((jo += step) == b->count)
            j++, jo = 0;
    }
    *at = i;
    *at_off = io;
    return m;
}

/* The rule for what enters the log (include/convo.h): the items after all of
 * the parent's, none of them the log's already, in a message channel. */
static void plan_channel(chplan *c)
{
    size_t at;
    int64_t at_off;
    int64_t m = common_start(c, &at, &at_off);
    int append = c->in->log && m == c->parent.n && at_off == 0;
    for (size_t i = at; append && i < c->nsegs; i++)
        append = c->segs[i].seq < 0;
    c->first_fresh = at;
    c->nfresh = append ? c->nsegs - at : 0;
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
        w.fresh_at = malloc((w.r.nsegs ? w.r.nsegs : 1) * sizeof *w.fresh_at);
        if (!w.fresh_at) {
            convo__ref_free(&w.r);
            return oom(err);
        }
        /* each inline item takes the next fresh item with the same text,
         * in order (a write of [a, b] appended as ... a, b) */
        size_t cursor = 0, matched = 0;
        for (size_t i = 0; i < w.r.nsegs; i++) {
            w.fresh_at[i] = -1;
            const seg *e = &w.r.segs[i];
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

/* 1 + the highest seq of a list's runs (0: none). */
static int64_t runs_end(const seg *segs, size_t n)
{
    int64_t end = 0;
    for (size_t i = 0; i < n; i++)
        if (segs[i].seq >= 0 && segs[i].seq + segs[i].count > end)
            end = segs[i].seq + segs[i].count;
    return end;
}

/* Encodes the channels and swaps with the fresh items at seq base.. */
static int encode_attempt(plan *p, int64_t base, int64_t *log_length, convo_error *err)
{
    int64_t next = base;
    for (size_t k = 0; k < p->nchs; k++) {
        chplan *c = &p->chs[k];
        c->fresh_seq = next;
        for (size_t i = c->first_fresh; i < c->first_fresh + c->nfresh; i++)
            c->segs[i].seq = next++;
        int64_t end = runs_end(c->segs, c->nsegs);
        if (end > *log_length)
            *log_length = end;
        free(c->bytes);
        c->bytes = NULL;
        int rc = convo__ref_blob(c->in->key, &c->in->rest, c->segs, c->nsegs, &c->bytes,
                                 &c->len, err);
        for (size_t i = c->first_fresh; i < c->first_fresh + c->nfresh; i++)
            c->segs[i].seq = -1; /* for the next attempt */
        if (rc != 0)
            return rc;
    }
    for (size_t k = 0; k < p->nsw; k++) {
        swapplan *w = &p->sw[k];
        seg *segs = malloc((w->r.nsegs ? w->r.nsegs : 1) * sizeof *segs);
        if (!segs)
            return oom(err);
        for (size_t i = 0; i < w->r.nsegs; i++) {
            segs[i] = w->r.segs[i];
            if (w->fresh_at[i] >= 0)
                segs[i] = (seg){base + w->fresh_at[i], 1, NULL, 0};
        }
        w->end = runs_end(segs, w->r.nsegs);
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
            rc = convo__ref_blob(key, &rest, segs, w->r.nsegs, &w->enc, &w->enc_len, err);
        free(key);
        free(rtype);
        free(segs);
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
    convo__error_clear(&e2); /* the first error is the one kept: start clean */
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
        c->in = cp->channel_items[i];
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
        if (p->chs[k].prefix > 0)
            rc = prefix_in_log(p, p->chs[k].prefix, err);
    for (size_t k = 0; rc == 0 && k < p->nchs; k++)
        rc = list_make(&p->chs[k], err);
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
        plan_channel(&p->chs[k]);
        p->nfresh += p->chs[k].nfresh;
    }
    if (rc == 0 && p->nfresh) {
        p->fresh = malloc(p->nfresh * sizeof *p->fresh);
        if (!p->fresh)
            return oom(err);
        size_t j = 0;
        for (size_t k = 0; k < p->nchs; k++)
            for (size_t i = p->chs[k].first_fresh; i < p->chs[k].first_fresh + p->chs[k].nfresh; i++)
                p->fresh[j++] = &p->chs[k].segs[i];
    }
    if (rc == 0)
        rc = plan_swaps(p, err);
    if (rc == 0)
        rc = convo__body_plan(p->parent, cp, &p->body, err);
    return rc;
}

/* The seqs of the caller's items, once the put is done. */
static void seqs_out(const chplan *c)
{
    for (size_t j = 0; c->in->seqs_out && j < c->in->n; j++) {
        size_t i = c->off + j;
        int fresh = i >= c->first_fresh && i < c->first_fresh + c->nfresh;
        c->in->seqs_out[j] = fresh ? c->fresh_seq + (int64_t)(i - c->first_fresh)
                                   : c->segs[i].seq >= 0 ? c->segs[i].seq : -1;
    }
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
        for (size_t k = 0; k < p.nchs; k++) {
            int64_t end = runs_end(p.chs[k].segs, p.chs[k].nsegs);
            if (end > base)
                base = end;
        }
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
    for (size_t k = 0; rc == 0 && k < p.nchs; k++)
        seqs_out(&p.chs[k]);
    convo__messages_free(msgs, p.nfresh);
    plan_free(&p);
    return rc;
}
