/* redis-window.c — the activity window of the Redis driver's layouts 6 and 7
 * (one server; docs/redis.md, "The activity window"), seen by a plain hiredis
 * client: an append inside its thread's window moves nothing and one after it
 * moves the thread; a pop inside it records its time in meta's p (layout 7);
 * every other writer sets meta's u with the thread's :r scores;
 * pages in activity order are exact by updated_at inside the window (states
 * written here behind the store's back, so a reader that did not read one
 * window further, or left out p, would fail); stores of layouts 4 and 5 are
 * migrated on open, one of layout 6 becomes 7 without a walk.
 * Usage: tests/redis_window URL PREFIX; every key it writes starts with PREFIX.
 * A cluster keeps layout 4: the suite is not run there. */
#include "redis_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WINDOW_US 5000 /* drivers/redis/redis_int.h */
#define USER "{\"user_id\":\"u1\"}"

/* ------------------------------------------------------------ helpers */

static long long now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* created_at of the thread's last message */
static long long last_created(convo_store *s, const char *id)
{
    convo_history *h;
    convo_error err;
    ck_assert_int_eq(convo_load(s, id, NULL, &h, &err), 0);
    long long t = convo_history_created_at(h, convo_history_count(h) - 1);
    convo_history_free(h);
    return t;
}

/* Sets a thread's activity time as a writer would: meta's u, its P:ix:r score
 * and (user not NULL) its score in the user's :r set. */
static void set_activity(const char *prefix, const char *id, const char *user, long long u)
{
    freeReplyObject(cmd("HSET %s:{%s}:extra u %lld", prefix, id, u));
    freeReplyObject(cmd("ZADD %s:ix:r XX %lld %s", prefix, u, id));
    if (user)
        freeReplyObject(
            cmd("ZADD %s:ix:{\"user_id\"\"%s\"}:r XX %lld %s", prefix, user, u, id));
}

/* A thread's u equals its scores in P:ix:r and the user's :r set. */
static long long activity(const char *prefix, const char *id, const char *user)
{
    long long u = num("HGET %s:{%s}:extra u", prefix, id);
    ck_assert_int_eq(num("ZSCORE %s:ix:r %s", prefix, id), u);
    if (user)
        ck_assert_int_eq(num("ZSCORE %s:ix:{\"user_id\"\"%s\"}:r %s", prefix, user, id), u);
    return u;
}

/* Walks a listing in pages of `limit`; out gets "id=updated_at" joined. */
static void walk(convo_store *s, const char *where, int reverse, size_t limit, char *out,
                 size_t size)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.reverse = reverse;
    o.limit = limit;
    char cursor[512] = "";
    out[0] = '\0';
    for (int pages = 0; pages < 1000; pages++) {
        o.after = cursor[0] ? cursor : NULL;
        convo_thread_page *p;
        convo_error err;
        int rc = convo_thread_list_ex(s, &o, &p, &err);
        ck_assert_msg(rc == 0, "list: %d %s", rc, err.message);
        size_t n = convo_thread_page_count(p);
        for (size_t i = 0; i < n; i++)
            snprintf(out + strlen(out), size - strlen(out), "%s%s=%lld", *out ? " " : "",
                     convo_thread_page_id(p, i), (long long)convo_thread_page_updated_at(p, i));
        if (n)
            snprintf(cursor, sizeof cursor, "%s", convo_thread_page_cursor(p, n - 1));
        convo_thread_page_free(p);
        if (n < limit)
            return;
    }
    ck_abort_msg("the walk did not end");
}

typedef struct row {
    char id[16];
    long long u;
} row;

static int by_recent(const void *a, const void *b)
{
    const row *x = a, *y = b;
    return x->u != y->u ? (x->u < y->u ? 1 : -1) : -strcmp(x->id, y->id);
}

/* ------------------------------------------------------------ tests */

/* An append soon after its thread's last move leaves u and the :r scores as
 * they are (the thread's updated_at is then its last message's time); once
 * the window has passed, an append moves them to its own time. A machine
 * this loaded may take longer than the window between two calls, so the
 * first part tries up to 20 threads. */
