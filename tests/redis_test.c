/* redis_test.c — the helpers of tests/redis_test.h: main's arguments, the
 * nodes of one server or a cluster, commands on them, stores on a prefix. */
#include "redis_test.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 16

const char *base_url, *base_prefix;
int cluster;
const char *const MSG = "{\"role\":\"user\",\"content\":\"hi\"}";
const char *const user_keys[] = {"user_id", NULL};
redisContext *nodes[MAX_NODES];
int nnodes;

int redis_test_args(int argc, char **argv, const char *name, const char *one_server_only)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s URL PREFIX\n", argv[0]);
        return 2;
    }
    base_url = argv[1];
    base_prefix = argv[2];
    cluster = strncmp(base_url, "redis+cluster://", 16) == 0;
    if (one_server_only && strncmp(base_url, "redis://", 8) != 0) {
        fprintf(stderr, "%s: one server only (%s)\n", name, one_server_only);
        return 77;
    }
    return -1;
}

int redis_test_run(Suite *su)
{
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

void connect_nodes(void)
{
    char hosts[512];
    if (cluster) {
        const char *ports = getenv("CONVO_TEST_REDIS_CLUSTER_PORTS");
        ck_assert_msg(ports && *ports, "CONVO_TEST_REDIS_CLUSTER_PORTS is not set");
        snprintf(hosts, sizeof hosts, "%s", ports);
    } else {
        /* redis://HOST:PORT[/...]: the test servers have no password */
        const char *hp = base_url + strlen("redis://");
        const char *colon = strchr(hp, ':');
        ck_assert_msg(colon && !strchr(hp, '@'), "unsupported URL %s", base_url);
        snprintf(hosts, sizeof hosts, "%d", atoi(colon + 1));
    }
    for (char *p = strtok(hosts, " "); p && nnodes < MAX_NODES; p = strtok(NULL, " ")) {
        redisContext *c = redisConnect("127.0.0.1", atoi(p));
        ck_assert_msg(c && !c->err, "connect to port %s: %s", p, c ? c->errstr : "oom");
        nodes[nnodes++] = c;
    }
}

void disconnect_nodes(void)
{
    while (nnodes > 0)
        redisFree(nodes[--nnodes]);
}

redisContext *node_for(const char *key)
{
    for (int i = 0; i < nnodes; i++) {
        redisReply *r = redisCommand(nodes[i], "EXISTS %s", key);
        ck_assert_msg(r != NULL, "EXISTS %s: %s", key, nodes[i]->errstr);
        int moved = r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED", 5) == 0;
        freeReplyObject(r);
        if (!moved)
            return nodes[i];
    }
    ck_abort_msg("no node serves %s", key);
    return NULL;
}

static redisReply *on_key_v(const char *key, const char *fmt, va_list ap)
{
    redisContext *c = node_for(key);
    redisReply *r = redisvCommand(c, fmt, ap);
    ck_assert_msg(r != NULL, "%s on %s: %s", fmt, key, c->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s on %s: %s", fmt, key, r->str);
    return r;
}

redisReply *on_key(const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = on_key_v(key, fmt, ap);
    va_end(ap);
    return r;
}

long long int_on(const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = on_key_v(key, fmt, ap);
    va_end(ap);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s on %s: not an integer", fmt, key);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

redisContext *server(void)
{
    ck_assert_msg(nnodes == 1 && !cluster, "a command for one server with %d nodes", nnodes);
    return nodes[0];
}

static redisReply *cmd_v(const char *fmt, va_list ap)
{
    redisReply *r = redisvCommand(server(), fmt, ap);
    ck_assert_msg(r != NULL, "%s: %s", fmt, server()->errstr);
    return r;
}

redisReply *cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = cmd_v(fmt, ap);
    va_end(ap);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r->str);
    return r;
}

void cmd_ok(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = cmd_v(fmt, ap);
    va_end(ap);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r->str);
    freeReplyObject(r);
}

long long num(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = cmd_v(fmt, ap);
    va_end(ap);
    long long v = r->type == REDIS_REPLY_STRING    ? atoll(r->str)
                  : r->type == REDIS_REPLY_INTEGER ? r->integer
                                                   : -1;
    freeReplyObject(r);
    return v;
}

unsigned crc16(const char *p, size_t n)
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

convo_store *open_at(const char *prefix, const char *more, const char *const *keys)
{
    char url[1024];
    snprintf(url, sizeof url, "%s%sprefix=%s%s%s", base_url, strchr(base_url, '?') ? "&" : "?",
             prefix, more ? "&" : "", more ? more : "");
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = keys;
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open_ex(&s, url, &so, &err);
    ck_assert_msg(rc == 0, "open %s: %d %s", url, rc, err.message);
    return s;
}

convo_store *open_store(const char *name, const char *more, const char *const *keys, char *prefix,
                        size_t size)
{
    snprintf(prefix, size, "%s-%s", base_prefix, name);
    return open_at(prefix, more, keys);
}

void user_thread(convo_store *s, const char *id, const char *user)
{
    char patch[256];
    snprintf(patch, sizeof patch, "{\"user_id\":\"%s\"}", user);
    convo_error err;
    ck_assert_int_eq(convo_save_extra(s, id, patch, &err), 0);
    ck_assert_int_eq(convo_append(s, id, &MSG, NULL, 1, NULL, NULL, &err), 0);
}
