/* cmd.c — building the driver's commands: arguments with their lengths, the
 * keys of a thread (P:{tag}:SUFFIX), script calls and index entries, and the
 * msgpack parts (packbuf) that message records and checkpoints are sent as. */
#include "redis_int.h"
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

/* ---- command arguments ---- */

/* Twice the room, on the heap once the inline arrays are full. */
static int cmd_grow(cmd *c)
{
    size_t cap = c->cap * 2;
    int inline_ = c->argv == c->argv_inline;
    const char **a = malloc(cap * sizeof *a);
    size_t *l = malloc(cap * sizeof *l);
    if (!a || !l) {
        free(a);
        free(l);
        return CONVO_ENOMEM;
    }
    memcpy(a, c->argv, c->n * sizeof *a);
    memcpy(l, c->lens, c->n * sizeof *l);
    if (!inline_) {
        free(c->argv);
        free(c->lens);
    }
    c->argv = a;
    c->lens = l;
    c->cap = cap;
    return 0;
}

void convo__rd_cmd_add(cmd *c, const char *s, size_t len)
{
    if (c->failed)
        return;
    if (c->cap == 0) {
        c->argv = c->argv_inline;
        c->lens = c->lens_inline;
        c->cap = CMD_INLINE;
    }
    if (c->n == c->cap && cmd_grow(c) != 0) {
        c->failed = 1;
        return;
    }
    c->argv[c->n] = s;
    c->lens[c->n++] = len;
}

void convo__rd_cmd_str(cmd *c, const char *s)
{
    convo__rd_cmd_add(c, s, strlen(s));
}

/* The decimal digits of v at buf (no NUL); their count. Every call formats
 * a few numbers, and printf is a measurable part of a call. */
size_t convo__rd_fmt_num(char *buf, long long v)
{
    char tmp[24];
    size_t n = 0, len = 0;
    if (v >= 0 && v < 100) { /* most: a command's arguments and their lengths */
        if (v < 10) {
            buf[0] = (char)('0' + v);
            return 1;
        }
        buf[0] = (char)('0' + v / 10);
        buf[1] = (char)('0' + v % 10);
        return 2;
    }
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        buf[len++] = '-';
    while (n)
        buf[len++] = tmp[--n];
    return len;
}

void convo__rd_cmd_num(cmd *c, long long v)
{
    if (c->nnums == 8) {
        c->failed = 1;
        return;
    }
    char *buf = c->nums[c->nnums++];
    convo__rd_cmd_add(c, buf, convo__rd_fmt_num(buf, v));
}

/* n empty commands, not zeroed (a cmd is a few hundred bytes, most of them
 * inline room a command fills as it grows): NULL when out of memory. */
cmd *convo__rd_cmds_new(size_t n)
{
    cmd *q = malloc((n ? n : 1) * sizeof *q);
    for (size_t i = 0; q && i < n; i++) {
        q[i].argv = NULL;
        q[i].lens = NULL;
        q[i].n = q[i].cap = 0;
        q[i].nnums = q[i].failed = 0;
    }
    return q;
}

void convo__rd_cmd_free(cmd *c)
{
    if (c->argv != c->argv_inline) {
        free(c->argv);
        free(c->lens);
    }
}

/* ---- the keys of a thread ---- */

static const char *const key_suffix[K_COUNT] = {"msgs", "idem", "meta",  "extra",
                                                "cp",   "cpidx", "blobs", "writes"};

/* Bytes that would break the hash tag, the key's structure or a SCAN glob are
 * percent-encoded; everything else (UTF-8 included) stays as it is. */
static int tag_plain(unsigned char c)
{
    return c > 0x20 && c != 0x7f && c != '%' && c != '{' && c != '}' && c != ':' && c != '*' &&
           c != '?' && c != '[' && c != ']' && c != '\\';
}

static size_t encode_tag(char *out, const char *id)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
        if (tag_plain(*p)) {
            if (out)
                out[n] = (char)*p;
            n++;
        } else {
            if (out) {
                out[n] = '%';
                out[n + 1] = hex[*p >> 4];
                out[n + 2] = hex[*p & 15];
            }
            n += 3;
        }
    }
    return n;
}

/* "P:{tag}:", the start of every key of thread id, at out (NULL: only its
 * length); the key of kind k is it followed by convo__rd_key_suffix(k). */
