/* redis-guess.c — the guess of a page's candidates on one Redis server
 * (docs/redis.md, "The thread index", *The guess*): a page read again sends
 * the rows of the candidates its batch found last time with the candidates'
 * read, in one round trip (counted by the server's total_reads_processed);
 * its pages are those of a store without the guess (?page_guess=0) whatever
 * changed in between (a thread moved in, deleted, given to another user, a
 * guessed thread's keys of the wrong type); a walk in pages repeated gives
 * the same rows. Usage: tests/redis_guess URL PREFIX; every key it writes
 * starts with PREFIX. A cluster has no guess: the suite is not run there. */
#include "redis_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define USER "{\"user_id\":\"u1\"}"

/* ------------------------------------------------------------ helpers */

/* The server's read events so far (INFO stats total_reads_processed). */
static long long reads(void)
{
    redisReply *r = redisCommand(server(), "INFO stats");
    ck_assert_msg(r && r->type == REDIS_REPLY_STRING, "INFO: %s", server()->errstr);
    const char *at = strstr(r->str, "total_reads_processed:");
    ck_assert_msg(at != NULL, "no total_reads_processed in INFO");
    long long v = atoll(at + strlen("total_reads_processed:"));
    freeReplyObject(r);
    return v;
}

/* The server's HGETALL calls so far (INFO commandstats). */
static long long hgetalls(void)
{
    redisReply *r = redisCommand(server(), "INFO commandstats");
    ck_assert_msg(r && r->type == REDIS_REPLY_STRING, "INFO: %s", server()->errstr);
    const char *at = strstr(r->str, "cmdstat_hgetall:calls=");
    long long v = at ? atoll(at + strlen("cmdstat_hgetall:calls=")) : 0;
    freeReplyObject(r);
    return v;
}

/* One page (after cursor, when given) as text: each row's id, times, length,
 * extra and last message; *next gets the last row's cursor. */
static void page(convo_store *s, const char *where, size_t limit, const char *after, char *out,
                 size_t size, char *next, size_t nsize)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.limit = limit;
    o.after = after;
    o.with_extra = 1;
    o.with_last_message = 1;
    convo_thread_page *p;
    convo_error err;
    int rc = convo_thread_list_ex(s, &o, &p, &err);
    ck_assert_msg(rc == 0, "list: %d %s", rc, err.message);
    size_t n = convo_thread_page_count(p);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *last = convo_thread_page_last_message(p, i, &len);
        snprintf(out + strlen(out), size - strlen(out), "%s=%lld,%lld,%lld,%s,%.*s;",
                 convo_thread_page_id(p, i), (long long)convo_thread_page_created_at(p, i),
                 (long long)convo_thread_page_updated_at(p, i),
                 (long long)convo_thread_page_length(p, i), convo_thread_page_extra(p, i),
                 (int)len, last ? last : "");
    }
    if (next)
        snprintf(next, nsize, "%s", n ? convo_thread_page_cursor(p, n - 1) : "");
    convo_thread_page_free(p);
}

/* The first page's return code (its rows freed). */
static int page_rc(convo_store *s, const char *where, size_t limit, convo_error *err)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.limit = limit;
    o.with_extra = 1;
    o.with_last_message = 1;
    convo_thread_page *p = NULL;
    int rc = convo_thread_list_ex(s, &o, &p, err);
    if (rc == 0)
        convo_thread_page_free(p);
    return rc;
}

/* The same first page from a store with the guess (read twice: the second
 * read takes the guess the first one left) and one without. */
static void same_page(convo_store *guess, convo_store *plain, const char *where, size_t limit)
{
    char a[8192], b[8192], c[8192];
    page(guess, where, limit, NULL, a, sizeof a, NULL, 0);
    page(guess, where, limit, NULL, b, sizeof b, NULL, 0);
    page(plain, where, limit, NULL, c, sizeof c, NULL, 0);
    ck_assert_str_eq(a, c);
    ck_assert_str_eq(b, c);
}

/* The fewest read events a page took over 5 tries of 10 pages (other
 * clients of the server only add reads). */
static double reads_per_page(convo_store *s, const char *where, size_t limit)
{
    double best = 1e9;
    char out[8192];
    for (int t = 0; t < 5; t++) {
        long long r0 = reads();
        for (int i = 0; i < 10; i++)
            page(s, where, limit, NULL, out, sizeof out, NULL, 0);
        double per = (double)(reads() - r0 - 1) / 10; /* the second INFO is a read */
        best = per < best ? per : best;
    }
    return best;
}

