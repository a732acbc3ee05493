/* conn.c — connections and round trips: connecting (AUTH, SELECT, SCRIPT
 * LOAD), the pool, pipelines on one server or routed by cluster.c, WAIT for
 * replicas, replies and their errors, EVALSHA with the EVAL fallback on
 * NOSCRIPT. */
#include "redis_int.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

/* ---- errors and replies ---- */

int convo__rd_oom(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

static int is_timeout(const redisContext *c)
{
    /* hiredis put strerror(errno) of the failed read, write or connect there */
    return c->err == REDIS_ERR_IO && (strcmp(c->errstr, strerror(EAGAIN)) == 0 ||
                                      strcmp(c->errstr, strerror(ETIMEDOUT)) == 0);
}

/* The connection failed: name the cause, and when it went away rather than
 * timing out, mark every connection made so far as suspect (server restart). */
static int conn_error(convo_backend *b, const redisContext *c, convo_error *err)
{
    if (is_timeout(c))
        return convo__error(err, CONVO_ETIMEOUT, NULL, "redis: timed out (%s)", b->redacted);
    atomic_store(&b->stale_below, atomic_load(&b->next_gen));
    return convo__error(err, CONVO_EIO, NULL, "redis: %s (%s)",
                        c->errstr[0] ? c->errstr : "connection failed", b->redacted);
}

static int starts_with(const redisReply *r, const char *tag)
{
    size_t n = strlen(tag);
    return r->len >= n && memcmp(r->str, tag, n) == 0 && (r->len == n || r->str[n] == ' ');
}

/* An error reply: our scripts' tagged errors, else the server's (code = first word). */
int convo__rd_reply_error(const redisReply *r, convo_error *err)
{
    static const struct {
        const char *tag;
        int code;
    } tags[] = {{"CONVO_CONFLICT", CONVO_ECONFLICT}, {"CONVO_NOTFOUND", CONVO_ENOTFOUND},
                {"CONVO_TOOLARGE", CONVO_ETOOLARGE}, {"CONVO_CORRUPT", CONVO_ECORRUPT},
                {"CONVO_INVAL", CONVO_EINVAL},
                {"WRONGTYPE", CONVO_ECORRUPT}};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        if (!starts_with(r, tags[i].tag))
            continue;
        size_t skip = strlen(tags[i].tag) + (r->len > strlen(tags[i].tag));
        return convo__error(err, tags[i].code, NULL, "%.*s", (int)(r->len - skip), r->str + skip);
    }
    char code[16];
    size_t n = strcspn(r->str, " ");
    snprintf(code, sizeof code, "%.*s", (int)(n < 15 ? n : 15), r->str);
    return convo__error(err, CONVO_EIO, code, "redis: %.*s", (int)r->len, r->str);
}

/* ---- pipelines ---- */

/* A send error: the connection is broken; EAGAIN is the send timeout. */
static int send_error(convo_backend *b, rconn *rc, int errnum, convo_error *err)
{
    rc->broken = 1;
    if (errnum == EAGAIN || errnum == EWOULDBLOCK)
        return convo__error(err, CONVO_ETIMEOUT, NULL, "redis: timed out (%s)", b->redacted);
    atomic_store(&b->stale_below, atomic_load(&b->next_gen));
    return convo__error(err, CONVO_EIO, NULL, "redis: %s (%s)", strerror(errnum), b->redacted);
}

/* Writes the formatted commands with MSG_NOSIGNAL: hiredis would write(), and
 * a server that went away would kill the application with SIGPIPE. */
static int send_all(convo_backend *b, rconn *rc, struct iovec *iov, size_t n, convo_error *err)
{
    int e = convo__rcl_sendv(rc->c->fd, iov, n);
    return e ? send_error(b, rc, e, err) : 0;
}

/* Room for the RESP form of a command (a bound, not its exact length). */
static size_t resp_room(const cmd *c)
{
    size_t total = 32;
    for (size_t i = 0; i < c->n; i++)
        total += c->lens[i] + 32;
    return total;
}

/* Writes the RESP form of a command ("*N\r\n" then "$LEN\r\nARG\r\n" each)
 * at out, which has resp_room() bytes; returns its length. */
static size_t resp_write(const cmd *c, char *out)
{
    char *p = out;
    *p++ = '*';
    p += convo__rd_fmt_num(p, (long long)c->n);
    for (size_t i = 0; i < c->n; i++) {
        memcpy(p, "\r\n$", 3);
        p += 3;
        p += convo__rd_fmt_num(p, (long long)c->lens[i]);
        memcpy(p, "\r\n", 2);
        p += 2;
        if (c->lens[i])
            memcpy(p, c->argv[i], c->lens[i]);
        p += c->lens[i];
    }
    memcpy(p, "\r\n", 2);
    return (size_t)(p + 2 - out);
}