size_t convo__rd_key_head(const convo_backend *b, const char *id, char *out)
{
    size_t plen = strlen(b->prefix), tlen = encode_tag(NULL, id);
    if (out) {
        memcpy(out, b->prefix, plen);
        memcpy(out + plen, ":{", 2);
        encode_tag(out + plen + 2, id);
        memcpy(out + plen + 2 + tlen, "}:", 2);
    }
    return plen + tlen + 4;
}

const char *convo__rd_key_suffix(int kind)
{
    return key_suffix[kind];
}

/* The index argument of the scripts that write (index.lua): "NOW", and on
 * one server "\0P:ix:\0ID" and the declared fields, at out; with out NULL,
 * the room it needs. */
static size_t spec_make(char *out, const convo_backend *b, const char *id, size_t idlen)
{
    if (!out) /* room for any clock value */
        return 24 + (b->cluster ? 0 : 1 + strlen(b->ix_prefix) + 1 + idlen + b->ix_fields_len);
    char now[24];
    size_t n = convo__rd_fmt_num(now, convo__now_micros());
    if (b->cluster) {
        memcpy(out, now, n);
        return n;
    }
    size_t plen = strlen(b->ix_prefix), len = n + 1 + plen + 1 + idlen + b->ix_fields_len;
    char *p = out;
    memcpy(p, now, n);
    p += n;
    *p++ = '\0';
    memcpy(p, b->ix_prefix, plen);
    p += plen;
    *p++ = '\0';
    memcpy(p, id, idlen);
    p += idlen;
    if (b->ix_fields_len)
        memcpy(p, b->ix_fields, b->ix_fields_len);
    return len;
}

/* Builds the keys with memcpy: this runs on every call; with_spec = 0 (a
 * read) leaves the scripts' index argument out (no clock read). */
static int keys_make(const convo_backend *b, const char *id, thread_keys *tk, int with_spec,
                     int nkeys)
{
    size_t plen = strlen(b->prefix), idlen = strlen(id), tlen = encode_tag(NULL, id);
    size_t each = plen + tlen + 16; /* "P:{" tag "}:" suffix NUL */
    size_t spec_room = with_spec ? spec_make(NULL, b, id, idlen) : 1;
    if (!(tk->buf = malloc(each * (size_t)nkeys + spec_room)))
        return CONVO_ENOMEM;
    char *first = tk->buf;
    memcpy(first, b->prefix, plen);
    memcpy(first + plen, ":{", 2);
    encode_tag(first + plen + 2, id);
    memcpy(first + plen + 2 + tlen, "}:", 2);
    size_t head = plen + tlen + 4;
    for (int i = 0; i < K_COUNT; i++) {
        if (i >= nkeys) { /* not built: a listing's row reads the first four */
            tk->k[i] = NULL;
            tk->len[i] = 0;
            continue;
        }
        char *k = tk->buf + each * (size_t)i;
        size_t slen = strlen(key_suffix[i]);
        if (i > 0)
            memcpy(k, first, head);
        memcpy(k + head, key_suffix[i], slen + 1);
        tk->k[i] = k;
        tk->len[i] = head + slen;
    }
    char *spec = tk->buf + each * (size_t)nkeys;
    tk->spec = spec;
    tk->spec_len = with_spec ? spec_make(spec, b, id, idlen) : 0;
    tk->id = id;
    return 0;
}

int convo__rd_keys_make(const convo_backend *b, const char *id, thread_keys *tk)
{
    return keys_make(b, id, tk, 1, K_COUNT);
}

int convo__rd_keys_read(const convo_backend *b, const char *id, thread_keys *tk)
{
    return keys_make(b, id, tk, 0, K_COUNT);
}

int convo__rd_keys_row(const convo_backend *b, const char *id, thread_keys *tk)
{
    return keys_make(b, id, tk, 0, K_EXTRA + 1);
}

/* ---- script calls and index entries ---- */

/* "EVALSHA <sha> n key..." with the first n keys of the thread. */
void convo__rd_cmd_script_keys(cmd *c, const thread_keys *tk, size_t n)
{
    convo__rd_cmd_add(c, "EVALSHA", 7);
    convo__rd_cmd_add(c, "", 0); /* sha or script text, set by convo__rd_pipeline_script() */
    convo__rd_cmd_num(c, (long long)n);
    for (size_t i = 0; i < n; i++)
        convo__rd_cmd_add(c, tk->k[i], tk->len[i]);
}

/* The start of every script call but the append: all keys of the thread. */
void convo__rd_cmd_script_head(cmd *c, const thread_keys *tk)
{
    convo__rd_cmd_script_keys(c, tk, K_COUNT);
}

