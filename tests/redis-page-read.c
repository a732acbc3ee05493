/* redis-page-read.c — how a page of the Redis driver reads its replies on one
 * server (drivers/redis/arena.c: off the socket into one buffer, made in
 * place; docs/redis.md, "The page's client work"): rows far larger than one
 * read, an error reply among the rows, a server that stops answering and a
 * connection the server closed. Runs against a private redis-server it starts
 * on a free port (it pauses and kills clients: no shared server is disturbed).
 * Usage: tests/redis_page_read (skips, 77, without redis-server). */
#include <arpa/inet.h>
#include "redis_test.h"
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char dir[256], url[128];
static int port;

/* ------------------------------------------------------------ the server */

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    socklen_t len = sizeof a;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int p = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                    getsockname(fd, (struct sockaddr *)&a, &len) == 0
                ? ntohs(a.sin_port)
                : -1;
    if (fd >= 0)
        close(fd);
    return p;
}

static int server_start(void)
{
    char line[1024];
    snprintf(dir, sizeof dir, "/tmp/convo-page-read.XXXXXX");
    if (!mkdtemp(dir) || (port = free_port()) < 0)
        return -1;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    snprintf(line, sizeof line,
             "redis-server --port %d --bind 127.0.0.1 --save '' --appendonly no --dir %s "
             "--daemonize yes --pidfile %s/redis.pid --logfile %s/redis.log >/dev/null 2>&1",
             port, dir, dir, dir);
    if (system(line) != 0)
        return -1;
    for (int i = 0; i < 100; i++, sleep_ms(50)) {
        redisContext *c = redisConnect("127.0.0.1", port);
        int up = c && !c->err;
        redisFree(c);
        if (up)
            return 0;
    }
    return -1;
}

static void server_stop(void)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (c && !c->err)
        freeReplyObject(redisCommand(c, "SHUTDOWN NOSAVE"));
    redisFree(c);
    char line[600];
    snprintf(line, sizeof line, "rm -rf '%s'", dir);
    if (system(line) != 0)
        fprintf(stderr, "redis-page-read: could not remove %s\n", dir);
}

/* ------------------------------------------------------------ helpers */

static int page_of(convo_store *s, const char *user, convo_thread_page **p, convo_error *err)
{
    char where[64];
    snprintf(where, sizeof where, "{\"user_id\":\"%s\"}", user);
    convo_thread_list_opts lo = CONVO_THREAD_LIST_OPTS_INIT;
    lo.where_json = where;
    lo.limit = 20;
    lo.with_extra = 1;
    lo.with_last_message = 1;
    return convo_thread_list_ex(s, &lo, p, err);
}

/* A thread of user with n messages, the last one of about last_bytes. */
static void thread_of(convo_store *s, const char *id, const char *user, int n,
                      size_t last_bytes)
{
    char patch[64];
    convo_error err;
    snprintf(patch, sizeof patch, "{\"user_id\":\"%s\"}", user);
    ck_assert_int_eq(convo_save_extra(s, id, patch, &err), 0);
    static const char *const small = "{\"role\":\"user\",\"content\":\"hi\"}";
    for (int i = 0; i + 1 < n; i++)
        ck_assert_int_eq(convo_append(s, id, &small, NULL, 1, NULL, NULL, &err), 0);
    char *big = malloc(last_bytes + 64);
    ck_assert_ptr_nonnull(big);
    int h = sprintf(big, "{\"role\":\"assistant\",\"content\":\"%s:", id);
    memset(big + h, 'a' + (int)(strlen(id) % 26), last_bytes);
    strcpy(big + h + last_bytes, "\"}");
    const char *m = big;
    ck_assert_int_eq(convo_append(s, id, &m, NULL, 1, NULL, NULL, &err), 0);
    free(big);
}

/* Each row of the page is what a load of its thread gives. */
static void rows_match_loads(convo_store *s, const convo_thread_page *p)
{
    for (size_t i = 0; i < convo_thread_page_count(p); i++) {
        const char *id = convo_thread_page_id(p, i);
        convo_history *h;
        convo_error err;
        ck_assert_int_eq(convo_load(s, id, NULL, &h, &err), 0);
        size_t n = convo_history_count(h), len, want_len;
        ck_assert_int_eq(convo_thread_page_length(p, i), (int64_t)n);
        const char *last = convo_thread_page_last_message(p, i, &len);
        const char *want = convo_history_message(h, n - 1, &want_len);
        ck_assert_msg(len == want_len && memcmp(last, want, len) == 0, "%s: last message", id);
        const char *extra = convo_thread_page_extra(p, i), *want_extra = convo_history_extra(h);
        ck_assert_msg(extra && want_extra && strcmp(extra, want_extra) == 0, "%s: extra", id);
        convo_history_free(h);
    }
}

/* ------------------------------------------------------------ tests */

/* Rows of some 4 MB (last messages of 200 kB, an extra of 3,000 keys): the
 * replies come in many reads, an incomplete one is scanned again from its
 * start, the buffer grows; every row must still be its thread's. */
