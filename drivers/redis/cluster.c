/* cluster.c — Redis Cluster routing for the Redis driver: the slot map from
 * CLUSTER SLOTS, CRC16 hash slots, one socket per node in each pooled
 * connection, MOVED/ASK/TRYAGAIN followed a bounded number of times, WAIT for
 * replicas, and the per-slot thread index read as one merged range. See
 * docs/redis.md, "Redis Cluster". */
#include "config.h"
#include "cluster.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>

#define MAX_NODES 64
#define NO_NODE 255
#define MAX_ROUNDS 16 /* redirects followed for one command */
#define TAG_BYTES 8

typedef struct node {
    char *host;
    int port;
} node;

struct rcl {
    pthread_mutex_t mu;
    node nodes[MAX_NODES];
    int nnodes;
    unsigned char slot_node[RCL_SLOTS]; /* NO_NODE: unknown */
    atomic_uint_fast64_t gen[MAX_NODES]; /* bumped when a node fails */
    rcl_config cfg;
    char *prefix, *redacted, *index_keys;
    size_t stride;
};

struct rcl_conns {
    redisContext *c[MAX_NODES];
    uint_fast64_t gen[MAX_NODES];
    int pin;
};

/* ---- hash slots ---- */

static unsigned crc16(const char *p, size_t n)
{
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)p[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
        crc &= 0xffff;
    }
    return crc;
}

unsigned convo__rcl_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & (RCL_SLOTS - 1);
    }
    return crc16(key, len) & (RCL_SLOTS - 1);
}

/* tags[s]: the smallest decimal number whose text hashes to slot s. */
static char tags[RCL_SLOTS][TAG_BYTES];
static pthread_once_t tags_once = PTHREAD_ONCE_INIT;

static void tags_fill(void)
{
    size_t left = RCL_SLOTS;
    for (unsigned long n = 0; left > 0; n++) {
        char t[TAG_BYTES];
        int len = snprintf(t, sizeof t, "%lu", n);
        unsigned s = crc16(t, (size_t)len) & (RCL_SLOTS - 1);
        if (!tags[s][0]) {
            memcpy(tags[s], t, (size_t)len + 1);
            left--;
        }
    }
}

const char *convo__rcl_index_key(const rcl *cl, unsigned slot, size_t *len)
{
    const char *k = cl->index_keys + cl->stride * slot;
    *len = strlen(k);
    return k;
}

/* ---- classifying commands ---- */

static int word_is(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && strncasecmp(s, w, n) == 0;
}

void convo__rcl_classify(rcl_cmd *c, const char *const *argv, const size_t *lens, size_t argc)
{
    static const char *const keyless[] = {"MULTI", "EXEC", "SCAN", "WAIT", "PING", "SCRIPT", "TIME"};
    static const char *const reads[] = {"EXISTS", "HGET", "HMGET", "HGETALL", "LLEN", "LRANGE",
                                        "ZRANGEBYLEX", "ZSCORE", "SCAN", "PTTL", "TYPE", "MULTI",
                                        "EXEC", "PING", "TIME", "MEMORY", "STRLEN", "HLEN",
                                        "AUTH", "SELECT", "SCRIPT", "CLUSTER"};
    c->slot = -1;
    c->kind = argc && word_is(argv[0], lens[0], "MULTI")  ? RCL_MULTI
              : argc && word_is(argv[0], lens[0], "EXEC") ? RCL_EXEC
                                                          : RCL_PLAIN;
    c->write = argc > 0;
    for (size_t i = 0; argc && i < sizeof reads / sizeof reads[0]; i++)
        if (word_is(argv[0], lens[0], reads[i]))
            c->write = 0;
    if (argc < 2)
        return;
    for (size_t i = 0; i < sizeof keyless / sizeof keyless[0]; i++)
        if (word_is(argv[0], lens[0], keyless[i]))
            return;
    size_t at = 1;
    if (word_is(argv[0], lens[0], "EVALSHA") || word_is(argv[0], lens[0], "EVAL")) {
        if (argc < 4 || (lens[2] == 1 && argv[2][0] == '0'))
            return;
        at = 3;
    } else if (word_is(argv[0], lens[0], "MEMORY")) {
        at = 2; /* MEMORY USAGE key */
    }
    if (at < argc)
        c->slot = (int)convo__rcl_key_slot(argv[at], lens[at]);
}

/* ---- nodes and connections ---- */

