/* redis-arena.c — the Redis driver's own reader of a pipeline's replies
 * (drivers/redis/arena.c: read off the socket into one block, checked whole,
 * made in place) fed bytes of its own through a socket pair, no server: the
 * replies as hiredis would make them (nested, nil, empty, a bulk string over
 * several reads); what is not RESP — a number of 19 digits or more (read into
 * a long long: it would overflow), a negative length, a wrong terminator, too
 * deep a nesting, an unknown type — is CONVO_EIO with the connection broken;
 * a reply cut short by a closed connection is CONVO_EIO; a count far past the
 * bytes that came allocates nothing for it. Under UBSan an overflow fails it.
 * `tests/redis_arena`. */
#include <check.h>
#include "redis_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fixture {
    convo_backend b;
    redisContext ctx;
    rconn rc;
    rd_arena *arena;
    redisReply *replies[8];
} fixture;

/* The replies of n commands read from bytes[0..len) (then the peer closes). */
static int read_bytes(fixture *f, const char *bytes, size_t len, size_t n, convo_error *err)
{
    int fds[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    memset(f, 0, sizeof *f);
    f->b.redacted = "redis://test";
    f->ctx.fd = fds[0];
    f->ctx.reader = redisReaderCreate();
    ck_assert_ptr_nonnull(f->ctx.reader);
    f->rc.c = &f->ctx;
    f->arena = convo__rd_arena_new();
    ck_assert_ptr_nonnull(f->arena);
    /* the peer writes from a child: more than a socket buffer may not fit */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        for (size_t at = 0; at < len;) {
            ssize_t k = write(fds[1], bytes + at, len - at);
            if (k <= 0)
                _exit(1);
            at += (size_t)k;
        }
        _exit(0);
    }
    close(fds[1]);
    memset(err, 0, sizeof *err);
    int rc = convo__rd_replies_arena(&f->b, &f->rc, n, f->replies, f->arena, err);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return rc;
}

static void fixture_free(fixture *f)
{
    convo__rd_arena_free(f->arena);
    redisReaderFree(f->ctx.reader);
}

START_TEST(test_replies_made_in_place)
{
    size_t big = 100000;
    char *bytes = malloc(big + 256);
    ck_assert_ptr_nonnull(bytes);
    int k = snprintf(bytes, 256, "*3\r\n$3\r\nabc\r\n:-42\r\n*-1\r\n+OK\r\n$-1\r\n$0\r\n\r\n$%zu\r\n",
                     big);
    memset(bytes + k, 'x', big);
    memcpy(bytes + k + big, "\r\n-ERR no\r\n", 11);
    fixture f;
    convo_error err;
    ck_assert_int_eq(read_bytes(&f, bytes, (size_t)k + big + 11, 6, &err), 0);
    redisReply **r = f.replies;
    ck_assert_int_eq(r[0]->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r[0]->elements, 3);
    ck_assert(r[0]->element[0]->type == REDIS_REPLY_STRING && r[0]->element[0]->len == 3);
    ck_assert_str_eq(r[0]->element[0]->str, "abc");
    ck_assert(r[0]->element[1]->type == REDIS_REPLY_INTEGER && r[0]->element[1]->integer == -42);
    ck_assert_int_eq(r[0]->element[2]->type, REDIS_REPLY_NIL);
    ck_assert(r[1]->type == REDIS_REPLY_STATUS && strcmp(r[1]->str, "OK") == 0);
    ck_assert_int_eq(r[2]->type, REDIS_REPLY_NIL);
    ck_assert(r[3]->type == REDIS_REPLY_STRING && r[3]->len == 0 && r[3]->str[0] == '\0');
    ck_assert(r[4]->type == REDIS_REPLY_STRING && r[4]->len == big && r[4]->str[big] == '\0');
    ck_assert(r[4]->str[0] == 'x' && r[4]->str[big - 1] == 'x');
    ck_assert(r[5]->type == REDIS_REPLY_ERROR && strcmp(r[5]->str, "ERR no") == 0);
    ck_assert_int_eq(f.rc.broken, 0);
    fixture_free(&f);
    free(bytes);
}
END_TEST

START_TEST(test_not_resp_is_eio)
{
    static const char *const bad[] = {
        ":9999999999999999999\r\n",                      /* 19 digits: past a long long */
        "$99999999999999999999999999999999999999\r\nab\r\n", /* 38 */
        "*-99999999999999999999\r\n",
        ":1234567890123456789\r\n", /* 19 digits that fit: refused all the same */
        "$-2\r\n",
        "$3\r\nabcXY",
        ":12x\r\n",
        ":\r\n",
        "+OK\rX",
        "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", /* 9 deep */
        "?\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fixture f;
        convo_error err;
        int rc = read_bytes(&f, bad[i], strlen(bad[i]), 1, &err);
        ck_assert_msg(rc == CONVO_EIO && strstr(err.message, "not RESP") != NULL,
                      "%zu: %d %s", i, rc, err.message);
        ck_assert_int_eq(f.rc.broken, 1);
        fixture_free(&f);
    }
}
END_TEST

START_TEST(test_cut_short_is_eio)
{
    static const char *const cut[] = {
        "$10\r\nabc",
        ":123",
        "*2\r\n:1\r\n",
        "*1000000000000\r\n:1\r\n", /* a count far past what came: nothing made for it */
        "+OK\r",
        "",
    };
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
        fixture f;
        convo_error err;
        int rc = read_bytes(&f, cut[i], strlen(cut[i]), 1, &err);
        ck_assert_msg(rc == CONVO_EIO && strstr(err.message, "closed") != NULL, "%zu: %d %s", i,
                      rc, err.message);
        ck_assert_int_eq(f.rc.broken, 1);
        fixture_free(&f);
    }
    /* two replies asked, one given */
    fixture f;
    convo_error err;
    ck_assert_int_eq(read_bytes(&f, "+OK\r\n", 5, 2, &err), CONVO_EIO);
    fixture_free(&f);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("redis-arena");
    TCase *tc = tcase_create("redis-arena");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_replies_made_in_place);
    tcase_add_test(tc, test_not_resp_is_eio);
    tcase_add_test(tc, test_cut_short_is_eio);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