START_TEST(test_append_inside_window_moves_nothing)
{
    char prefix[256], id[32];
    convo_store *s = open_store("inside", NULL, user_keys, prefix, sizeof prefix);
    convo_error err;
    int inside = 0;
    for (int i = 0; i < 20 && !inside; i++) {
        snprintf(id, sizeof id, "t%d", i);
        user_thread(s, id, "u1"); /* save_extra: u moves; the append: a script, u moves */
        long long u = activity(prefix, id, "u1");
        ck_assert_int_eq(convo_append(s, id, &MSG, NULL, 1, NULL, NULL, &err), 0);
        long long last = last_created(s, id);
        if (activity(prefix, id, "u1") == u) {
            ck_assert_msg(last > u && last < u + WINDOW_US, "u %lld, last %lld", u, last);
            inside = 1;
        }
    }
    ck_assert_msg(inside, "no append came within %d µs of the one before it", WINDOW_US);
    usleep(2 * WINDOW_US);
    ck_assert_int_eq(convo_append(s, id, &MSG, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(activity(prefix, id, "u1"), last_created(s, id));
    convo_close(s);
}
END_TEST

/* Every writer but an append inside the window sets u, P:ix:r and the values'
 * :r scores together to its time: save_extra, a checkpoint put, the tail
 * rewrite (the common script with declared keys, the quick one without). */
START_TEST(test_writers_move_the_activity_time)
{
    char prefix[256], plain[256];
    convo_store *s = open_store("writers", NULL, user_keys, prefix, sizeof prefix);
    convo_store *t = open_store("writers-plain", NULL, NULL, plain, sizeof plain);
    convo_error err;
    user_thread(s, "a", "u1");
    user_thread(t, "a", "u1");
    long long before = activity(prefix, "a", "u1");
    usleep(2 * WINDOW_US);
    ck_assert_int_eq(convo_save_extra(s, "a", "{\"title\":\"x\"}", &err), 0);
    long long u = activity(prefix, "a", "u1");
    ck_assert(u >= before + 2 * WINDOW_US);
    usleep(2 * WINDOW_US);
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "a";
    cp.checkpoint_id = "c1";
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), 0);
    ck_assert(activity(prefix, "a", "u1") >= u + 2 * WINDOW_US);
    convo_store *w[] = {s, t};
    const char *pre[] = {prefix, plain};
    for (int i = 0; i < 2; i++) {
        u = activity(pre[i], "a", i ? NULL : "u1");
        usleep(2 * WINDOW_US);
        convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
        convo_rewrite_result res;
        ck_assert_int_eq(convo_replace_tail(w[i], "a", 0, &MSG, NULL, 1, &ro, &res, &err), 0);
        ck_assert_int_eq(activity(pre[i], "a", i ? NULL : "u1"), last_created(w[i], "a"));
        ck_assert(last_created(w[i], "a") >= u + 2 * WINDOW_US);
    }
    convo_close(s);
    convo_close(t);
}
END_TEST

/* Pages in activity order are exact by updated_at: 40 threads of u1 whose
 * last messages are 1-3 ms apart, each's u up to 4.5 ms behind it (so the :r
 * order is not the updated_at order), four more at one same u (ties by id,
 * no message after it), one whose message is further past u than a window
 * (a writer's clock ahead: it counts as u + W - 1), and threads of another
 * user in between; walked 3 and 7 a page, both ways, with and without the
 * filter, against the order computed here. */
