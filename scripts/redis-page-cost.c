/* scripts/redis-page-cost.c — the program scripts/redis-page-cost.sh counts:
 * seeds a store (1,000 threads of 10 users, 3 messages each, the user_id in
 * the extra, declared indexed; one user's threads more than the activity
 * window apart, as a chat app's are) and a 20-message thread, or reads N
 * pages of user u00's 20 newest threads with extra and last message and/or
 * N loads of the 20-message thread. Public API only.
 *
 *   redis-page-cost URL seed | pages N | loads N | both N */
#include <convo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const MSG = "{\"role\":\"user\",\"content\":\"hello there, this is a "
                               "message of some length: about a hundred bytes, more or less\"}";

static int fail(const char *what, const convo_error *e)
{
    fprintf(stderr, "redis-page-cost: %s: %s\n", what, e->message);
    return 1;
}

static int seed(convo_store *s)
{
    convo_error e = {0};
    char id[32], extra[64];
    for (int t = 0; t < 1000; t++) {
        snprintf(id, sizeof id, "t%05d", t);
        snprintf(extra, sizeof extra, "{\"user_id\":\"u%02d\"}", t % 10);
        if (t % 10 == 0)
            usleep(6000); /* more than the 5 ms window (docs/redis.md) */
        if (convo_save_extra(s, id, extra, &e) != 0)
            return fail("save_extra", &e);
        for (int k = 0; k < 3; k++)
            if (convo_append(s, id, &MSG, NULL, 1, NULL, NULL, &e) != 0)
                return fail("append", &e);
    }
    for (int k = 0; k < 20; k++)
        if (convo_append(s, "load-20", &MSG, NULL, 1, NULL, NULL, &e) != 0)
            return fail("append", &e);
    return 0;
}

static int page(convo_store *s)
{
    convo_error e = {0};
    convo_thread_list_opts lo = CONVO_THREAD_LIST_OPTS_INIT;
    lo.where_json = "{\"user_id\":\"u00\"}";
    lo.limit = 20;
    lo.with_extra = 1;
    lo.with_last_message = 1;
    convo_thread_page *p = NULL;
    if (convo_thread_list_ex(s, &lo, &p, &e) != 0)
        return fail("page", &e);
    int n = (int)convo_thread_page_count(p);
    convo_thread_page_free(p);
    if (n != 20) {
        fprintf(stderr, "redis-page-cost: a page of %d rows, not 20\n", n);
        return 1;
    }
    return 0;
}

static int load(convo_store *s)
{
    convo_error e = {0};
    convo_history *h = NULL;
    if (convo_load(s, "load-20", NULL, &h, &e) != 0)
        return fail("load", &e);
    int n = (int)convo_history_count(h);
    convo_history_free(h);
    if (n != 20) {
        fprintf(stderr, "redis-page-cost: a load of %d messages, not 20\n", n);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: redis-page-cost URL seed | pages N | loads N | both N\n");
        return 2;
    }
    static const char *const keys[] = {"user_id", NULL};
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = keys;
    convo_store *s = NULL;
    convo_error e = {0};
    if (convo_open_ex(&s, argv[1], &so, &e) != 0)
        return fail("open", &e);
    int rc = 0, n = argc > 3 ? atoi(argv[3]) : 0;
    int pages = !strcmp(argv[2], "pages") || !strcmp(argv[2], "both");
    int loads = !strcmp(argv[2], "loads") || !strcmp(argv[2], "both");
    if (!strcmp(argv[2], "seed")) {
        rc = seed(s);
        /* the next open sets the store's layout (it found threads): not counted */
        convo_close(s);
        s = NULL;
        if (rc == 0 && convo_open_ex(&s, argv[1], &so, &e) != 0)
            rc = fail("open", &e);
    }
    for (int i = 0; i < n && rc == 0; i++)
        rc = (pages ? page(s) : 0) || (loads ? load(s) : 0);
    convo_close(s);
    return rc;
}