START_TEST(test_rows_larger_than_a_read)
{
    convo_store *s = open_at("big", NULL, user_keys);
    convo_error err;
    char id[32];
    for (int t = 0; t < 20; t++) {
        snprintf(id, sizeof id, "big%02d", t);
        thread_of(s, id, "u1", 2 + t % 3, 200000 + (size_t)t * 977);
    }
    /* one extra of 3,000 keys: an HGETALL reply of 6,000 elements */
    char patch[64];
    for (int k = 0; k < 3000; k++) {
        snprintf(patch, sizeof patch, "{\"k%04d\":[%d,\"v\"]}", k, k);
        ck_assert_int_eq(convo_save_extra(s, "big07", patch, &err), 0);
    }
    convo_thread_page *p = NULL;
    int rc = page_of(s, "u1", &p, &err);
    ck_assert_msg(rc == 0, "page: %d %s", rc, err.message);
    ck_assert_int_eq(convo_thread_page_count(p), 20);
    rows_match_loads(s, p);
    convo_thread_page_free(p);
    /* and small pages on the same connection afterwards */
    thread_of(s, "small", "u2", 1, 10);
    ck_assert_int_eq(page_of(s, "u2", &p, &err), 0);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    rows_match_loads(s, p);
    convo_thread_page_free(p);
    convo_close(s);
}
END_TEST

/* A row whose LLEN and LINDEX answer an error (its list replaced by a
 * string): the page is CONVO_ECORRUPT, and the connection, whose replies were
 * all read, serves the next page. */
START_TEST(test_error_reply_among_rows)
{
    convo_store *s = open_at("err", NULL, user_keys);
    convo_error err;
    thread_of(s, "e1", "u1", 2, 10);
    thread_of(s, "e2", "u1", 2, 10);
    thread_of(s, "ok", "u2", 2, 10);
    cmd_ok("DEL err:{e1}:msgs");
    cmd_ok("SET err:{e1}:msgs not-a-list");
    convo_thread_page *p = NULL;
    int rc = page_of(s, "u1", &p, &err);
    ck_assert_msg(rc == CONVO_ECORRUPT, "page over a wrong type: %d %s", rc, err.message);
    ck_assert_msg(strstr(err.message, "thread e1") != NULL, "%s", err.message);
    rc = page_of(s, "u2", &p, &err);
    ck_assert_msg(rc == 0, "the next page: %d %s", rc, err.message);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    rows_match_loads(s, p);
    convo_thread_page_free(p);
    convo_close(s);
}
END_TEST

/* A server that stops answering: the page times out (timeout=300), its
 * connection is dropped, and a page after the pause is whole. */
START_TEST(test_paused_server_times_out)
{
    convo_store *s = open_at("pause", "timeout=300&pool=1", user_keys);
    convo_error err;
    thread_of(s, "p1", "u1", 2, 10);
    convo_thread_page *p = NULL;
    ck_assert_int_eq(page_of(s, "u1", &p, &err), 0);
    convo_thread_page_free(p);
    cmd_ok("CLIENT PAUSE 1200 ALL");
    int rc = page_of(s, "u1", &p, &err);
    ck_assert_msg(rc == CONVO_ETIMEOUT, "paused server: %d %s", rc, err.message);
    sleep_ms(1300);
    rc = page_of(s, "u1", &p, &err);
    ck_assert_msg(rc == 0, "after the pause: %d %s", rc, err.message);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    rows_match_loads(s, p);
    convo_thread_page_free(p);
    convo_close(s);
}
END_TEST

/* The server closes the store's connection: that page fails with CONVO_EIO
 * (not a hang, not a crash) and the next one reconnects. */
START_TEST(test_closed_connection)
{
    convo_store *s = open_at("kill", "pool=1", user_keys);
    convo_error err;
    thread_of(s, "k1", "u1", 2, 10);
    convo_thread_page *p = NULL;
    ck_assert_int_eq(page_of(s, "u1", &p, &err), 0);
    convo_thread_page_free(p);
    cmd_ok("CLIENT KILL TYPE normal SKIPME yes");
    int rc = page_of(s, "u1", &p, &err);
    ck_assert_msg(rc == CONVO_EIO, "closed connection: %d %s", rc, err.message);
    rc = page_of(s, "u1", &p, &err);
    ck_assert_msg(rc == 0, "the next page: %d %s", rc, err.message);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    convo_thread_page_free(p);
    convo_close(s);
}
END_TEST

int main(void)
{
    if (system("command -v redis-server >/dev/null 2>&1") != 0) {
        fprintf(stderr, "redis-page-read: skipped: no redis-server\n");
        return 77;
    }
    if (server_start() != 0) {
        fprintf(stderr, "redis-page-read: could not start a private redis-server\n");
        return 1;
    }
    base_url = url;
    Suite *su = suite_create("redis-page-read");
    TCase *tc = tcase_create("server");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, connect_nodes, disconnect_nodes);
    tcase_add_test(tc, test_rows_larger_than_a_read);
    tcase_add_test(tc, test_error_reply_among_rows);
    tcase_add_test(tc, test_paused_server_times_out);
    tcase_add_test(tc, test_closed_connection);
    suite_add_tcase(su, tc);
    int status = redis_test_run(su);
    server_stop();
    return status;
}
