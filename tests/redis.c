/* redis.c — the Redis driver's own checks, beyond the conformance suite: the
 * key scheme seen by a plain hiredis client (checkpoint keys included), TTL
 * expiry of every key, server restarts, timeouts, lost scripts, corrupt
 * records, the thread index, and each .lua file of drivers/redis compiled on its own.
 * Server: $CONVO_TEST_REDIS_URL; restarts and pauses use a private redis-server. */
#include <check.h>
#include <convo.h>
#include <dirent.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *base_url;     /* the shared server */
static char run_id[40];          /* unique per run: prefixes start with it */
static char priv_dir[64];        /* the private server's folder, "" when none */
static int priv_port;
static char priv_url[128], priv_sock[128];

/* ------------------------------------------------------------ helpers */

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* url + "prefix=P" (+ more), with '?' or '&' as needed. */
static void url_with(char *buf, size_t size, const char *url, const char *params)
{
    snprintf(buf, size, "%s%s%s", url, strchr(url, '?') ? "&" : "?", params);
}

static convo_store *open_url(const char *url)
{
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    ck_assert_msg(rc == 0, "convo_open(%s): %d %s", url, rc, err.message);
    return s;
}

static convo_store *open_prefix(const char *url, const char *prefix, const char *more)
{
    char params[256], full[512];
    snprintf(params, sizeof params, "prefix=%s%s%s", prefix, more ? "&" : "", more ? more : "");
    url_with(full, sizeof full, url, params);
    return open_url(full);
}

static const char *const two[] = {"{\"role\":\"user\",\"content\":\"hello\"}",
                                  "{\"role\":\"assistant\", \"content\" : \"h\\u00e9 \"}"};

static void append_ok(convo_store *s, const char *id, const char *key)
{
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = key;
    convo_error err;
    int rc = convo_append(s, id, two, NULL, 2, &o, NULL, &err);
    ck_assert_msg(rc == 0, "append %s: %d %s", id, rc, err.message);
}

static void extra_ok(convo_store *s, const char *id, const char *patch)
{
    convo_error err;
    int rc = convo_save_extra(s, id, patch, &err);
    ck_assert_msg(rc == 0, "save_extra %s: %d %s", id, rc, err.message);
}

/* A checkpoint "c1" with one channel value and one pending write. */
static void checkpoint_ok(convo_store *s, const char *id, const char *ns)
{
    convo_blob v = {"json", "42", 2};
    convo_channel_in ch[] = {{"n", "1", &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = id;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = "c1";
    cp.metadata_json = "{\"step\":1}";
    cp.channels = ch;
    cp.nchannels = 1;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    ck_assert_msg(rc == 0, "checkpoint_put %s: %d %s", id, rc, err.message);
    convo_write_in w = {0, "n", {"json", "43", 2}};
    rc = convo_checkpoint_put_writes(s, id, ns, "c1", "task", "", &w, 1, &err);
    ck_assert_msg(rc == 0, "put_writes %s: %d %s", id, rc, err.message);
}

static int64_t length_of(convo_store *s, const char *id)
{
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, id, NULL, &h, &err);
    if (rc == CONVO_ENOTFOUND)
        return -1;
    ck_assert_msg(rc == 0, "load %s: %d %s", id, rc, err.message);
    int64_t n = convo_history_length(h);
    convo_history_free(h);
    return n;
}

/* ------------------------------------------- a plain hiredis client */

/* Connects to a redis:// or redis+unix:// URL as given (auth and db included). */
static redisContext *plain_connect(const char *url)
{
    char buf[512], *user = NULL, *pass = NULL, *db = NULL;
    snprintf(buf, sizeof buf, "%s", url);
    char *q = strchr(buf, '?');
    if (q) {
        *q++ = '\0';
        char *d = strstr(q, "db=");
        if (d && (d == q || d[-1] == '&'))
            db = strtok(d + 3, "&");
    }
    int unix_sock = strncmp(buf, "redis+unix://", 13) == 0;
    char *rest = buf + (unix_sock ? 13 : 8);
    char *at = strrchr(rest, '@');
    if (at) {
        *at = '\0';
        user = rest;
        pass = strchr(rest, ':');
        if (pass)
            *pass++ = '\0';
        rest = at + 1;
    }
    redisContext *c;
    if (unix_sock) {
        c = redisConnectUnix(rest);
    } else {
        char *slash = strchr(rest, '/');
        if (slash) {
            *slash = '\0';
            if (slash[1])
                db = slash + 1;
        }
        char *colon = strrchr(rest, ':');
        int port = colon ? atoi(colon + 1) : 6379;
        if (colon)
            *colon = '\0';
        c = redisConnect(*rest ? rest : "127.0.0.1", port);
    }
    ck_assert_msg(c && !c->err, "plain connect to %s: %s", url, c ? c->errstr : "oom");
    redisReply *r = NULL;
    if (pass)
        r = *user ? redisCommand(c, "AUTH %s %s", user, pass) : redisCommand(c, "AUTH %s", pass);
    freeReplyObject(r);
    if (db) {
        r = redisCommand(c, "SELECT %s", db);
        freeReplyObject(r);
    }
    return c;
}

static redisReply *cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "plain command %s: %s", fmt, c->errstr);
    return r;
}

static long long cmd_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r && r->type == REDIS_REPLY_INTEGER, "%s: not an integer reply (%s)", fmt,
                  r && r->type == REDIS_REPLY_ERROR ? r->str : "");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Every key matching pattern (SCAN, never KEYS); caller frees with keys_free. */
typedef struct keyset {
    char **k;
    size_t n;
} keyset;

static keyset scan_keys(redisContext *c, const char *pattern)
{
    keyset ks = {NULL, 0};
    char cursor[32] = "0";
    do {
        redisReply *r = cmd(c, "SCAN %s MATCH %s COUNT 500", cursor, pattern);
        ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *a = r->element[1];
        ks.k = realloc(ks.k, (ks.n + a->elements + 1) * sizeof *ks.k);
        for (size_t i = 0; i < a->elements; i++)
            ks.k[ks.n++] = strndup(a->element[i]->str, a->element[i]->len);
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return ks;
}

static void keys_free(keyset *ks)
{
    for (size_t i = 0; i < ks->n; i++)
        free(ks->k[i]);
    free(ks->k);
}

/* CRC16-CCITT (XMODEM), as Redis Cluster hashes keys. */
static unsigned crc16(const char *buf, size_t len)
{
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)buf[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
        crc &= 0xffff;
    }
    return crc;
}