/* The RESP form of a command in one malloc'd buffer; NULL when out of memory. */
static char *format_command(const cmd *c, size_t *len)
{
    char *out = malloc(resp_room(c));
    if (out)
        *len = resp_write(c, out);
    return out;
}

/* The whole pipeline in one buffer and one sendmsg: on the stack when it is
 * small (a common append's five commands are), else malloc'd. */
/* cmds [0, n), then raw (RESP already, raw_len bytes) when given, in one write. */
static int send_commands(convo_backend *b, rconn *rc, cmd *cmds, size_t n, const char *raw,
                         size_t raw_len, convo_error *err)
{
    char small[2048];
    size_t room = 0;
    for (size_t i = 0; i < n; i++) {
        if (cmds[i].failed)
            return convo__rd_oom(err);
        room += resp_room(&cmds[i]);
    }
    char *buf = room <= sizeof small ? small : malloc(room);
    if (!buf)
        return convo__rd_oom(err);
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += resp_write(&cmds[i], buf + len);
    struct iovec iov[2] = {{buf, len}, {(void *)raw, raw_len}};
    int code = send_all(b, rc, iov, raw && raw_len ? 2 : 1, err);
    if (buf != small)
        free(buf);
    return code;
}

/* Sends commands [0, n) of a pipeline on one server (their replies are the
 * caller's to read). */
int convo__rd_send(convo_backend *b, rconn *rc, cmd *cmds, size_t n, convo_error *err)
{
    if (rc->broken)
        return convo__error(err, CONVO_EIO, NULL, "redis: connection lost (%s)", b->redacted);
    return send_commands(b, rc, cmds, n, NULL, 0, err);
}

/* convo__rd_send(), then a pipeline already in RESP form, in one write. */
int convo__rd_send_with(convo_backend *b, rconn *rc, cmd *cmds, size_t n, const char *raw,
                        size_t raw_len, convo_error *err)
{
    if (rc->broken)
        return convo__error(err, CONVO_EIO, NULL, "redis: connection lost (%s)", b->redacted);
    return send_commands(b, rc, cmds, n, raw, raw_len, err);
}

/* Sends a pipeline already in RESP form (buf[0..len)) on one server. */
int convo__rd_send_raw(convo_backend *b, rconn *rc, const char *buf, size_t len, convo_error *err)
{
    if (rc->broken)
        return convo__error(err, CONVO_EIO, NULL, "redis: connection lost (%s)", b->redacted);
    struct iovec iov = {(void *)buf, len};
    return send_all(b, rc, &iov, 1, err);
}

/* A read of replies failed (errnum, or 0: the server closed the connection):
 * the connection is broken, named as hiredis would. */
int convo__rd_read_failed(convo_backend *b, rconn *rc, int errnum, convo_error *err)
{
    if (errnum != 0)
        return send_error(b, rc, errnum, err);
    rc->broken = 1;
    atomic_store(&b->stale_below, atomic_load(&b->next_gen));
    return convo__error(err, CONVO_EIO, NULL, "redis: Server closed the connection (%s)",
                        b->redacted);
}

/* Sends commands [0, n) in one round trip; replies[i] gets each reply. On a
 * connection error nothing is returned and the connection is broken
 * (replies made in an arena are left to it). */
int convo__rd_pipeline_plain(convo_backend *b, rconn *rc, cmd *cmds, size_t n,
                             redisReply **replies, int arena, convo_error *err)
{
    int code = convo__rd_send(b, rc, cmds, n, err);
    if (code != 0)
        return code;
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(rc->c, &r) != REDIS_OK || !r) {
            while (i-- > 0) {
                if (!arena)
                    freeReplyObject(replies[i]);
                replies[i] = NULL;
            }
            rc->broken = 1;
            return conn_error(b, rc->c, err);
        }
        replies[i] = r;
    }
    return 0;
}

void convo__rd_replies_free(redisReply **replies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

/* cluster.c routes each command to the master of its key's slot. */
static int pipeline_cluster(convo_backend *b, rconn *rc, cmd *cmds, size_t n,
                            redisReply **replies, convo_error *err)
{
    rcl_cmd *rq = calloc(n ? n : 1, sizeof *rq);
    int code = rq ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && code == 0; i++) {
        char *buf = cmds[i].failed ? NULL : format_command(&cmds[i], &rq[i].len);
        if (!(rq[i].buf = buf))
            code = convo__rd_oom(err);
        else
            convo__rcl_classify(&rq[i], cmds[i].argv, cmds[i].lens, cmds[i].n);
    }
    if (code == 0)
        code = convo__rcl_run(b->cluster, rc->nodes, rq, n, replies, err);
    for (size_t i = 0; rq && i < n; i++)
        free((char *)rq[i].buf);
    free(rq);
    return code;
}