START_TEST(test_pages_exact_within_window)
{
    char prefix[256], id[16];
    static char out[16384], want[16384];
    convo_store *s = open_store("exact", NULL, user_keys, prefix, sizeof prefix);
    row rows[64];
    size_t n = 0;
    for (int i = 0; i < 40; i++) {
        snprintf(id, sizeof id, "w%02d", i);
        user_thread(s, id, "u1");
        snprintf(rows[n].id, sizeof rows[n].id, "%s", id);
        rows[n++].u = last_created(s, id);
        snprintf(id, sizeof id, "o%02d", i);
        user_thread(s, id, "u2");
    }
    long long base = rows[0].u;
    for (size_t i = 0; i < 40; i++) /* behind its message by 0 to 4.5 ms */
        set_activity(prefix, rows[i].id, "u1", rows[i].u - (long long)(i % 4) * 1500);
    for (int i = 0; i < 4; i++) { /* no message later than u: updated_at is u */
        snprintf(rows[n].id, sizeof rows[n].id, "tie%d", i);
        user_thread(s, rows[n].id, "u1");
        rows[n].u = rows[20].u + 7;
        set_activity(prefix, rows[n].id, "u1", rows[n].u);
        freeReplyObject(cmd("DEL %s:{%s}:msgs", prefix, rows[n].id));
        n++;
    }
    snprintf(rows[n].id, sizeof rows[n].id, "ahead");
    user_thread(s, "ahead", "u1");
    set_activity(prefix, "ahead", "u1", base - 5000000); /* its message 5 s past u */
    rows[n++].u = base - 5000000 + WINDOW_US - 1;
    qsort(rows, n, sizeof *rows, by_recent);
    for (int reverse = 0; reverse < 2; reverse++) {
        want[0] = '\0';
        for (size_t i = 0; i < n; i++) {
            const row *r = &rows[reverse ? n - 1 - i : i];
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s=%lld",
                     *want ? " " : "", r->id, r->u);
        }
        for (size_t limit = 3; limit <= 7; limit += 4) {
            walk(s, USER, reverse, limit, out, sizeof out);
            ck_assert_str_eq(out, want);
        }
        walk(s, NULL, reverse, 5, out, sizeof out); /* P:ix:r: u2's threads in between */
        char *p = out, *q = want;
        for (char *tok = strtok(p, " "); tok; tok = strtok(NULL, " ")) {
            if (tok[0] == 'o')
                continue;
            size_t len = strcspn(q, " ");
            ck_assert_msg(strncmp(tok, q, len) == 0 && strlen(tok) == len, "%s, not %.*s", tok,
                          (int)len, q);
            q += len + (q[len] == ' ');
        }
        ck_assert_str_eq(q, "");
    }
    convo_close(s);
}
END_TEST

/* More threads share one activity time than a batch reads (20 at u = X, their
 * messages up to 2 ms later), one just below with no message: a batch that
 * finds nothing complete after its position reads again with twice the
 * count, the candidates past the k-th's window more than the plain range
 * read takes (list.c WINDOW_EXTRA: list.lua reads them), and the walk still
 * gives each once in order, both ways. */
START_TEST(test_pages_past_a_crowded_time)
{
    char prefix[256], id[16];
    static char out[4096], want[4096];
    convo_store *s = open_store("crowded", NULL, user_keys, prefix, sizeof prefix);
    row rows[24];
    size_t n = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof id, "c%02d", i);
        user_thread(s, id, "u1");
        snprintf(rows[n].id, sizeof rows[n].id, "%s", id);
        rows[n++].u = last_created(s, id);
    }
    long long x = rows[0].u - 1000;
    for (size_t i = 0; i < n; i++) { /* a record [created_at, role, bytes] within x's window */
        rows[i].u = x + 100 * (long long)(20 - i); /* last in the range read: the newest */
        unsigned char rec[32] = {0x93, 0xcf};
        for (int b = 0; b < 8; b++)
            rec[2 + b] = (unsigned char)((unsigned long long)rows[i].u >> (56 - 8 * b));
        memcpy(rec + 10, "\xa4user\xc4\x02{}", 9);
        freeReplyObject(cmd("LSET %s:{%s}:msgs -1 %b", prefix, rows[i].id, rec, (size_t)19));
        set_activity(prefix, rows[i].id, "u1", x);
    }
    snprintf(rows[n].id, sizeof rows[n].id, "below");
    user_thread(s, "below", "u1");
    freeReplyObject(cmd("DEL %s:{below}:msgs", prefix));
    set_activity(prefix, "below", "u1", x - 1);
    rows[n++].u = x - 1;
    qsort(rows, n, sizeof *rows, by_recent);
    for (int reverse = 0; reverse < 2; reverse++) {
        want[0] = '\0';
        for (size_t i = 0; i < n; i++) {
            const row *r = &rows[reverse ? n - 1 - i : i];
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s=%lld",
                     *want ? " " : "", r->id, r->u);
        }
        walk(s, USER, reverse, 3, out, sizeof out);
        ck_assert_str_eq(out, want);
    }
    convo_close(s);
}
END_TEST