/* CLUSTER KEYSLOT, computed here: the hash tag rule of the Redis Cluster spec. */
static unsigned keyslot(const char *key)
{
    size_t len = strlen(key);
    const char *open = strchr(key, '{');
    if (open) {
        const char *close = strchr(open + 1, '}');
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & 16383;
    }
    return crc16(key, len) & 16383;
}

/* Escapes glob characters so a prefix can start a SCAN MATCH pattern. */
static void glob_escape(char *out, size_t size, const char *s)
{
    size_t o = 0;
    for (; *s && o + 3 < size; s++) {
        if (strchr("*?[]\\", *s))
            out[o++] = '\\';
        out[o++] = *s;
    }
    out[o] = '\0';
}

static void percent_decode(char *out, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n + 1) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            out[o++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
}

/* ------------------------------------------------ the private server */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int priv_ping(void)
{
    redisContext *c = redisConnect("127.0.0.1", priv_port);
    int ok = 0;
    if (c && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

static int priv_start(void)
{
    char line[1024];
    snprintf(line, sizeof line,
             "redis-server --port %d --bind 127.0.0.1 --unixsocket %s --unixsocketperm 700 "
             "--save '' --appendonly no --dir %s --dbfilename dump.rdb --daemonize yes "
             "--pidfile %s/redis.pid --logfile %s/redis.log >/dev/null 2>&1",
             priv_port, priv_sock, priv_dir, priv_dir, priv_dir);
    if (system(line) != 0)
        return -1;
    for (int i = 0; i < 100; i++, sleep_ms(50))
        if (priv_ping())
            return 0;
    return -1;
}

/* SHUTDOWN SAVE keeps the data for the next start, like a real restart. */
static void priv_stop(int save)
{
    redisContext *c = redisConnect("127.0.0.1", priv_port);
    if (c && !c->err)
        freeReplyObject(redisCommand(c, save ? "SHUTDOWN SAVE" : "SHUTDOWN NOSAVE"));
    redisFree(c);
    for (int i = 0; i < 100 && priv_ping(); i++)
        sleep_ms(50);
}

static void priv_setup(void)
{
    snprintf(priv_dir, sizeof priv_dir, "/tmp/convo-redis-test.XXXXXX");
    if (!mkdtemp(priv_dir) || (priv_port = free_port()) < 0) {
        priv_dir[0] = '\0';
        return;
    }
    snprintf(priv_sock, sizeof priv_sock, "%s/redis.sock", priv_dir);
    snprintf(priv_url, sizeof priv_url, "redis://127.0.0.1:%d", priv_port);
    if (priv_start() != 0) {
        fprintf(stderr, "redis: could not start a private redis-server; restart and timeout "
                        "cases are skipped\n");
        rmdir(priv_dir);
        priv_dir[0] = '\0';
    }
}

/* The server's pid from its pidfile, or 0. */
static pid_t priv_pid(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/redis.pid", priv_dir);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return (pid_t)pid;
}

static void priv_teardown(void)
{
    if (!priv_dir[0])
        return;
    pid_t pid = priv_pid();
    priv_stop(0);
    if (pid > 0 && priv_ping()) /* SHUTDOWN refused (a failed test left a password) */
        kill(pid, SIGTERM);
    char line[256];
    snprintf(line, sizeof line, "rm -rf '%s'", priv_dir);
    if (system(line) != 0)
        fprintf(stderr, "could not remove %s\n", priv_dir);
}

/* The private server, or a skip (a failure under CONVO_REQUIRE_ALL=1). */
static int need_private(void)
{
    if (priv_dir[0])
        return 1;
    const char *req = getenv("CONVO_REQUIRE_ALL");
    ck_assert_msg(!(req && strcmp(req, "1") == 0), "no private redis-server (redis-server not "
                                                   "installed?) and CONVO_REQUIRE_ALL=1");
    fprintf(stderr, "skipped: no private redis-server\n");
    return 0;
}

/* ------------------------------------------------------------ tests */

static const char *const odd_ids[] = {
    "plain", "we{ir}d:id", "}{", "glob*?[x]\\", "\xc3\xbcn\xc3\xaf c\xc3\xb8" "d\xc3\xa9",
    "sp ace", "%41", "a:b:c", "{}", NULL};

/* One thread's keys: P:{tag}:SUFFIX, one slot, the tag decoding to the id. */
static void check_key_shape(const char *prefix, const char *key, char *tag_out, size_t size)
{
    size_t plen = strlen(prefix);
    ck_assert_msg(strncmp(key, prefix, plen) == 0 && key[plen] == ':', "foreign key %s", key);
    const char *open = key + plen + 1;
    ck_assert_msg(*open == '{', "key without a hash tag: %s", key);
    const char *close = strchr(open, '}');
    ck_assert_msg(close != NULL, "unclosed tag in %s", key);
    static const char *const suffixes[] = {":meta", ":msgs", ":idem",  ":extra", ":cp",
                                           ":cpidx", ":blobs", ":writes", NULL};
    const char *suffix = close + 1;
    size_t k = 0;
    while (suffixes[k] && strcmp(suffix, suffixes[k]) != 0)
        k++;
    ck_assert_msg(suffixes[k] != NULL, "unexpected key %s", key);
    ck_assert_msg((size_t)(close - open - 1) < size, "tag too long");
    ck_assert_msg(memchr(open + 1, ':', (size_t)(close - open - 1)) == NULL, "':' in tag of %s",
                  key);
    snprintf(tag_out, size, "%.*s", (int)(close - open - 1), open + 1);
}

static void check_key_scheme(redisContext *c, const char *prefix, const char *const *ids,
                             size_t nids, size_t min_keys)
{
    char pat[300];
    glob_escape(pat, sizeof pat - 2, prefix);
    strcat(pat, ":*");
    keyset ks = scan_keys(c, pat);
    char index_key[300], store_key[300], ix[300];
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    snprintf(store_key, sizeof store_key, "%s:store", prefix); /* layout, put order */
    snprintf(ix, sizeof ix, "%s:ix:", prefix); /* the thread index (tests/redis-index.c) */
    size_t seen[64] = {0};
    unsigned slot[64];
    for (size_t i = 0; i < ks.n; i++) {
        if (strcmp(ks.k[i], index_key) == 0 || strcmp(ks.k[i], store_key) == 0 ||
            strncmp(ks.k[i], ix, strlen(ix)) == 0)
            continue;
        char tag[2048], id[2048];
        check_key_shape(prefix, ks.k[i], tag, sizeof tag);
        percent_decode(id, tag, strlen(tag));
        size_t j = 0;
        while (j < nids && strcmp(ids[j], id) != 0)
            j++;
        ck_assert_msg(j < nids, "key %s decodes to unknown thread '%s'", ks.k[i], id);
        unsigned s = keyslot(ks.k[i]);
        ck_assert_msg(seen[j] == 0 || slot[j] == s, "keys of '%s' in two slots", id);
        slot[j] = s;
        seen[j]++;
    }
    for (size_t j = 0; j < nids; j++)
        ck_assert_msg(seen[j] >= min_keys, "thread '%s' has %zu keys", ids[j], seen[j]);
    keys_free(&ks);
}

START_TEST(test_key_scheme)
{
    char prefix[80], other[80];
    snprintf(prefix, sizeof prefix, "%s-keys", run_id);
    snprintf(other, sizeof other, "%s-keys-other", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    convo_store *o = open_prefix(base_url, other, NULL);
    const char *ids[16];
    size_t n = 0;
    for (; odd_ids[n]; n++) {
        ids[n] = odd_ids[n];
        append_ok(s, ids[n], "k1");
        extra_ok(s, ids[n], "{\"a\":1}");
        checkpoint_ok(s, ids[n], odd_ids[(n + 1) % 9]); /* odd namespaces too */
        append_ok(o, ids[n], "k1"); /* the same ids under another prefix */
    }
    char long_id[513];
    memset(long_id, '}', 512);
    long_id[512] = '\0';
    append_ok(s, long_id, "k");
    ids[n++] = long_id;
    convo_error err;
    ck_assert_int_eq(convo_thread_fork(s, "plain", "fork{dst}", -1, &err), 0);
    ids[n++] = "fork{dst}";
    redisContext *c = plain_connect(base_url);
    check_key_scheme(c, prefix, ids, n, 3);
    /* the threads with checkpoints have all eight keys */
    for (size_t i = 0; odd_ids[i]; i++) {
        char gprefix[300], tag[1600], pat[4096];
        glob_escape(gprefix, sizeof gprefix, prefix);
        size_t t = 0;
        for (const unsigned char *q = (const unsigned char *)odd_ids[i]; *q; q++)
            t += (size_t)(*q > 0x20 && *q != 0x7f && !strchr("%{}:*?[]\\", *q)
                              ? snprintf(tag + t, sizeof tag - t, "%c", *q)
                              : snprintf(tag + t, sizeof tag - t, "%%%02X", *q));
        char gtag[3300];
        glob_escape(gtag, sizeof gtag, tag);
        snprintf(pat, sizeof pat, "%s:{%s}:*", gprefix, gtag);
        keyset one = scan_keys(c, pat);
        ck_assert_msg(one.n == 8, "thread '%s' has %zu keys, not 8", odd_ids[i], one.n);
        keys_free(&one);
    }
    /* the index holds the raw ids, in byte order */
    char index_key[120];
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), (long long)n);
    for (size_t i = 0; i < n; i++) {
        redisReply *r = cmd(c, "ZSCORE %s %s", index_key, ids[i]);
        ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "0") == 0,
                      "'%s' not in the index with score 0", ids[i]);
        freeReplyObject(r);
    }
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(convo_thread_delete(s, ids[i], &err), 0);
    char pat[200];
    glob_escape(pat, sizeof pat - 2, prefix);
    strcat(pat, ":*");
    keyset left = scan_keys(c, pat);
    char store_key[120]; /* the store's own: its layout version and last put order */
    snprintf(store_key, sizeof store_key, "%s:store", prefix);
    ck_assert_msg(left.n == 1 && strcmp(left.k[0], store_key) == 0,
                  "%zu keys left after deleting every thread, e.g. %s", left.n,
                  left.n ? left.k[0] : "");
    keys_free(&left);
    /* the other prefix saw none of it */
    for (size_t i = 0; odd_ids[i]; i++)
        ck_assert_int_eq(length_of(o, odd_ids[i]), 2);
    check_key_scheme(c, other, odd_ids, n - 2, 3);
    for (size_t i = 0; odd_ids[i]; i++)
        convo_thread_delete(o, odd_ids[i], NULL);
    redisFree(c);
    convo_close(s);
    convo_close(o);
}
END_TEST