/* n threads of user, 3 ms apart: more than a window's threads within one
 * window of a batch's last candidate make list.lua read it (a third round
 * trip, docs/redis.md "The candidates without a script"), which the guess
 * does not serve. */
static void threads_of(convo_store *s, const char *prefix, int n, const char *user)
{
    char id[64];
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%s-t%02d", prefix, i);
        user_thread(s, id, user);
        usleep(3000);
    }
}

/* ------------------------------------------------------------ tests */

/* A page read again takes one round trip; without the guess, two. */
START_TEST(test_page_read_again_one_round_trip)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s-trip", base_prefix);
    convo_store *s = open_at(prefix, NULL, user_keys);
    convo_store *plain = open_at(prefix, "page_guess=0", user_keys);
    threads_of(s, "g", 12, "u1");
    threads_of(s, "h", 5, "u2");
    same_page(s, plain, USER, 5);
    double with = reads_per_page(s, USER, 5), without = reads_per_page(plain, USER, 5);
    ck_assert_msg(with < 1.5, "a page read again took %.1f round trips", with);
    ck_assert_msg(without >= 2, "a page without the guess took %.1f round trips", without);
    /* unfiltered, and a page of all 17 (more candidates than the guess of 5) */
    same_page(s, plain, NULL, 5);
    same_page(s, plain, NULL, 20);
    with = reads_per_page(s, NULL, 20);
    ck_assert_msg(with < 1.5, "an unfiltered page read again took %.1f round trips", with);
    convo_close(plain);
    convo_close(s);
}
END_TEST

/* Whatever changed since the guess, a page is the one read without it. */
START_TEST(test_guess_follows_changes)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s-changes", base_prefix);
    convo_store *s = open_at(prefix, NULL, user_keys);
    convo_store *plain = open_at(prefix, "page_guess=0", user_keys);
    convo_error err;
    threads_of(s, "g", 12, "u1");
    same_page(s, plain, USER, 5);
    /* the oldest thread written: a candidate the guess does not hold */
    ck_assert_int_eq(convo_append(s, "g-t00", &MSG, NULL, 1, NULL, NULL, &err), 0);
    same_page(s, plain, USER, 5);
    /* the newest deleted: a guessed thread that is gone */
    ck_assert_int_eq(convo_thread_delete(s, "g-t00", &err), 0);
    same_page(s, plain, USER, 5);
    /* one given to another user, one appended to without moving (inside the window) */
    ck_assert_int_eq(convo_save_extra(s, "g-t11", "{\"user_id\":\"u2\"}", &err), 0);
    ck_assert_int_eq(convo_append(s, "g-t10", &MSG, NULL, 1, NULL, NULL, &err), 0);
    same_page(s, plain, USER, 5);
    same_page(s, plain, "{\"user_id\":\"u2\"}", 5);
    convo_close(plain);
    convo_close(s);
}
END_TEST

/* A page whose candidates changed reads only the rows the guess did not
 * hold in its second round trip: a thread moved in costs one more row's
 * HGETALL, not the batch's again (the fewest over 3 moves: other clients
 * only add calls). */
START_TEST(test_moved_in_reads_its_row_only)
{
    char prefix[256], out[8192], oldest[64];
    snprintf(prefix, sizeof prefix, "%s-moved", base_prefix);
    convo_store *s = open_at(prefix, NULL, user_keys);
    convo_store *plain = open_at(prefix, "page_guess=0", user_keys);
    convo_error err;
    threads_of(s, "g", 14, "u1");
    same_page(s, plain, USER, 5);
    long long hit = 1000000, moved = 1000000;
    for (int t = 0; t < 3; t++) {
        long long h0 = hgetalls();
        page(s, USER, 5, NULL, out, sizeof out, NULL, 0);
        long long h1 = hgetalls();
        hit = h1 - h0 < hit ? h1 - h0 : hit;
        snprintf(oldest, sizeof oldest, "g-t%02d", t);
        usleep(6000); /* past the window: the append moves the thread */
        ck_assert_int_eq(convo_append(s, oldest, &MSG, NULL, 1, NULL, NULL, &err), 0);
        h0 = hgetalls();
        page(s, USER, 5, NULL, out, sizeof out, NULL, 0);
        h1 = hgetalls();
        moved = h1 - h0 < moved ? h1 - h0 : moved;
        ck_assert_msg(strncmp(out, oldest, strlen(oldest)) == 0, "%s not first: %s", oldest, out);
        same_page(s, plain, USER, 5);
    }
    ck_assert_msg(hit >= 5 && moved <= hit + 1,
                  "a page read again: %lld HGETALLs; after a thread moved in: %lld", hit, moved);
    convo_close(plain);
    convo_close(s);
}
END_TEST