/* A thread missing from P:ix:r and its value's :r set (left by an older
 * writer, or lost) lists again once a write outside its window (a script)
 * puts its entries back from its own keys. */
START_TEST(test_script_append_reindexes)
{
    char prefix[256], out[4096];
    convo_store *s = open_store("reindex", NULL, user_keys, prefix, sizeof prefix);
    user_thread(s, "a", "u1");
    user_thread(s, "b", "u1");
    freeReplyObject(cmd("ZREM %s:ix:r b", prefix));
    freeReplyObject(cmd("ZREM %s:ix:{\"user_id\"\"u1\"}:r b", prefix));
    walk(s, USER, 0, 10, out, sizeof out);
    ck_assert_msg(strncmp(out, "a=", 2) == 0 && !strchr(out, ' '), "%s", out);
    usleep(2 * WINDOW_US);
    convo_error err;
    ck_assert_int_eq(convo_append(s, "b", &MSG, NULL, 1, NULL, NULL, &err), 0);
    long long u = activity(prefix, "b", "u1");
    walk(s, USER, 0, 10, out, sizeof out);
    char want[256];
    snprintf(want, sizeof want, "b=%lld a=", u);
    ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
    convo_close(s);
}
END_TEST

/* The newest thread of an unfiltered listing and its updated_at. */
static long long newest(convo_store *s, char *id, size_t size)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.limit = 1;
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    snprintf(id, size, "%s", convo_thread_page_id(p, 0));
    long long t = convo_thread_page_updated_at(p, 0);
    convo_thread_page_free(p);
    return t;
}

/* A pop soon after its thread's last move (layout 7: the quick script of a
 * store without declared keys) records its time in meta's p and leaves u and
 * the P:ix:r score alone; the thread then lists at the pop's time (a reader
 * without p would give its remaining message's). Once the window has passed
 * a pop moves u and the score to its time. Both replies of the quick script:
 * the generation (an expected length given) and {removed, generation}. A
 * loaded machine may take longer than the window between two calls, so the
 * first part tries up to 20 threads. */
START_TEST(test_pop_inside_window_records_p)
{
    char prefix[256], id[32], got[32];
    convo_store *s = open_store("pop", NULL, NULL, prefix, sizeof prefix);
    convo_error err;
    convo_rewrite_result res;
    const char *two[] = {MSG, MSG};
    long long p = -1;
    for (int i = 0; i < 20 && p < 0; i++) {
        snprintf(id, sizeof id, "p%d", i);
        ck_assert_int_eq(convo_append(s, id, two, NULL, 2, NULL, NULL, &err), 0);
        long long u = activity(prefix, id, NULL), before = now_us();
        convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
        ro.expected_length = 2;
        ck_assert_int_eq(convo_replace_tail(s, id, 1, NULL, NULL, 0, &ro, &res, &err), 0);
        ck_assert_int_eq(res.first_seq, 1);
        ck_assert_int_eq(res.count, 0);
        ck_assert_int_eq(res.removed, 1);
        ck_assert_int_eq(res.generation, 1);
        ck_assert_int_eq(num("HGET %s:{%s}:meta g", prefix, id), 1);
        if (activity(prefix, id, NULL) != u) { /* outside the window: moved, no p */
            ck_assert_int_eq(num("HGET %s:{%s}:extra p", prefix, id), -1);
            continue;
        }
        p = num("HGET %s:{%s}:extra p", prefix, id);
        ck_assert_msg(p >= before && p >= u && p < u + WINDOW_US, "u %lld, p %lld", u, p);
        ck_assert_int_eq(newest(s, got, sizeof got), p);
        ck_assert_str_eq(got, id);
    }
    ck_assert_msg(p >= 0, "no pop came within %d µs of its thread's move", WINDOW_US);
    usleep(2 * WINDOW_US);
    convo_rewrite_opts any = CONVO_REWRITE_OPTS_INIT;
    ck_assert_int_eq(convo_replace_tail(s, id, 0, NULL, NULL, 0, &any, &res, &err), 0);
    ck_assert_int_eq(res.removed, 1);
    ck_assert_int_eq(res.generation, 2);
    long long u = activity(prefix, id, NULL);
    ck_assert_msg(u >= p + 2 * WINDOW_US, "u %lld, p %lld", u, p);
    ck_assert_int_eq(newest(s, got, sizeof got), u);
    convo_close(s);
}
END_TEST