/* The keys of one thread (by its tag) with their absolute expiry times. */
static size_t thread_keys_expiry(redisContext *c, const char *prefix, const char *tag,
                                 long long *at, size_t max)
{
    char pat[300];
    glob_escape(pat, sizeof pat, prefix);
    size_t n = strlen(pat);
    snprintf(pat + n, sizeof pat - n, ":{%s}:*", tag);
    keyset ks = scan_keys(c, pat);
    for (size_t i = 0; i < ks.n && i < max; i++)
        at[i] = cmd_int(c, "PEXPIRETIME %s", ks.k[i]);
    size_t count = ks.n;
    keys_free(&ks);
    return count;
}

START_TEST(test_ttl_expiry)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-ttl", run_id);
    /* 3 s: the setup below must not outlive the ttl on a loaded machine */
    convo_store *s = open_prefix(base_url, prefix, "ttl=3");
    convo_store *forever = open_prefix(base_url, prefix, NULL);
    append_ok(s, "a", "key-1");
    extra_ok(s, "a", "{\"x\":null}");
    checkpoint_ok(s, "a", "");
    append_ok(s, "a", "key-2");
    convo_error err;
    ck_assert_int_eq(convo_thread_fork(s, "a", "b", -1, &err), 0);
    append_ok(s, "c", "key-1");
    extra_ok(forever, "c", "{\"kept\":true}"); /* a store without ttl makes c permanent */
    /* so does a plain append (the short script) by a store that wrote d before */
    ck_assert_int_eq(convo_append(forever, "d", two, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_append(forever, "d", two, NULL, 1, NULL, NULL, &err), 0);
    checkpoint_ok(s, "d", "");
    redisContext *c = plain_connect(base_url);
    long long at[8];
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "d", at, 8), 6);
    ck_assert_msg(at[0] > 0, "d should expire");
    ck_assert_int_eq(convo_append(forever, "d", two, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "d", at, 8), 6);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(at[i] == -1, "d should be permanent (%lld)", at[i]);
    /* a: every key, checkpoint keys included, with one deadline */
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "a", at, 8), 8);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(at[i] > 0 && at[i] == at[0], "keys of a expire apart: %lld vs %lld", at[i],
                      at[0]);
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "b", at, 8), 3);
    ck_assert_msg(at[0] > 0 && at[1] == at[0] && at[2] == at[0], "keys of b expire apart");
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "c", at, 8), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(at[i] == -1, "c should be permanent (%lld)", at[i]);
    ck_assert_int_eq(convo_thread_delete(forever, "d", &err), 0);
    sleep_ms(4300);
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "a", at, 8), 0);
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "b", at, 8), 0);
    ck_assert_int_eq(length_of(s, "a"), -1);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "a", "", NULL, &cp, &err), CONVO_ENOTFOUND);
    char index_key[120];
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 3);
    uint64_t removed = 0;
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0); /* prunes the index entries of a, b */
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 1);
    convo_thread_page *p;
    ck_assert_int_eq(convo_thread_list(s, NULL, 10, &p, &err), 0);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    ck_assert_str_eq(convo_thread_page_id(p, 0), "c");
    convo_thread_page_free(p);
    ck_assert_int_eq(convo_thread_delete(s, "c", &err), 0);
    redisFree(c);
    convo_close(s);
    convo_close(forever);
}
END_TEST

