/* redis_private.c — a private redis-server this program starts, so suites
 * sharing the test server are never disturbed: restarts, a paused server
 * (timeouts), scripts flushed (NOSCRIPT), a Unix socket with a database
 * number, passwords and ACL users. Part of tests/redis_extra (redis_extra.h). */
#include "redis_extra.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char priv_dir[64]; /* the private server's folder, "" when none */
static int priv_port;
static char priv_url[128], priv_sock[128];

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

void priv_setup(void)
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

void priv_teardown(void)
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

void redis_add_private_tests(TCase *tc)
{
    tcase_add_test(tc, test_noscript);
    tcase_add_test(tc, test_unix_socket_db);
    tcase_add_test(tc, test_auth);
    tcase_add_test(tc, test_timeout);
    tcase_add_test(tc, test_restart);
}