/* A guessed thread that is no candidate any more may have keys of any type:
 * its rows' errors are not the page's. A guessed candidate's are, as
 * without the guess (CONVO_ECORRUPT), and the connection, whose replies were
 * all read, serves the next page. */
START_TEST(test_guessed_row_of_another_type)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s-type", base_prefix);
    convo_store *s = open_at(prefix, "pool=1", user_keys);
    convo_store *plain = open_at(prefix, "page_guess=0", user_keys);
    convo_error err;
    threads_of(s, "g", 8, "u1");
    same_page(s, plain, USER, 5);
    ck_assert_int_eq(convo_thread_delete(s, "g-t07", &err), 0);
    cmd_ok("SET %s:{g-t07}:extra x", prefix);
    cmd_ok("SET %s:{g-t07}:msgs x", prefix);
    same_page(s, plain, USER, 5);
    cmd_ok("DEL %s:{g-t07}:extra %s:{g-t07}:msgs", prefix, prefix);
    same_page(s, plain, USER, 5);
    cmd_ok("DEL %s:{g-t05}:msgs", prefix);
    cmd_ok("SET %s:{g-t05}:msgs x", prefix);
    ck_assert_int_eq(page_rc(s, USER, 5, &err), CONVO_ECORRUPT);
    ck_assert_msg(strstr(err.message, "thread g-t05") != NULL, "%s", err.message);
    ck_assert_int_eq(page_rc(plain, USER, 5, &err), CONVO_ECORRUPT);
    cmd_ok("DEL %s:{g-t05}:msgs", prefix);
    same_page(s, plain, USER, 5);
    convo_close(plain);
    convo_close(s);
}
END_TEST

/* A walk in pages, repeated (each page's batch then guessed), gives the
 * same rows as without the guess. */
START_TEST(test_walk_repeated)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s-walk", base_prefix);
    convo_store *s = open_at(prefix, NULL, user_keys);
    convo_store *plain = open_at(prefix, "page_guess=0", user_keys);
    threads_of(s, "g", 14, "u1");
    for (int round = 0; round < 3; round++) {
        char cur_a[512] = "", cur_b[512] = "";
        for (int pages = 0; pages < 10; pages++) {
            char a[8192], b[8192];
            page(s, USER, 3, cur_a[0] ? cur_a : NULL, a, sizeof a, cur_a, sizeof cur_a);
            page(plain, USER, 3, cur_b[0] ? cur_b : NULL, b, sizeof b, cur_b, sizeof cur_b);
            ck_assert_str_eq(a, b);
            ck_assert_str_eq(cur_a, cur_b);
            if (!a[0])
                break;
        }
    }
    convo_close(plain);
    convo_close(s);
}
END_TEST

START_TEST(test_page_guess_url)
{
    char url[1024];
    snprintf(url, sizeof url, "%s%sprefix=%s-url&page_guess=2", base_url,
             strchr(base_url, '?') ? "&" : "?", base_prefix);
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open(&s, url, &err), CONVO_EINVAL);
    ck_assert_ptr_null(s);
}
END_TEST

int main(int argc, char **argv)
{
    int status = redis_test_args(argc, argv, "redis-guess", "a cluster has no guess");
    if (status >= 0)
        return status;
    Suite *su = suite_create("redis-guess");
    TCase *tc = tcase_create("server");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, connect_nodes, disconnect_nodes);
    tcase_add_test(tc, test_page_read_again_one_round_trip);
    tcase_add_test(tc, test_guess_follows_changes);
    tcase_add_test(tc, test_moved_in_reads_its_row_only);
    tcase_add_test(tc, test_guessed_row_of_another_type);
    tcase_add_test(tc, test_walk_repeated);
    tcase_add_test(tc, test_page_guess_url);
    suite_add_tcase(su, tc);
    return redis_test_run(su);
}