static int oom(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

/* The number of host:port, added when new; -1 when the table is full. Under mu. */
static int node_id(rcl *cl, const char *host, size_t hlen, int port)
{
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i].port == port && strlen(cl->nodes[i].host) == hlen &&
            memcmp(cl->nodes[i].host, host, hlen) == 0)
            return i;
    if (cl->nnodes == MAX_NODES)
        return -1;
    char *h = malloc(hlen + 1);
    if (!h)
        return -1;
    memcpy(h, host, hlen);
    h[hlen] = '\0';
    cl->nodes[cl->nnodes] = (node){h, port};
    return cl->nnodes++;
}

static int is_timeout(const redisContext *c)
{
    return c->err == REDIS_ERR_IO && (strcmp(c->errstr, strerror(EAGAIN)) == 0 ||
                                      strcmp(c->errstr, strerror(ETIMEDOUT)) == 0);
}

static void node_failed(rcl *cl, rcl_conns *cc, int n)
{
    atomic_fetch_add(&cl->gen[n], 1);
    redisFree(cc->c[n]);
    cc->c[n] = NULL;
}

/* Names the node: the one that failed is often not a host of the URL (a master
 * learnt from the slot map). */
static int ctx_error(rcl *cl, const redisContext *c, const char *what, convo_error *err)
{
    const char *host = c->tcp.host ? c->tcp.host : "?";
    if (is_timeout(c))
        return convo__error(err, CONVO_ETIMEOUT, NULL, "redis cluster: %s:%d: %s timed out (%s)",
                            host, c->tcp.port, what, cl->redacted);
    return convo__error(err, CONVO_EIO, NULL, "redis cluster: %s:%d: %s: %s (%s)", host,
                        c->tcp.port, what, c->errstr[0] ? c->errstr : "connection lost",
                        cl->redacted);
}

/* The socket of this pooled connection to node n, made (and set up) when missing. */
static int conn_get(rcl *cl, rcl_conns *cc, int n, redisContext **out, convo_error *err)
{
    uint_fast64_t g = atomic_load(&cl->gen[n]);
    if (cc->c[n] && cc->gen[n] != g) {
        redisFree(cc->c[n]);
        cc->c[n] = NULL;
    }
    if (!cc->c[n]) {
        pthread_mutex_lock(&cl->mu);
        node nd = cl->nodes[n];
        pthread_mutex_unlock(&cl->mu);
        struct timeval ct = {cl->cfg.connect_timeout_ms / 1000,
                             (cl->cfg.connect_timeout_ms % 1000) * 1000};
        struct timeval t = {cl->cfg.timeout_ms / 1000, (cl->cfg.timeout_ms % 1000) * 1000};
        redisContext *c = cl->cfg.connect_timeout_ms ? redisConnectWithTimeout(nd.host, nd.port, ct)
                                                     : redisConnect(nd.host, nd.port);
        if (!c)
            return oom(err);
        int rc = c->err ? ctx_error(cl, c, "connect", err) : 0;
        if (rc == 0 && cl->cfg.timeout_ms && redisSetTimeout(c, t) != REDIS_OK)
            rc = ctx_error(cl, c, "connect", err);
        if (rc == 0)
            rc = cl->cfg.setup(cl->cfg.setup_ctx, c, err);
        if (rc != 0) {
            redisFree(c);
            return rc;
        }
        cc->c[n] = c;
        cc->gen[n] = g;
    }
    *out = cc->c[n];
    return 0;
}

/* Writes with MSG_NOSIGNAL: a node that went away must not kill the process. */
static int send_iov(rcl *cl, redisContext *c, struct iovec *iov, size_t n, convo_error *err)
{
    int e = convo__rcl_sendv(c->fd, iov, n);
    if (e != 0)
        return convo__error(err, e == EAGAIN ? CONVO_ETIMEOUT : CONVO_EIO, NULL,
                            "redis cluster: %s (%s)", strerror(e), cl->redacted);
    return 0;
}