static void *append_many(void *arg)
{
    convo_store *s = arg;
    for (int i = 0; i < 20; i++)
        if (convo_append(s, "restart", two, NULL, 1, NULL, NULL, NULL) != 0)
            return (void *)1;
    return NULL;
}

START_TEST(test_restart)
{
    if (!need_private())
        return;
    convo_store *s = open_prefix(priv_url, "restart", "pool=4");
    pthread_t t[4];
    for (int i = 0; i < 4; i++) /* leave several idle connections in the pool */
        pthread_create(&t[i], NULL, append_many, s);
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        ck_assert_ptr_null(bad);
    }
    priv_stop(1);
    ck_assert_int_eq(priv_start(), 0);
    convo_error err;
    double t0 = now_s();
    int rc = convo_append(s, "restart", two, NULL, 1, NULL, NULL, &err);
    ck_assert_msg(rc == CONVO_EIO, "the call after a restart: %d %s", rc, err.message);
    ck_assert_msg(now_s() - t0 < 2, "the failure took %.1f s", now_s() - t0);
    convo_append_result res;
    rc = convo_append(s, "restart", two, NULL, 1, NULL, &res, &err);
    ck_assert_msg(rc == 0, "the next call: %d %s", rc, err.message);
    ck_assert_int_eq(res.first_seq, 80); /* data kept, the failed call wrote nothing */
    /* server down: EIO; up again: fine */
    priv_stop(1);
    rc = convo_append(s, "restart", two, NULL, 1, NULL, NULL, &err);
    ck_assert_msg(rc == CONVO_EIO, "server down: %d %s", rc, err.message);
    ck_assert_int_eq(priv_start(), 0);
    rc = convo_append(s, "restart", two, NULL, 1, NULL, &res, &err);
    ck_assert_msg(rc == 0 && res.first_seq == 81, "after the second restart: %d %s", rc,
                  err.message);
    ck_assert_int_eq(length_of(s, "restart"), 82);
    ck_assert_int_eq(convo_thread_delete(s, "restart", &err), 0);
    convo_close(s);
}
END_TEST

START_TEST(test_timeout)
{
    if (!need_private())
        return;
    convo_store *s = open_prefix(priv_url, "timeout", "timeout=300");
    redisContext *c = plain_connect(priv_url);
    freeReplyObject(cmd(c, "CLIENT PAUSE 1500 ALL"));
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = "once";
    convo_error err;
    double t0 = now_s();
    int rc = convo_append(s, "t", two, NULL, 1, &o, NULL, &err);
    double took = now_s() - t0;
    ck_assert_msg(rc == CONVO_ETIMEOUT, "paused server: %d %s", rc, err.message);
    ck_assert_msg(took >= 0.25 && took < 1.2, "timed out after %.2f s", took);
    sleep_ms(1600);
    /* the outcome of a timed-out append is unknown: a retry with its key is exactly-once */
    convo_append_result res;
    rc = convo_append(s, "t", two, NULL, 1, &o, &res, &err);
    ck_assert_msg(rc == 0, "retry: %d %s", rc, err.message);
    ck_assert_int_eq(res.first_seq, 0);
    ck_assert_int_eq(length_of(s, "t"), 1);
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    redisFree(c);
    convo_close(s);
}
END_TEST

START_TEST(test_noscript)
{
    if (!need_private())
        return;
    convo_store *s = open_prefix(priv_url, "noscript", NULL);
    redisContext *c = plain_connect(priv_url);
    convo_error err;
    append_ok(s, "n", NULL);
    freeReplyObject(cmd(c, "SCRIPT FLUSH"));
    append_ok(s, "n", NULL);
    freeReplyObject(cmd(c, "SCRIPT FLUSH"));
    extra_ok(s, "n", "{\"k\":\"v\"}");
    freeReplyObject(cmd(c, "SCRIPT FLUSH"));
    ck_assert_int_eq(convo_thread_fork(s, "n", "m", 3, &err), 0);
    ck_assert_int_eq(length_of(s, "m"), 3);
    /* the checkpoint scripts, each after a flush */
    freeReplyObject(cmd(c, "SCRIPT FLUSH"));
    checkpoint_ok(s, "n", "");
    freeReplyObject(cmd(c, "SCRIPT FLUSH"));
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "n", "", NULL, &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    freeReplyObject(cmd(c, "SCRIPT FLUSH"));
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = "n";
    convo_checkpoint_set *set;
    ck_assert_int_eq(convo_checkpoint_list(s, &lo, &set, &err), 0);
    ck_assert_int_eq(convo_checkpoint_set_count(set), 1);
    convo_checkpoint_set_free(set);
    freeReplyObject(cmd(c, "SCRIPT FLUSH"));
    ck_assert_int_eq(convo_checkpoint_prune(s, "n", 0, &err), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, "n", "", NULL, &cp, &err), CONVO_ENOTFOUND);
    freeReplyObject(cmd(c, "SCRIPT FLUSH"));
    ck_assert_int_eq(convo_thread_delete(s, "n", &err), 0);
    ck_assert_int_eq(convo_thread_delete(s, "m", &err), 0);
    redisFree(c);
    convo_close(s);
}
END_TEST