/* ?wait=N: a pipeline that may write ends with WAIT, whose answer decides. */
static int pipeline_wait(convo_backend *b, rconn *rc, cmd *cmds, size_t n, redisReply **replies,
                         convo_error *err)
{
    cmd *all = calloc(n + 1, sizeof *all);
    redisReply **got = calloc(n + 1, sizeof *got);
    int code = all && got ? 0 : convo__rd_oom(err);
    if (code == 0) {
        memcpy(all, cmds, n * sizeof *cmds);
        convo__rd_cmd_str(&all[n], "WAIT");
        convo__rd_cmd_num(&all[n], b->wait_replicas);
        convo__rd_cmd_num(&all[n], b->wait_timeout_ms);
        code = convo__rd_pipeline_plain(b, rc, all, n + 1, got, 0, err);
        convo__rd_cmd_free(&all[n]);
    }
    if (code == 0 && (code = convo__rcl_wait_check(got[n], b->wait_replicas, b->redacted, err)))
        convo__rd_replies_free(got, n + 1);
    if (code == 0) {
        memcpy(replies, got, n * sizeof *got);
        freeReplyObject(got[n]);
    }
    free(all);
    free(got);
    return code;
}

static int may_write(const cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rcl_cmd c;
        convo__rcl_classify(&c, cmds[i].argv, cmds[i].lens, cmds[i].n);
        if (c.write)
            return 1;
    }
    return 0;
}

int convo__rd_pipeline(convo_backend *b, rconn *rc, cmd *cmds, size_t n, redisReply **replies,
                       convo_error *err)
{
    if (rc->nodes)
        return pipeline_cluster(b, rc, cmds, n, replies, err);
    if (b->wait_replicas && may_write(cmds, n))
        return pipeline_wait(b, rc, cmds, n, replies, err);
    return convo__rd_pipeline_plain(b, rc, cmds, n, replies, 0, err);
}

int convo__rd_is_noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && starts_with(r, "NOSCRIPT");
}

/* Like convo__rd_pipeline(), where cmds[at] is "EVALSHA sha ...": when the server has
 * lost the script (restart, SCRIPT FLUSH) nothing ran, so the same pipeline
 * is sent again with EVAL, which also caches the script. */
int convo__rd_pipeline_script(convo_backend *b, rconn *rc, cmd *cmds, size_t n, size_t at,
                              int script, redisReply **replies, convo_error *err)
{
    if (cmds[at].failed || cmds[at].n < 2)
        return convo__rd_oom(err);
    cmds[at].argv[0] = "EVALSHA";
    cmds[at].argv[1] = b->sha[script];
    cmds[at].lens[0] = 7;
    cmds[at].lens[1] = 40;
    int rc_ = convo__rd_pipeline(b, rc, cmds, n, replies, err);
    if (rc_ != 0 || !convo__rd_is_noscript(replies[at]))
        return rc_;
    convo__rd_replies_free(replies, n);
    cmds[at].argv[0] = "EVAL";
    cmds[at].lens[0] = 4;
    cmds[at].argv[1] = convo__rd_scripts[script];
    cmds[at].lens[1] = strlen(convo__rd_scripts[script]);
    return convo__rd_pipeline(b, rc, cmds, n, replies, err);
}