int convo__rcl_sendv(int fd, struct iovec *iov, size_t n)
{
    while (n > 0) {
        struct msghdr m = {0};
        m.msg_iov = iov;
        m.msg_iovlen = n < 512 ? n : 512;
        ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno;
        while (n > 0 && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    return 0;
}

static int get_reply(rcl *cl, redisContext *c, redisReply **out, convo_error *err)
{
    void *r = NULL;
    if (redisGetReply(c, &r) != REDIS_OK || !r)
        return ctx_error(cl, c, "read", err);
    *out = r;
    return 0;
}

/* ---- the slot map ---- */

/* One CLUSTER SLOTS range: [start, end, [host, port, ...], replicas...]. Under mu. */
static void map_range(rcl *cl, const redisReply *e, const node *asked)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER)
        return;
    const redisReply *m = e->element[2];
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 || m->element[0]->type != REDIS_REPLY_STRING ||
        m->element[1]->type != REDIS_REPLY_INTEGER)
        return;
    const char *host = m->element[0]->len ? m->element[0]->str : asked->host;
    int id = node_id(cl, host, strlen(host), (int)m->element[1]->integer);
    long long lo = e->element[0]->integer, hi = e->element[1]->integer;
    for (long long s = lo; id >= 0 && s <= hi && s < RCL_SLOTS; s++)
        if (s >= 0)
            cl->slot_node[s] = (unsigned char)id;
}

static int refresh_from(rcl *cl, rcl_conns *cc, int n, convo_error *err)
{
    redisContext *c;
    redisReply *r = NULL;
    int rc = conn_get(cl, cc, n, &c, err);
    if (rc == 0 && redisAppendCommand(c, "CLUSTER SLOTS") != REDIS_OK)
        rc = oom(err);
    if (rc == 0 && (rc = get_reply(cl, c, &r, err)) != 0)
        node_failed(cl, cc, n);
    if (rc == 0 && r->type != REDIS_REPLY_ARRAY)
        rc = convo__error(err, CONVO_EIO, NULL, "redis cluster: CLUSTER SLOTS: %s (%s)",
                          r->type == REDIS_REPLY_ERROR ? r->str : "bad reply", cl->redacted);
    if (rc == 0) {
        pthread_mutex_lock(&cl->mu);
        node asked = cl->nodes[n];
        memset(cl->slot_node, NO_NODE, sizeof cl->slot_node);
        for (size_t i = 0; i < r->elements; i++)
            map_range(cl, r->element[i], &asked);
        pthread_mutex_unlock(&cl->mu);
    }
    freeReplyObject(r);
    return rc;
}

/* Asks the known nodes in turn for the slot map; the first answer wins. */
static int refresh(rcl *cl, rcl_conns *cc, convo_error *err)
{
    pthread_mutex_lock(&cl->mu);
    int nn = cl->nnodes;
    pthread_mutex_unlock(&cl->mu);
    int rc = CONVO_EIO;
    for (int i = 0; i < nn; i++) {
        convo__error_clear(err);
        if ((rc = refresh_from(cl, cc, i, err)) == 0)
            return 0;
    }
    return rc;
}

static int slot_owner(rcl *cl, int slot)
{
    pthread_mutex_lock(&cl->mu);
    int n = cl->slot_node[slot];
    pthread_mutex_unlock(&cl->mu);
    return n == NO_NODE ? -1 : n;
}

int convo__rcl_masters(rcl *cl, int *nodes, int max)
{
    char seen[MAX_NODES] = {0};
    int k = 0;
    pthread_mutex_lock(&cl->mu);
    for (int s = 0; s < RCL_SLOTS; s++) {
        int n = cl->slot_node[s];
        if (n != NO_NODE && !seen[n] && k < max) {
            seen[n] = 1;
            nodes[k++] = n;
        }
    }
    pthread_mutex_unlock(&cl->mu);
    return k;
}

void convo__rcl_pin(rcl_conns *cc, int node)
{
    cc->pin = node;
}

/* ---- running a pipeline ---- */

typedef struct unit {
    size_t first, last; /* commands [first, last] */
    int slot, ask, node, done;
} unit;

enum { R_NONE, R_MOVED, R_ASK, R_RETRY };