START_TEST(test_unix_socket_db)
{
    if (!need_private())
        return;
    char url[256];
    snprintf(url, sizeof url, "redis+unix://%s?db=3", priv_sock);
    convo_store *s = open_prefix(url, "sock", NULL);
    append_ok(s, "u", NULL);
    redisContext *c = plain_connect(url);
    ck_assert_int_eq(cmd_int(c, "EXISTS sock:{u}:meta"), 1);
    freeReplyObject(cmd(c, "SELECT 0"));
    ck_assert_int_eq(cmd_int(c, "EXISTS sock:{u}:meta"), 0);
    /* the same database through TCP and a path */
    char tcp[200];
    snprintf(tcp, sizeof tcp, "%s/3", priv_url);
    convo_store *t = open_prefix(tcp, "sock", NULL);
    ck_assert_int_eq(length_of(t, "u"), 2);
    convo_error err;
    ck_assert_int_eq(convo_thread_delete(t, "u", &err), 0);
    redisFree(c);
    convo_close(s);
    convo_close(t);
}
END_TEST

START_TEST(test_auth)
{
    if (!need_private())
        return;
    redisContext *c = plain_connect(priv_url);
    freeReplyObject(cmd(c, "ACL SETUSER alice on >wonderland ~* &* +@all"));
    freeReplyObject(cmd(c, "CONFIG SET requirepass s3cr3t"));
    char url[256];
    convo_store *s = NULL;
    convo_error err;
    snprintf(url, sizeof url, "redis://:wrong-pw@127.0.0.1:%d", priv_port);
    int rc = convo_open(&s, url, &err);
    ck_assert_int_eq(rc, CONVO_EIO);
    ck_assert_msg(strstr(err.message, "wrong-pw") == NULL, "password in message: %s",
                  err.message);
    snprintf(url, sizeof url, "redis://:s3cr3t@127.0.0.1:%d?prefix=auth", priv_port);
    s = open_url(url);
    append_ok(s, "x", NULL);
    convo_close(s);
    snprintf(url, sizeof url, "redis://alice:wonderland@127.0.0.1:%d?prefix=auth", priv_port);
    s = open_url(url);
    ck_assert_int_eq(length_of(s, "x"), 2);
    ck_assert_int_eq(convo_thread_delete(s, "x", &err), 0);
    convo_close(s);
    freeReplyObject(cmd(c, "CONFIG SET requirepass %s", ""));
    freeReplyObject(cmd(c, "ACL DELUSER alice"));
    redisFree(c);
}
END_TEST

/* A store without ttl that appends to a thread a store with ttl wrote makes
 * every key of it permanent again, also when it wrote the thread lately (the
 * append script answers CONVO_CREATE and runs again with every key). */
START_TEST(test_append_removes_deadline)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-persist", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    append_ok(s, "t", NULL);
    char with_ttl[300];
    snprintf(with_ttl, sizeof with_ttl, "%s?prefix=%s&ttl=600", base_url, prefix);
    convo_store *t = open_url(with_ttl);
    append_ok(t, "t", NULL); /* every key of the thread gets a deadline */
    convo_close(t);
    redisContext *c = plain_connect(base_url);
    ck_assert_int_gt(cmd_int(c, "PTTL %s:{t}:msgs", prefix), 0);
    append_ok(s, "t", NULL);
    ck_assert_int_eq(length_of(s, "t"), 6);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:msgs", prefix), -1);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:meta", prefix), -1);
    convo_error err;
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    convo_close(s);
    redisFree(c);
}
END_TEST

/* The same for a tail rewrite: the common one (rewrite_quick.lua) sees the
 * deadline and leaves the call to the full script, which persists every key;
 * a pop on a thread without a deadline stays permanent and moves nothing else. */
START_TEST(test_rewrite_removes_deadline)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-persist-rw", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    append_ok(s, "t", NULL);
    char with_ttl[300];
    snprintf(with_ttl, sizeof with_ttl, "%s?prefix=%s&ttl=600", base_url, prefix);
    convo_store *t = open_url(with_ttl);
    append_ok(t, "t", NULL);
    convo_close(t);
    redisContext *c = plain_connect(base_url);
    ck_assert_int_gt(cmd_int(c, "PTTL %s:{t}:meta", prefix), 0);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.expected_length = 4;
    convo_rewrite_result res;
    convo_error err;
    ck_assert_int_eq(convo_replace_tail(s, "t", 3, NULL, NULL, 0, &o, &res, &err), 0);
    ck_assert_int_eq(res.removed, 1);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:msgs", prefix), -1);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:meta", prefix), -1);
    o.expected_length = 3;
    ck_assert_int_eq(convo_replace_tail(s, "t", 2, NULL, NULL, 0, &o, &res, &err), 0);
    ck_assert_int_eq(res.generation, 2);
    ck_assert_int_eq(length_of(s, "t"), 2);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:meta", prefix), -1);
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    convo_close(s);
    redisFree(c);
}
END_TEST