/* Pages are exact with p (layout 7): updated_at = the latest of u, p and the
 * last message's time, at most u + W - 1; threads whose u order differs from
 * that order (a p inside the window, one past it, one below u, one not a
 * time), walked 2 a page both ways against the order computed here. */
START_TEST(test_pages_exact_with_p)
{
    char prefix[256], out[4096], want[4096];
    convo_store *s = open_store("exact-p", NULL, NULL, prefix, sizeof prefix);
    convo_error err;
    long long b = now_us() + 60000000; /* later than every message */
    static const struct {
        const char *id;
        long long u;
        const char *p; /* "" = none, "D" = u + D */
        long long listed;
    } t[] = {
        {"q0", 0, "4000", 4000},   {"q1", 1000, "", 1000},         {"q2", 2000, "9000", 6999},
        {"q3", 3000, "-2000", 3000}, {"q4", 6000, "", 6000}, {"q5", 500, "x", 500},
    };
    row rows[6];
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(convo_append(s, t[i].id, &MSG, NULL, 1, NULL, NULL, &err), 0);
        set_activity(prefix, t[i].id, NULL, b + t[i].u);
        if (strcmp(t[i].p, "x") == 0)
            freeReplyObject(cmd("HSET %s:{%s}:extra p x", prefix, t[i].id));
        else if (t[i].p[0])
            freeReplyObject(
                cmd("HSET %s:{%s}:extra p %lld", prefix, t[i].id, b + t[i].u + atoll(t[i].p)));
        snprintf(rows[i].id, sizeof rows[i].id, "%s", t[i].id);
        rows[i].u = b + t[i].listed;
    }
    qsort(rows, 6, sizeof *rows, by_recent);
    for (int reverse = 0; reverse < 2; reverse++) {
        want[0] = '\0';
        for (size_t i = 0; i < 6; i++) {
            const row *r = &rows[reverse ? 5 - i : i];
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s=%lld",
                     *want ? " " : "", r->id, r->u);
        }
        walk(s, NULL, reverse, 2, out, sizeof out);
        ck_assert_str_eq(out, want);
    }
    convo_close(s);
}
END_TEST

/* Layouts 4 and 5 -> 6 (now 8): on open every thread gets its u and its values' :r
 * entries from its P:ix:r score, which both kept as its updated_at (layout 5
 * had no value activity sets; layout 4's meta u may be stale), and P:store's
 * v becomes 8; the pages of a value list them in that order with those times,
 * and the threads' messages and extra are as they were. Their c and u were
 * meta's then: layout 8 moves them into the extra hash (tests/redis-layout8.c). */
START_TEST(test_layouts_4_and_5_migrated)
{
    for (int from = 4; from <= 5; from++) {
        char name[16], prefix[256], out[4096], want[256];
        snprintf(name, sizeof name, "from%d", from);
        convo_store *s = open_store(name, NULL, user_keys, prefix, sizeof prefix);
        user_thread(s, "a", "u1");
        user_thread(s, "b", "u1");
        user_thread(s, "c", "u2");
        convo_close(s);
        long long t = now_us() + 60000000; /* later than every message */
        const char *ids[] = {"a", "b", "c"};
        for (int i = 0; i < 3; i++) {
            freeReplyObject(cmd("ZADD %s:ix:r XX %lld %s", prefix, t - i * 1000000, ids[i]));
            long long c = num("HGET %s:{%s}:extra c", prefix, ids[i]);
            freeReplyObject(cmd("HDEL %s:{%s}:extra c u", prefix, ids[i]));
            freeReplyObject(cmd("HSET %s:{%s}:meta c %lld", prefix, ids[i], c));
            if (from == 4)
                freeReplyObject(cmd("HSET %s:{%s}:meta u 1", prefix, ids[i]));
        }
        if (from == 5) {
            freeReplyObject(cmd("DEL %s:ix:{\"user_id\"\"u1\"}:r", prefix));
            freeReplyObject(cmd("DEL %s:ix:{\"user_id\"\"u2\"}:r", prefix));
        } else { /* layout 4 kept them, with the scores of P:ix:r */
            freeReplyObject(
                cmd("ZADD %s:ix:{\"user_id\"\"u1\"}:r %lld a %lld b", prefix, t, t - 1000000));
        }
        freeReplyObject(cmd("HSET %s:store v %d", prefix, from));

        s = open_store(name, NULL, NULL, prefix, sizeof prefix);
        ck_assert_int_eq(num("HGET %s:store v", prefix), 8);
        ck_assert_int_eq(activity(prefix, "a", "u1"), t);
        ck_assert_int_eq(activity(prefix, "b", "u1"), t - 1000000);
        ck_assert_int_eq(activity(prefix, "c", "u2"), t - 2000000);
        walk(s, USER, 0, 1, out, sizeof out);
        snprintf(want, sizeof want, "a=%lld b=%lld", t, t - 1000000);
        ck_assert_str_eq(out, want);
        ck_assert_int_eq(num("LLEN %s:{a}:msgs", prefix), 1);
        ck_assert_int_eq(num("HLEN %s:{a}:extra", prefix), 3); /* "user_id", c, u */
        ck_assert_int_eq(num("HEXISTS %s:{a}:meta c", prefix), 0);
        ck_assert_int_eq(num("HEXISTS %s:{a}:meta u", prefix), 0);
        convo_close(s);
    }
}
END_TEST