/* What a reply says about routing; *slot and *to from "MOVED 12 host:port". */
static int redirect_of(rcl *cl, const redisReply *r, int *to)
{
    if (!r || r->type != REDIS_REPLY_ERROR)
        return R_NONE;
    if (!strncmp(r->str, "TRYAGAIN", 8) || !strncmp(r->str, "CLUSTERDOWN", 11) ||
        !strncmp(r->str, "LOADING", 7) || !strncmp(r->str, "MASTERDOWN", 10))
        return R_RETRY;
    int kind = !strncmp(r->str, "MOVED ", 6) ? R_MOVED : !strncmp(r->str, "ASK ", 4) ? R_ASK : R_NONE;
    if (kind == R_NONE)
        return R_NONE;
    const char *addr = strchr(strchr(r->str, ' ') + 1, ' ');
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (!colon)
        return R_NONE;
    int port = atoi(colon + 1);
    pthread_mutex_lock(&cl->mu);
    *to = node_id(cl, addr + 1, (size_t)(colon - addr - 1), port);
    if (kind == R_MOVED && *to >= 0)
        cl->slot_node[atoi(r->str + 6) & (RCL_SLOTS - 1)] = (unsigned char)*to;
    pthread_mutex_unlock(&cl->mu);
    return *to >= 0 ? kind : R_NONE;
}

/* A unit's redirect: its own reply, or for MULTI..EXEC a queued command's. */
static int unit_redirect(rcl *cl, const unit *u, redisReply **replies, int *to)
{
    if (u->first == u->last)
        return redirect_of(cl, replies[u->first], to);
    for (size_t i = u->first + 1; i < u->last; i++) {
        int k = redirect_of(cl, replies[i], to);
        if (k != R_NONE)
            return k;
    }
    return redirect_of(cl, replies[u->last], to);
}

static size_t units_make(const rcl_cmd *cmds, size_t n, unit *u)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t last = i;
        if (cmds[i].kind == RCL_MULTI)
            while (last + 1 < n && cmds[last].kind != RCL_EXEC)
                last++;
        int slot = -1;
        for (size_t j = i; j <= last && slot < 0; j++)
            slot = cmds[j].slot;
        u[k++] = (unit){i, last, slot, -1, -1, 0};
        i = last;
    }
    /* a keyless command goes with its neighbours */
    for (size_t j = 0; j < k; j++)
        for (size_t d = 1; u[j].slot < 0 && d < k; d++) {
            if (j + d < k && u[j + d].slot >= 0)
                u[j].slot = u[j + d].slot;
            else if (j >= d && u[j - d].slot >= 0)
                u[j].slot = u[j - d].slot;
        }
    return k;
}

static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";

/* Sends node's share of the pending units; *waits = whether WAIT follows.
 * *reached = 0 when no connection could be made: nothing was sent. */
static int node_send(rcl *cl, rcl_conns *cc, int nd, const rcl_cmd *cmds, unit *u, size_t k,
                     const char *wait_buf, size_t wait_len, int *waits, int *reached,
                     convo_error *err)
{
    redisContext *c;
    *reached = 0;
    int rc = conn_get(cl, cc, nd, &c, err);
    if (rc != 0)
        return rc;
    *reached = 1;
    size_t cap = 1, used = 0;
    for (size_t j = 0; j < k; j++)
        if (!u[j].done && u[j].node == nd)
            cap += u[j].last - u[j].first + 2;
    struct iovec *iov = malloc(cap * sizeof *iov);
    if (!iov)
        return oom(err);
    int writes = 0;
    for (size_t j = 0; j < k; j++) {
        if (u[j].done || u[j].node != nd)
            continue;
        if (u[j].ask >= 0)
            iov[used++] = (struct iovec){(void *)asking_cmd, sizeof asking_cmd - 1};
        for (size_t i = u[j].first; i <= u[j].last; i++) {
            iov[used++] = (struct iovec){(void *)cmds[i].buf, cmds[i].len};
            writes |= cmds[i].write;
        }
    }
    *waits = writes && wait_buf;
    if (*waits)
        iov[used++] = (struct iovec){(void *)wait_buf, wait_len};
    rc = send_iov(cl, c, iov, used, err);
    free(iov);
    if (rc != 0)
        node_failed(cl, cc, nd);
    return rc;
}

int convo__rcl_wait_check(const redisReply *r, int want, const char *redacted, convo_error *err)
{
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= want)
        return 0;
    if (r->type == REDIS_REPLY_INTEGER)
        return convo__error(err, CONVO_ETIMEOUT, "WAIT",
                            "redis: written on the master, but only %lld of %d replicas "
                            "acknowledged in time (%s)",
                            r->integer, want, redacted);
    return convo__error(err, CONVO_EIO, "WAIT", "redis: WAIT failed: %.*s (%s)",
                        r->type == REDIS_REPLY_ERROR ? (int)r->len : 0,
                        r->type == REDIS_REPLY_ERROR ? r->str : "", redacted);
}