START_TEST(test_corrupt)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-corrupt", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    redisContext *c = plain_connect(base_url);
    append_ok(s, "m", NULL);
    extra_ok(s, "m", "{\"a\":1}");
    convo_history *h;
    convo_error err;
    freeReplyObject(cmd(c, "LSET %s:{m}:msgs 1 %s", prefix, "not msgpack"));
    ck_assert_int_eq(convo_load(s, "m", NULL, &h, &err), CONVO_ECORRUPT);
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.limit = 1; /* the good record alone still loads */
    ck_assert_int_eq(convo_load(s, "m", &o, &h, &err), 0);
    convo_history_free(h);
    freeReplyObject(cmd(c, "HSET %s:{m}:extra \"b\" %s", prefix, "no-ordinal"));
    ck_assert_int_eq(convo_load(s, "m", &o, &h, &err), CONVO_ECORRUPT);
    /* a checkpoint record, a stored value and a pending write that do not decode */
    checkpoint_ok(s, "m", "");
    convo_checkpoint *cp;
    redisReply *rec = cmd(c, "HGET %s:{m}:cp %b", prefix, "\0c1", (size_t)3);
    ck_assert_int_eq(rec->type, REDIS_REPLY_STRING);
    freeReplyObject(cmd(c, "HSET %s:{m}:cp %b %b", prefix, "\0c1", (size_t)3, rec->str,
                        rec->len - 1));
    ck_assert_int_eq(convo_checkpoint_get(s, "m", "", "c1", &cp, &err), CONVO_ECORRUPT);
    freeReplyObject(cmd(c, "HSET %s:{m}:cp %b %b", prefix, "\0c1", (size_t)3, rec->str, rec->len));
    freeReplyObject(rec);
    ck_assert_int_eq(convo_checkpoint_get(s, "m", "", "c1", &cp, &err), 0);
    convo_checkpoint_free(cp);
    freeReplyObject(cmd(c, "HSET %s:{m}:blobs %b junk", prefix, "\0n\0" "1", (size_t)4));
    ck_assert_int_eq(convo_checkpoint_get(s, "m", "", "c1", &cp, &err), CONVO_ECORRUPT);
    ck_assert_int_eq(convo_thread_delete(s, "m", &err), 0);
    redisFree(c);
    convo_close(s);
}
END_TEST

/* A put with messages replacing a checkpoint whose stored record does not
 * decode fails, and stores none of its messages: the script decodes the record
 * before its first write (Redis does not undo a script's writes on an error). */
START_TEST(test_put_log_corrupt_record_writes_nothing)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-putlog-corrupt", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    redisContext *c = plain_connect(base_url);
    const char *msg = two[0];
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "m";
    cp.checkpoint_id = "c1";
    cp.messages = &msg;
    cp.nmessages = 1;
    cp.expected_length = 0;
    cp.log_length = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "%s", err.message);
    /* 0xc1 is no msgpack type: the record's first object does not decode */
    freeReplyObject(cmd(c, "HSET %s:{m}:cp %b %b", prefix, "\0c1", (size_t)3, "\xc1", (size_t)1));
    cp.expected_length = 1;
    cp.log_length = 2;
    ck_assert_int_ne(convo_checkpoint_put(s, &cp, &err), 0);
    ck_assert_int_eq(length_of(s, "m"), 1);
    ck_assert_int_eq(convo_thread_delete(s, "m", &err), 0);
    redisFree(c);
    convo_close(s);
}
END_TEST

START_TEST(test_index_repair)
{
    char prefix[80], index_key[120];
    snprintf(prefix, sizeof prefix, "%s-index", run_id);
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    redisContext *c = plain_connect(base_url);
    append_ok(s, "b", NULL);
    /* a crash between the index update and the thread script leaves a ghost */
    freeReplyObject(cmd(c, "ZADD %s 0 a 0 c 0 d", index_key));
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list(s, NULL, 1, &p, &err), 0);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    ck_assert_str_eq(convo_thread_page_id(p, 0), "b");
    ck_assert_ptr_null(convo_thread_page_next(p)); /* c and d are gone too */
    convo_thread_page_free(p);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 1);
    /* an entry lost on the way (a client died between a removal and its
     * re-add) comes back with the next write of a store that has not written
     * the thread lately; a store that has skips the index (docs/redis.md) */
    freeReplyObject(cmd(c, "ZREM %s b", index_key));
    extra_ok(s, "b", "{}");
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 0);
    convo_store *fresh = open_prefix(base_url, prefix, NULL);
    append_ok(fresh, "b", NULL);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 1);
    convo_close(fresh);
    /* and with convo_sweep, which also drops what is gone */
    freeReplyObject(cmd(c, "ZREM %s b", index_key));
    freeReplyObject(cmd(c, "ZADD %s 0 ghost", index_key));
    uint64_t removed = 0;
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0);
    ck_assert_int_eq(removed, 1);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 1);
    ck_assert_int_eq(cmd_int(c, "ZRANK %s b", index_key), 0);
    /* a thread made by a checkpoint is indexed like any other */
    checkpoint_ok(s, "e{x}", "");
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 2);
    freeReplyObject(cmd(c, "ZREM %s e{x}", index_key));
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 2);
    ck_assert_int_eq(length_of(s, "e{x}"), 0);
    ck_assert_int_eq(convo_thread_delete(s, "e{x}", &err), 0);
    ck_assert_int_eq(convo_thread_delete(s, "b", &err), 0);
    ck_assert_int_eq(cmd_int(c, "EXISTS %s", index_key), 0);
    redisFree(c);
    convo_close(s);
}
END_TEST

typedef struct racer {
    convo_store *s;
    int deleter;
    double until;
} racer;

static const char *const race_ids[] = {"r0", "r1", "r2"};

static void *race(void *arg)
{
    racer *r = arg;
    for (unsigned i = 0; now_s() < r->until; i++) {
        const char *id = race_ids[i % 3];
        if (r->deleter)
            convo_thread_delete(r->s, id, NULL);
        else if (i % 2)
            convo_append(r->s, id, two, NULL, 1, NULL, NULL, NULL);
        else
            convo_save_extra(r->s, id, "{\"k\":1}", NULL);
    }
    return NULL;
}

/* Appends, saves and deletes racing on the same ids: afterwards every thread
 * that exists is in the index (and listed). A stress check only: one server
 * runs a client's pipelined commands back to back, so the interleavings the
 * index protocol guards against (docs/redis.md) are rare here. */
START_TEST(test_index_race)
{
    char prefix[80], index_key[120];
    snprintf(prefix, sizeof prefix, "%s-race", run_id);
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    convo_store *s = open_prefix(base_url, prefix, "pool=6");
    racer r[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        r[i] = (racer){s, i % 2, now_s() + 1.5};
        pthread_create(&t[i], NULL, race, &r[i]);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    redisContext *c = plain_connect(base_url);
    size_t live = 0;
    for (int i = 0; i < 3; i++) {
        if (length_of(s, race_ids[i]) < 0)
            continue;
        live++;
        redisReply *z = cmd(c, "ZSCORE %s %s", index_key, race_ids[i]);
        ck_assert_msg(z->type == REDIS_REPLY_STRING, "%s exists but is not indexed", race_ids[i]);
        freeReplyObject(z);
    }
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list(s, NULL, 10, &p, &err), 0);
    ck_assert_int_eq(convo_thread_page_count(p), live);
    convo_thread_page_free(p);
    for (int i = 0; i < 3; i++)
        convo_thread_delete(s, race_ids[i], NULL);
    redisFree(c);
    convo_close(s);
}
END_TEST