/* The quick script raises the generation as text (the last digit, or the
 * number when it ends in 9): pops and a regenerated last answer through
 * 9 -> 10 and 19 -> 20, with and without an expected length, against the
 * stored g and a load. */
START_TEST(test_quick_generation_as_text)
{
    char prefix[256];
    convo_store *s = open_store("gen", NULL, NULL, prefix, sizeof prefix);
    convo_error err;
    convo_rewrite_result res;
    const char *again = "{\"role\":\"assistant\",\"content\":\"again\"}";
    ck_assert_int_eq(convo_append(s, "g", &MSG, NULL, 1, NULL, NULL, &err), 0);
    int64_t gen;
    for (gen = 1; gen <= 21; gen++) {
        convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
        if (gen % 2)
            ro.expected_length = 2;
        if (gen % 3 == 0) { /* the last answer again: one LSET */
            ro.expected_generation = gen - 1;
            ck_assert_int_eq(convo_append(s, "g", &MSG, NULL, 1, NULL, NULL, &err), 0);
            ck_assert_int_eq(convo_replace_tail(s, "g", 1, &again, NULL, 1, &ro, &res, &err), 0);
            ck_assert_int_eq(res.count, 1);
            ck_assert_int_eq(num("LLEN %s:{g}:msgs", prefix), 2);
            ck_assert_int_eq(convo_replace_tail(s, "g", 1, NULL, NULL, 0, NULL, &res, &err), 0);
            gen++;
        } else {
            ck_assert_int_eq(convo_append(s, "g", &MSG, NULL, 1, NULL, NULL, &err), 0);
            ck_assert_int_eq(convo_replace_tail(s, "g", 1, NULL, NULL, 0, &ro, &res, &err), 0);
        }
        ck_assert_int_eq(res.removed, 1);
        ck_assert_int_eq(res.generation, gen);
        ck_assert_int_eq(num("HGET %s:{g}:meta g", prefix), gen);
    }
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "g", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_generation(h), gen - 1);
    ck_assert_uint_eq(convo_history_count(h), 1);
    convo_history_free(h);
    convo_rewrite_opts stale = CONVO_REWRITE_OPTS_INIT;
    stale.expected_generation = gen - 2;
    ck_assert_int_eq(convo_replace_tail(s, "g", 0, NULL, NULL, 0, &stale, &res, &err),
                     CONVO_ECONFLICT);
    ck_assert_int_eq(convo_replace_tail(s, "missing", 0, NULL, NULL, 0, NULL, &res, &err),
                     CONVO_ENOTFOUND);
    convo_close(s);
}
END_TEST

/* A page's last message is read from the record's msgpack headers in place:
 * every integer width of created_at, fixstr / str8 roles, bin8 / bin16 / str
 * bytes come back exactly; a truncated record, one that is not a 3-array,
 * and one whose bytes are neither str nor bin are CONVO_ECORRUPT. */
#define REC(literal) literal, sizeof literal - 1