/* Reads node's replies in the order node_send() sent them. */
static int node_read(rcl *cl, rcl_conns *cc, int nd, unit *u, size_t k, int waits,
                     redisReply **replies, convo_error *err)
{
    redisContext *c = cc->c[nd];
    int rc = 0;
    for (size_t j = 0; j < k && rc == 0; j++) {
        if (u[j].done || u[j].node != nd)
            continue;
        redisReply *r = NULL;
        if (u[j].ask >= 0 && (rc = get_reply(cl, c, &r, err)) == 0)
            freeReplyObject(r);
        for (size_t i = u[j].first; i <= u[j].last && rc == 0; i++)
            rc = get_reply(cl, c, &replies[i], err);
    }
    if (rc == 0 && waits) {
        redisReply *r = NULL;
        if ((rc = get_reply(cl, c, &r, err)) == 0)
            rc = convo__rcl_wait_check(r, cl->cfg.wait_replicas, cl->redacted, err);
        freeReplyObject(r);
    }
    if (rc != 0 && c->err)
        node_failed(cl, cc, nd);
    return rc;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static double now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec * 1000.0 + (double)tv.tv_usec / 1000.0;
}

/* Where each pending unit goes this round; 0, or 1 when a slot has no known owner. */
static int units_route(rcl *cl, rcl_conns *cc, unit *u, size_t k)
{
    int unknown = 0;
    for (size_t j = 0; j < k; j++) {
        if (u[j].done)
            continue;
        if (u[j].ask >= 0)
            u[j].node = u[j].ask;
        else if (u[j].slot < 0 && cc->pin >= 0)
            u[j].node = cc->pin;
        else
            u[j].node = slot_owner(cl, u[j].slot < 0 ? 0 : u[j].slot);
        unknown |= u[j].node < 0;
    }
    return unknown;
}

/* Sends every pending unit and reads the replies, node by node; units whose
 * reply is a redirect stay pending (their replies freed: nothing ran). *stall
 * is set when a node could not be reached or asked to retry. */