/* ---- connections ---- */

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static int connect_raw(convo_backend *b, redisContext **out, convo_error *err)
{
    struct timeval ct = ms_to_tv(b->connect_timeout_ms);
    redisContext *c;
    if (b->socket_path)
        c = b->connect_timeout_ms ? redisConnectUnixWithTimeout(b->socket_path, ct)
                                  : redisConnectUnix(b->socket_path);
    else
        c = b->connect_timeout_ms ? redisConnectWithTimeout(b->host, b->port, ct)
                                  : redisConnect(b->host, b->port);
    if (!c)
        return convo__rd_oom(err);
    if (c->err) {
        int rc = is_timeout(c)
                     ? convo__error(err, CONVO_ETIMEOUT, NULL, "redis: connect timed out (%s)",
                                    b->redacted)
                     : convo__error(err, CONVO_EIO, NULL, "redis: cannot connect: %s (%s)",
                                    c->errstr, b->redacted);
        redisFree(c);
        return rc;
    }
    if (b->timeout_ms && redisSetTimeout(c, ms_to_tv(b->timeout_ms)) != REDIS_OK) {
        int rc = conn_error(b, c, err);
        redisFree(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int setup_error(convo_backend *b, const redisReply *r, int code, convo_error *err)
{
    char word[16];
    size_t n = strcspn(r->str, " ");
    snprintf(word, sizeof word, "%.*s", (int)(n < 15 ? n : 15), r->str);
    return convo__error(err, code, word, "redis: %s (%s)", r->str, b->redacted);
}

/* AUTH, SELECT and SCRIPT LOAD of every script in one round trip: a restarted
 * server has an empty script cache, and a new connection is the moment to refill it. */
static int connection_setup(convo_backend *b, rconn *rc, convo_error *err)
{
    cmd cmds[2 + S_COUNT] = {{0}};
    int codes[2 + S_COUNT];
    size_t n = 0;
    if (b->password) {
        convo__rd_cmd_str(&cmds[n], "AUTH");
        if (b->user)
            convo__rd_cmd_str(&cmds[n], b->user);
        convo__rd_cmd_str(&cmds[n], b->password);
        codes[n++] = CONVO_EIO;
    }
    if (b->db != 0) {
        convo__rd_cmd_str(&cmds[n], "SELECT");
        convo__rd_cmd_num(&cmds[n], b->db);
        codes[n++] = CONVO_EINVAL;
    }
    size_t first_script = n;
    for (int i = 0; i < S_COUNT; i++) {
        convo__rd_cmd_str(&cmds[n], "SCRIPT");
        convo__rd_cmd_str(&cmds[n], "LOAD");
        convo__rd_cmd_str(&cmds[n], convo__rd_scripts[i]);
        codes[n++] = CONVO_EIO;
    }
    redisReply *replies[2 + S_COUNT] = {NULL};
    int code = convo__rd_pipeline(b, rc, cmds, n, replies, err);
    for (size_t i = 0; i < n && code == 0; i++) {
        const redisReply *r = replies[i];
        if (r->type == REDIS_REPLY_ERROR)
            code = setup_error(b, r, codes[i], err);
        else if (i >= first_script && (r->type != REDIS_REPLY_STRING || r->len != 40))
            code = convo__error(err, CONVO_EIO, NULL, "redis: unexpected SCRIPT LOAD reply");
        else if (i >= first_script && b->sha[i - first_script][0] == '\0')
            memcpy(b->sha[i - first_script], r->str, 41); /* set once, while open() is alone */
    }
    convo__rd_replies_free(replies, n);
    for (size_t i = 0; i < n; i++)
        convo__rd_cmd_free(&cmds[i]);
    return code;
}

/* rcl_setup_fn: a new connection to a cluster node. */
int convo__rd_node_setup(void *ctx, redisContext *c, convo_error *err)
{
    rconn one = {.c = c};
    return connection_setup(ctx, &one, err);
}

static int pool_connect(void *ctx, void **conn, convo_error *err)
{
    convo_backend *b = ctx;
    rconn *rc = calloc(1, sizeof *rc);
    if (!rc)
        return convo__rd_oom(err);
    if (b->cluster) {
        if (!(rc->nodes = convo__rcl_conns_new())) {
            free(rc);
            return convo__rd_oom(err);
        }
        rc->gen = atomic_fetch_add(&b->next_gen, 1);
        *conn = rc;
        return 0;
    }
    int code = connect_raw(b, &rc->c, err);
    if (code == 0 && (code = connection_setup(b, rc, err)) != 0)
        redisFree(rc->c);
    if (code != 0) {
        free(rc);
        return code;
    }
    rc->gen = atomic_fetch_add(&b->next_gen, 1);
    *conn = rc;
    return 0;
}

static void pool_disconnect(void *ctx, void *conn)
{
    rconn *rc = conn;
    redisFree(rc->c);
    convo__rcl_conns_free(rc->nodes);
    free(rc);
}

const convo_pool_ops convo__rd_pool_ops = {pool_connect, pool_disconnect};

/* A connection that is not older than the last failure seen: after a server
 * restart every idle connection is dead, and the next call must not pay for it. */
int convo__rd_acquire(convo_backend *b, rconn **out, convo_error *err)
{
    for (;;) {
        void *p;
        int rc = convo__pool_acquire(b->pool, &p, err);
        if (rc != 0)
            return rc;
        rconn *c = p;
        if (c->gen >= atomic_load(&b->stale_below)) {
            *out = c;
            return 0;
        }
        convo__pool_release(b->pool, c, true);
    }
}

void convo__rd_release(convo_backend *b, rconn *c)
{
    convo__pool_release(b->pool, c, (c->c && c->c->err != 0) || c->broken);
}