START_TEST(test_page_last_message_records)
{
    char prefix[256], big[300];
    convo_store *s = open_store("rec", NULL, NULL, prefix, sizeof prefix);
    convo_error err;
    memset(big, 'x', sizeof big);
    memcpy(big, "{\"r\":\"", 6);
    memcpy(big + sizeof big - 2, "\"}", 2);
    static const struct {
        const char *rec;
        size_t len;
        int ok;
    } cases[] = {
        {REC("\x93\x05\xa4user\xc4\x02{}"), 1}, /* fixint, fixstr, bin8 */
        {REC("\x93\xcf\0\0\0\0\0\0\0\x07\xd9\x01u\xa2{}"), 1}, /* uint64, str8, fixstr */
        {REC("\x93\xd3\0\0\0\0\0\0\0\x07\xa1u\xc4\x02{}"), 1}, /* int64 */
        {REC("\x93\x05\xa4user\xc4\x05{}"), 0}, /* bytes past the end */
        {REC("\x93\x05\xa9user"), 0}, /* role past the end */
        {REC("\x92\x05\xa4user"), 0}, /* not [t, role, bytes] */
        {REC("\x93\x05\xa4user\x05"), 0}, /* bytes not str or bin */
        {REC("\x93\xcf\0\0"), 0}, /* time past the end */
        {REC("\x93\x80\xa1u\xa2{}"), 0}, /* time a map */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] + 1; i++) {
        char id[16];
        snprintf(id, sizeof id, "r%zu", i);
        ck_assert_int_eq(convo_append(s, id, &MSG, NULL, 1, NULL, NULL, &err), 0);
        char rec[400];
        size_t len;
        if (i < sizeof cases / sizeof cases[0]) {
            memcpy(rec, cases[i].rec, cases[i].len);
            len = cases[i].len;
        } else { /* bin16 */
            memcpy(rec, "\x93\x05\xa1u\xc5\x01\x2c", 7);
            memcpy(rec + 7, big, sizeof big);
            len = 7 + sizeof big;
        }
        freeReplyObject(cmd("LSET %s:{%s}:msgs -1 %b", prefix, id, rec, len));
        convo_thread_list_opts lo = CONVO_THREAD_LIST_OPTS_INIT;
        lo.limit = 1;
        lo.with_last_message = 1;
        convo_thread_page *p = NULL;
        int ok = i == sizeof cases / sizeof cases[0] || cases[i].ok;
        int rc = convo_thread_list_ex(s, &lo, &p, &err);
        ck_assert_msg(rc == (ok ? 0 : CONVO_ECORRUPT), "case %zu: %d", i, rc);
        if (ok) {
            size_t got_len;
            const char *got = convo_thread_page_last_message(p, 0, &got_len);
            ck_assert_str_eq(convo_thread_page_id(p, 0), id);
            if (i == sizeof cases / sizeof cases[0])
                ck_assert(got_len == sizeof big && memcmp(got, big, got_len) == 0);
            else
                ck_assert(got_len == 2 && memcmp(got, "{}", 2) == 0);
        }
        convo_thread_page_free(p);
        ck_assert_int_eq(convo_thread_delete(s, id, &err), 0);
    }
    convo_close(s);
}
END_TEST

int main(int argc, char **argv)
{
    int status = redis_test_args(argc, argv, "redis-window", "a cluster keeps layout 4");
    if (status >= 0)
        return status;
    Suite *su = suite_create("redis-window");
    TCase *tc = tcase_create("server");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, connect_nodes, disconnect_nodes);
    tcase_add_test(tc, test_append_inside_window_moves_nothing);
    tcase_add_test(tc, test_writers_move_the_activity_time);
    tcase_add_test(tc, test_pages_exact_within_window);
    tcase_add_test(tc, test_pages_past_a_crowded_time);
    tcase_add_test(tc, test_script_append_reindexes);
    tcase_add_test(tc, test_layouts_4_and_5_migrated);
    tcase_add_test(tc, test_pop_inside_window_records_p);
    tcase_add_test(tc, test_pages_exact_with_p);
    tcase_add_test(tc, test_quick_generation_as_text);
    tcase_add_test(tc, test_page_last_message_records);
    suite_add_tcase(su, tc);
    return redis_test_run(su);
}