static int run_round(rcl *cl, rcl_conns *cc, const rcl_cmd *cmds, unit *u, size_t k,
                     redisReply **replies, int *stall, convo_error *err)
{
    char wait_buf[64];
    int wait_len = snprintf(wait_buf, sizeof wait_buf, "*3\r\n$4\r\nWAIT\r\n$%d\r\n%d\r\n$%d\r\n%d\r\n",
                            snprintf(NULL, 0, "%d", cl->cfg.wait_replicas), cl->cfg.wait_replicas,
                            snprintf(NULL, 0, "%d", cl->cfg.wait_timeout_ms),
                            cl->cfg.wait_timeout_ms);
    const char *wb = cl->cfg.wait_replicas > 0 ? wait_buf : NULL;
    int sent[MAX_NODES] = {0}, waits[MAX_NODES] = {0};
    int rc = 0;
    for (size_t j = 0; j < k && rc == 0; j++) {
        int nd = u[j].node, reached = 0;
        if (u[j].done || nd < 0 || sent[nd])
            continue;
        rc = node_send(cl, cc, nd, cmds, u, k, wb, (size_t)wait_len, &waits[nd], &reached, err);
        sent[nd] = rc == 0;
        if (rc != 0 && !reached && rc != CONVO_ENOMEM) {
            /* nothing went to that node (down, failing over): its units wait */
            *stall = 1;
            rc = 0;
            for (size_t i = 0; i < k; i++)
                if (!u[i].done && u[i].node == nd)
                    u[i].node = -2;
        }
    }
    for (int nd = 0; nd < MAX_NODES; nd++) {
        if (sent[nd] && rc == 0)
            rc = node_read(cl, cc, nd, u, k, waits[nd], replies, err);
        else if (sent[nd] && cc->c[nd]) { /* replies left unread: the socket is unusable */
            redisFree(cc->c[nd]);
            cc->c[nd] = NULL;
        }
    }
    for (size_t j = 0; j < k && rc == 0; j++) {
        if (u[j].done || u[j].node < 0)
            continue;
        int to = -1, kind = unit_redirect(cl, &u[j], replies, &to);
        u[j].done = kind == R_NONE;
        u[j].ask = kind == R_ASK ? to : -1;
        if (kind == R_RETRY) {
            *stall = 1;
            /* what the node said, for the error if the cluster stays so (no code:
             * running out of time is still CONVO_ETIMEOUT) */
            const redisReply *r = replies[u[j].last] && replies[u[j].last]->type == REDIS_REPLY_ERROR
                                      ? replies[u[j].last] : replies[u[j].first];
            if (err && !err->message[0] && r && r->type == REDIS_REPLY_ERROR)
                snprintf(err->message, sizeof err->message, "redis cluster: %s (%s)", r->str,
                         cl->redacted);
        }
        for (size_t i = u[j].first; !u[j].done && i <= u[j].last; i++) {
            freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
    }
    return rc;
}

int convo__rcl_run(rcl *cl, rcl_conns *cc, const rcl_cmd *cmds, size_t n, redisReply **replies,
                   convo_error *err)
{
    unit *u = malloc((n ? n : 1) * sizeof *u);
    if (!u)
        return oom(err);
    size_t k = units_make(cmds, n, u);
    double deadline = now_ms() + (cl->cfg.timeout_ms ? cl->cfg.timeout_ms : 5000);
    int rc = 0, redirects = 0;
    for (int round = 0;; round++) {
        convo_error why = {0};
        int stall = 0;
        if (units_route(cl, cc, u, k) &&
            (refresh(cl, cc, &why) != 0 || units_route(cl, cc, u, k)))
            stall = 1;
        if (!stall && (rc = run_round(cl, cc, cmds, u, k, replies, &stall, &why)) != 0) {
            convo__error(err, rc, why.backend_code[0] ? why.backend_code : NULL, "%s",
                         why.message);
            break;
        }
        int pending = 0;
        for (size_t j = 0; j < k; j++)
            pending |= !u[j].done;
        if (!pending)
            break;
        redirects += !stall;
        if (redirects > MAX_ROUNDS) {
            rc = convo__error(err, CONVO_EIO, NULL, "redis cluster: too many redirects (%s)",
                              cl->redacted);
            break;
        }
        if (stall && now_ms() > deadline) {
            rc = convo__error(err, why.code ? why.code : CONVO_ETIMEOUT, NULL, "%s",
                              why.message[0] ? why.message : "redis cluster: no master for a slot");
            break;
        }
        if (stall) {
            sleep_ms(round < 4 ? 20 : 100);
            refresh(cl, cc, &why);
        }
    }
    if (rc != 0)
        for (size_t i = 0; i < n; i++) {
            freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
    free(u);
    return rc;
}

/* ---- the index over every slot ---- */

typedef struct member {
    redisReply *r;
    redisReply **home; /* where it sits in its slot's reply */
} member;

static int bytes_cmp(const void *a, const void *b)
{
    const redisReply *x = ((const member *)a)->r, *y = ((const member *)b)->r;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->str, y->str, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Takes the count smallest members of all replies (stolen: their places are
 * NULLed) into one array reply that freeReplyObject() frees. */
static int merge_ranges(redisReply **replies, size_t n, size_t count, redisReply **out,
                        convo_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (replies[i]->type == REDIS_REPLY_ERROR)
            return convo__error(err, CONVO_EIO, NULL, "redis: %s", replies[i]->str);
        if (replies[i]->type != REDIS_REPLY_ARRAY)
            return convo__error(err, CONVO_EIO, NULL, "redis: unexpected ZRANGEBYLEX reply");
        total += replies[i]->elements;
    }
    member *all = malloc((total ? total : 1) * sizeof *all);
    redisReply *r = calloc(1, sizeof *r);
    size_t m = 0, keep = total < count ? total : count;
    if (r)
        r->element = malloc((keep ? keep : 1) * sizeof *r->element);
    if (!all || !r || !r->element) {
        free(all);
        if (r)
            free(r->element);
        free(r);
        return oom(err);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < replies[i]->elements; j++) {
            redisReply *e = replies[i]->element[j];
            if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len)) {
                free(all);
                free(r->element);
                free(r);
                return convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread index entry");
            }
            all[m++] = (member){e, &replies[i]->element[j]};
        }
    qsort(all, m, sizeof *all, bytes_cmp);
    r->type = REDIS_REPLY_ARRAY;
    r->elements = keep;
    for (size_t w = 0; w < keep; w++) {
        r->element[w] = all[w].r;
        *all[w].home = NULL;
    }
    free(all);
    *out = r;
    return 0;
}