START_TEST(test_extra_size_exact)
{
    char prefix[80], url[512];
    snprintf(prefix, sizeof prefix, "prefix=%s-extra", run_id);
    url_with(url, sizeof url, base_url, prefix);
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.max_extra_bytes = 30;
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open_ex(&s, url, &so, &err), 0);
    extra_ok(s, "e", "{\"a\":\"0123456789\"}");
    extra_ok(s, "e", "{\"bb\":\"xy\\\"\"}"); /* {"a":"0123456789","bb":"xy\""}: 30 bytes */
    ck_assert_int_eq(convo_save_extra(s, "e", "{\"c\":0}", &err), CONVO_ETOOLARGE);
    extra_ok(s, "e", "{\"a\":\"\"}"); /* 20 */
    ck_assert_int_eq(convo_save_extra(s, "e", "{\"c\":[1,23]}", &err), CONVO_ETOOLARGE); /* 31 */
    extra_ok(s, "e", "{\"c\":[1,2]}"); /* 30 */
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "e", NULL, &h, &err), 0);
    ck_assert_str_eq(convo_history_extra(h), "{\"a\":\"\",\"bb\":\"xy\\\"\",\"c\":[1,2]}");
    convo_history_free(h);
    ck_assert_int_eq(convo_thread_delete(s, "e", &err), 0);
    convo_close(s);
}
END_TEST

START_TEST(test_urls)
{
    static const struct {
        const char *params;
        int code;
    } bad[] = {{"prefix=a%7Bb", CONVO_EINVAL}, {"prefix=a}", CONVO_EINVAL},
               {"prefix=a%01", CONVO_EINVAL},  {"prefix=", CONVO_EINVAL},
               {"bogus=1", CONVO_EINVAL},       {"ttl=-1", CONVO_EINVAL},
               {"pool=0", CONVO_EINVAL},        {"timeout=abc", CONVO_EINVAL},
               {"wait=-1", CONVO_EINVAL},       {"wait=65", CONVO_EINVAL},
               {"wait=1&wait_timeout=0", CONVO_EINVAL},
               {"wait=1&wait_timeout=5000&timeout=5000", CONVO_EINVAL}};
    convo_store *s = NULL;
    convo_error err;
    char url[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        url_with(url, sizeof url, base_url, bad[i].params);
        int rc = convo_open(&s, url, &err);
        ck_assert_msg(rc == bad[i].code, "%s: %d %s", url, rc, err.message);
    }
    ck_assert_int_eq(convo_open(&s, "rediss://127.0.0.1:1", &err), CONVO_ENOTSUP);
    ck_assert_int_eq(convo_open(&s, "redis://127.0.0.1:1/2?db=2", &err), CONVO_EINVAL);
    ck_assert_int_eq(convo_open(&s, "redis+unix://host/x", &err), CONVO_EINVAL);
    ck_assert_int_eq(convo_open(&s, "redis://127.0.0.1:1?connect_timeout=500", &err), CONVO_EIO);
    /* cluster URLs: seeds, database 0 only */
    static const char *const bad_cluster[] = {
        "redis+cluster://127.0.0.1:1/3", "redis+cluster://127.0.0.1:1/?db=2",
        "redis+cluster://127.0.0.1:1,/", "redis+cluster://127.0.0.1:1,127.0.0.1:x/",
        "redis+cluster://127.0.0.1:1,127.0.0.1:70000/", "redis+cluster://,127.0.0.1:1/"};
    for (size_t i = 0; i < sizeof bad_cluster / sizeof bad_cluster[0]; i++) {
        int rc = convo_open(&s, bad_cluster[i], &err);
        ck_assert_msg(rc == CONVO_EINVAL, "%s: %d %s", bad_cluster[i], rc, err.message);
    }
    /* no node answers: open fails within the timeout instead of hanging */
    int rc = convo_open(&s, "redis+cluster://127.0.0.1:1,127.0.0.1:2/?timeout=300", &err);
    ck_assert_msg(rc == CONVO_EIO || rc == CONVO_ETIMEOUT, "%d %s", rc, err.message);
    /* a single server is no cluster: CLUSTER SLOTS is refused */
    const char *hp = strstr(base_url, "://");
    if (hp && strncmp(base_url, "redis://", 8) == 0) {
        snprintf(url, sizeof url, "redis+cluster://%.*s/?timeout=300", (int)strcspn(hp + 3, "/?"),
                 hp + 3);
        rc = convo_open(&s, url, &err);
        ck_assert_msg(rc == CONVO_EIO || rc == CONVO_ETIMEOUT, "%s: %d %s", url, rc, err.message);
    }
}
END_TEST

/* ?wait=1 on a server without replicas: the write is done, WAIT says 0 of 1. */
START_TEST(test_wait_no_replica)
{
    char prefix[80], more[] = "wait=1&wait_timeout=50";
    snprintf(prefix, sizeof prefix, "%s-wait", run_id);
    convo_store *s = open_prefix(base_url, prefix, more);
    convo_error err;
    const char *m[] = {"{\"role\":\"user\"}"};
    size_t len[] = {strlen(m[0])};
    ck_assert_int_eq(convo_append(s, "w", m, len, 1, NULL, NULL, &err), CONVO_ETIMEOUT);
    ck_assert_str_eq(err.backend_code, "WAIT");
    ck_assert_ptr_nonnull(strstr(err.message, "0 of 1"));
    convo_history *h; /* reads do not wait, and the write stayed on the master */
    ck_assert_int_eq(convo_load(s, "w", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 1);
    convo_history_free(h);
    convo_close(s);
    s = open_prefix(base_url, prefix, NULL);
    ck_assert_int_eq(convo_thread_delete(s, "w", &err), 0);
    convo_close(s);
}
END_TEST

START_TEST(test_created_at_server_clock)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-time", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    double before = now_s();
    append_ok(s, "t", NULL);
    convo_history *h;
    convo_error err;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    double at = (double)convo_history_created_at(h, 0) / 1e6;
    ck_assert_msg(at > before - 10 && at < now_s() + 10, "created_at %.6f vs %.6f", at, before);
    ck_assert_int_eq(convo_history_created_at(h, 0), convo_history_created_at(h, 1));
    ck_assert_str_eq(convo_history_message(h, 1, NULL), two[1]);
    convo_history_free(h);
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    convo_close(s);
}
END_TEST