/* The first argument of a script that starts with index.lua. */
void convo__rd_cmd_spec(cmd *c, const thread_keys *tk)
{
    convo__rd_cmd_add(c, tk->spec, tk->spec_len);
}

unsigned convo__rd_id_slot(const char *id)
{
    char tag[3 * 512 + 1];
    size_t n = encode_tag(NULL, id);
    if (n >= sizeof tag) /* ids are validated to 512 bytes before they get here */
        return 0;
    encode_tag(tag, id);
    return convo__rcl_key_slot(tag, n);
}

/* The thread index key of id: one key, or in a cluster the one of id's slot. */
void convo__rd_cmd_index_key(cmd *c, const convo_backend *b, const char *id)
{
    if (!b->cluster) {
        convo__rd_cmd_str(c, b->index_key);
        return;
    }
    char tag[3 * 512 + 1];
    size_t klen, n = encode_tag(NULL, id);
    if (n >= sizeof tag) {
        c->failed = 1; /* ids are validated to 512 bytes before they get here */
        return;
    }
    encode_tag(tag, id);
    const char *k = convo__rcl_index_key(b->cluster, convo__rcl_key_slot(tag, n), &klen);
    convo__rd_cmd_add(c, k, klen);
}

void convo__rd_cmd_index(cmd *c, const convo_backend *b, const char *verb, const char *id)
{
    convo__rd_cmd_str(c, verb);
    convo__rd_cmd_index_key(c, b, id);
    if (verb[0] == 'Z' && verb[1] == 'A')
        convo__rd_cmd_add(c, "0", 1);
    convo__rd_cmd_str(c, id);
}

/* ---- msgpack parts ---- */

int convo__rd_packbuf_write(void *data, const char *buf, size_t len)
{
    packbuf *p = data;
    if (len == 0)
        return 0; /* buf may be NULL (an empty value) */
    if (p->len + len > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->len + len)
            cap *= 2;
        char *d = realloc(p->data, cap);
        if (!d) {
            p->failed = 1;
            return -1;
        }
        p->data = d;
        p->cap = cap;
    }
    memcpy(p->data + p->len, buf, len);
    p->len += len;
    return 0;
}

/* Ends the current part: part i is [marks[i], marks[i + 1]). */
void convo__rd_packbuf_mark(packbuf *p)
{
    if (p->nmarks == p->mcap) {
        size_t cap = p->mcap ? p->mcap * 2 : 16;
        size_t *m = realloc(p->marks, cap * sizeof *m);
        if (!m) {
            p->failed = 1;
            return;
        }
        p->marks = m;
        p->mcap = cap;
    }
    p->marks[p->nmarks++] = p->len;
}

void convo__rd_packbuf_free(packbuf *p)
{
    free(p->data);
    free(p->marks);
}

/* Adds part i of p to a command. */
void convo__rd_cmd_part(cmd *c, const packbuf *p, size_t i)
{
    convo__rd_cmd_add(c, p->data + p->marks[i], p->marks[i + 1] - p->marks[i]);
}

/* Packs each message as its whole record [created_at, role, bytes]: with
 * created_at[i] when given (a dump), else `now` for the whole batch. Part i
 * is message i. */
int convo__rd_pack_records(const convo_message_in *msgs, size_t n, const int64_t *created_at,
                           int64_t now, packbuf *pb)
{
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += msgs[i].len + strlen(msgs[i].role) + 24;
    if (!(pb->data = malloc(cap ? cap : 1)))
        return CONVO_ENOMEM;
    pb->cap = cap;
    msgpack_packer pk;
    msgpack_packer_init(&pk, pb, convo__rd_packbuf_write);
    convo__rd_packbuf_mark(pb);
    for (size_t i = 0; i < n; i++) {
        if (msgpack_pack_array(&pk, 3) ||
            msgpack_pack_int64(&pk, created_at ? created_at[i] : now) ||
            convo__pack_str(&pk, msgs[i].role) ||
            convo__pack_bin(&pk, msgs[i].bytes, msgs[i].len))
            return CONVO_ERROR;
        convo__rd_packbuf_mark(pb);
    }
    return pb->failed ? CONVO_ENOMEM : 0;
}

/* convo__rd_pack_records()'s failure as an error. */
int convo__rd_pack_error(int code, convo_error *err)
{
    return code == CONVO_ENOMEM ? convo__rd_oom(err)
                                : convo__error(err, CONVO_ERROR, NULL, "msgpack failed");
}