int convo__rcl_index_range(rcl *cl, rcl_conns *cc, const char *from, size_t count,
                           redisReply **out, convo_error *err)
{
    rcl_cmd *cmds = calloc(RCL_SLOTS, sizeof *cmds);
    redisReply **replies = calloc(RCL_SLOTS, sizeof *replies);
    char limit[24];
    snprintf(limit, sizeof limit, "%zu", count);
    int rc = cmds && replies ? 0 : oom(err);
    for (unsigned s = 0; s < RCL_SLOTS && rc == 0; s++) {
        size_t klen;
        const char *argv[] = {"ZRANGEBYLEX", convo__rcl_index_key(cl, s, &klen), from, "+",
                              "LIMIT", "0", limit};
        size_t lens[7];
        for (int i = 0; i < 7; i++)
            lens[i] = strlen(argv[i]);
        char *buf = NULL;
        long long len = redisFormatCommandArgv(&buf, 7, argv, lens);
        if (len < 0)
            rc = oom(err);
        cmds[s] = (rcl_cmd){buf, (size_t)(len < 0 ? 0 : len), (int)s, RCL_PLAIN, 0};
    }
    if (rc == 0)
        rc = convo__rcl_run(cl, cc, cmds, RCL_SLOTS, replies, err);
    if (rc == 0)
        rc = merge_ranges(replies, RCL_SLOTS, count, out, err);
    for (unsigned s = 0; cmds && s < RCL_SLOTS; s++) {
        free((char *)cmds[s].buf);
        if (replies)
            freeReplyObject(replies[s]);
    }
    free(cmds);
    free(replies);
    return rc;
}

/* ---- open / close ---- */

static int seeds_add(rcl *cl, const char *hosts, convo_error *err)
{
    const char *p = hosts;
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 6379;
        if (len == 0 || (colon && (end != p + len || port < 1 || port > 65535)) || colon == p)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "redis+cluster URL: expected host:port[,host:port...]");
        if (node_id(cl, p, colon ? (size_t)(colon - p) : len, (int)port) < 0)
            return convo__error(err, CONVO_EINVAL, NULL, "redis+cluster URL: too many hosts");
        p += len;
        if (*p == ',' && !*++p)
            return convo__error(err, CONVO_EINVAL, NULL, "redis+cluster URL: empty host");
    }
    return cl->nnodes ? 0 : convo__error(err, CONVO_EINVAL, NULL, "redis+cluster URL: no host");
}

static int index_keys_make(rcl *cl)
{
    pthread_once(&tags_once, tags_fill);
    cl->stride = strlen(cl->prefix) + 12 + TAG_BYTES;
    if (!(cl->index_keys = malloc(cl->stride * RCL_SLOTS)))
        return CONVO_ENOMEM;
    for (unsigned s = 0; s < RCL_SLOTS; s++)
        snprintf(cl->index_keys + cl->stride * s, cl->stride, "%s:threads:{%s}", cl->prefix,
                 tags[s]);
    return 0;
}

int convo__rcl_new(rcl **out, const rcl_config *cfg, convo_error *err)
{
    rcl *cl = calloc(1, sizeof *cl);
    if (!cl)
        return oom(err);
    pthread_mutex_init(&cl->mu, NULL);
    memset(cl->slot_node, NO_NODE, sizeof cl->slot_node);
    for (int i = 0; i < MAX_NODES; i++)
        atomic_init(&cl->gen[i], 0);
    cl->cfg = *cfg;
    cl->prefix = strdup(cfg->prefix);
    cl->redacted = strdup(cfg->redacted);
    int rc = cl->prefix && cl->redacted && index_keys_make(cl) == 0 ? 0 : oom(err);
    if (rc == 0)
        rc = seeds_add(cl, cfg->hosts, err);
    if (rc != 0) {
        convo__rcl_free(cl);
        return rc;
    }
    *out = cl;
    return 0;
}

void convo__rcl_free(rcl *cl)
{
    if (!cl)
        return;
    for (int i = 0; i < cl->nnodes; i++)
        free(cl->nodes[i].host);
    pthread_mutex_destroy(&cl->mu);
    free(cl->prefix);
    free(cl->redacted);
    free(cl->index_keys);
    free(cl);
}

rcl_conns *convo__rcl_conns_new(void)
{
    rcl_conns *cc = calloc(1, sizeof *cc);
    if (cc)
        cc->pin = -1;
    return cc;
}

void convo__rcl_conns_free(rcl_conns *cc)
{
    if (!cc)
        return;
    for (int i = 0; i < MAX_NODES; i++)
        redisFree(cc->c[i]);
    free(cc);
}