/* Every .lua file of drivers/redis (read from REDIS_LUA_DIR, the source folder)
 * compiles on its own: SCRIPT LOAD of the file alone, as a server compiles a
 * script, answers its SHA1. A file is a script or a part the driver joins
 * with others (scripts.c), so names from another part are globals here, which
 * Lua accepts until the code runs. */
START_TEST(test_lua_files_load_on_their_own)
{
    static const char *const must[] = {"prelude.lua", "cp_prelude.lua", "checkpoint.lua",
                                       "append.lua", "index.lua", "put_log.lua"};
    redisContext *c = plain_connect(base_url);
    /* the check can fail: a file that does not compile is refused */
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", "local = 1");
    ck_assert_msg(r && r->type == REDIS_REPLY_ERROR, "SCRIPT LOAD of bad Lua not refused");
    freeReplyObject(r);
    DIR *d = opendir(REDIS_LUA_DIR);
    ck_assert_msg(d != NULL, "opendir %s: %s", REDIS_LUA_DIR, strerror(errno));
    size_t n = 0, seen = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".lua") != 0)
            continue;
        char path[512], text[16384];
        snprintf(path, sizeof path, "%s/%s", REDIS_LUA_DIR, e->d_name);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "open %s", path);
        size_t got = fread(text, 1, sizeof text, f);
        fclose(f);
        ck_assert_msg(got > 0 && got < sizeof text, "%s: %zu bytes", path, got);
        for (size_t i = 0; i < got; i++) /* lua.h keeps each line a C string literal */
            ck_assert_msg((unsigned char)text[i] >= 0x20 || text[i] == '\n',
                          "%s: control character at byte %zu", e->d_name, i);
        r = redisCommand(c, "SCRIPT LOAD %b", text, got);
        ck_assert_msg(r && r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD %s: %s",
                      e->d_name, r && r->type == REDIS_REPLY_ERROR ? r->str : "no SHA1");
        freeReplyObject(r);
        for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
            seen += strcmp(e->d_name, must[i]) == 0;
        n++;
    }
    closedir(d);
    redisFree(c);
    ck_assert_msg(n >= 16, "only %zu .lua files in %s", n, REDIS_LUA_DIR);
    ck_assert_uint_eq(seen, sizeof must / sizeof must[0]);
}
END_TEST

/* Reading a new prefix writes nothing (issue 23: `convo threads` created P:store);
 * once it has a thread, the next open records the layout in P:store. */
START_TEST(test_read_only_open_writes_nothing)
{
    char prefix[80], pat[200], store_key[120];
    snprintf(prefix, sizeof prefix, "%s-readonly", run_id);
    snprintf(pat, sizeof pat, "%s:*", prefix);
    snprintf(store_key, sizeof store_key, "%s:store", prefix);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    convo_thread_page *page;
    convo_history *h;
    convo_error err;
    ck_assert_int_eq(convo_thread_list(s, NULL, 10, &page, &err), 0);
    convo_thread_page_free(page);
    ck_assert_int_eq(convo_load(s, "nosuch", NULL, &h, &err), CONVO_ENOTFOUND);
    convo_close(s);
    convo_close(open_prefix(base_url, prefix, NULL));
    redisContext *c = plain_connect(base_url);
    keyset ks = scan_keys(c, pat);
    ck_assert_msg(ks.n == 0, "%zu keys after reading a new prefix, e.g. %s", ks.n,
                  ks.n ? ks.k[0] : "");
    keys_free(&ks);
    s = open_prefix(base_url, prefix, NULL);
    append_ok(s, "t", NULL);
    convo_close(s);
    convo_close(open_prefix(base_url, prefix, NULL));
    redisReply *r = cmd(c, "HGET %s v", store_key);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "7") == 0,
                  "%s v is not 7 after an open of a store with threads", store_key);
    freeReplyObject(r);
    redisFree(c);
}
END_TEST

static Suite *redis_suite(void)
{
    Suite *s = suite_create("redis");
    TCase *tc = tcase_create("driver");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_urls);
    tcase_add_test(tc, test_lua_files_load_on_their_own);
    tcase_add_test(tc, test_wait_no_replica);
    tcase_add_test(tc, test_key_scheme);
    tcase_add_test(tc, test_ttl_expiry);
    tcase_add_test(tc, test_corrupt);
    tcase_add_test(tc, test_index_repair);
    tcase_add_test(tc, test_index_race);
    tcase_add_test(tc, test_extra_size_exact);
    tcase_add_test(tc, test_read_only_open_writes_nothing);
    tcase_add_test(tc, test_created_at_server_clock);
    tcase_add_test(tc, test_noscript);
    tcase_add_test(tc, test_unix_socket_db);
    tcase_add_test(tc, test_auth);
    tcase_add_test(tc, test_append_removes_deadline);
    tcase_add_test(tc, test_rewrite_removes_deadline);
    tcase_add_test(tc, test_put_log_corrupt_record_writes_nothing);
    tcase_add_test(tc, test_timeout);
    tcase_add_test(tc, test_restart);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    base_url = getenv("CONVO_TEST_REDIS_URL");
    const char *req = getenv("CONVO_REQUIRE_ALL");
    if (!base_url || !*base_url) {
        if (req && strcmp(req, "1") == 0) {
            fprintf(stderr, "redis: CONVO_TEST_REDIS_URL is not set and CONVO_REQUIRE_ALL=1\n");
            return 1;
        }
        fprintf(stderr, "redis: CONVO_TEST_REDIS_URL is not set; skipped\n");
        return 77;
    }
    signal(SIGPIPE, SIG_IGN); /* writes to a server that went away */
    snprintf(run_id, sizeof run_id, "convo-test-%ld-%ld", (long)getpid(), (long)time(NULL));
    priv_setup();
    SRunner *sr = srunner_create(redis_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    priv_teardown();
    return failed ? 1 : 0;
}
