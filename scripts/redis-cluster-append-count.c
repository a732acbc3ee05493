/* scripts/redis-cluster-append-count.c — the program
 * scripts/redis-cluster-append-count.sh counts: N threads of 10 users made as a
 * chat app makes them (a save_extra with the user_id, one append), in a store
 * with user_id declared indexed or without declared keys, then K more appends
 * to each, between two runs of the hook (the script zeroes and reads the
 * masters' counters there). Public API only.
 *
 *   redis-cluster-append-count URL indexed|bare N K HOOK */
#include <convo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const MSG = "{\"role\":\"user\",\"content\":\"hello there, this is a "
                               "message of some length: about a hundred bytes, more or less\"}";

static int fail(const char *what, const convo_error *e)
{
    fprintf(stderr, "redis-cluster-append-count: %s: %s\n", what, e->message);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: redis-cluster-append-count URL indexed|bare N K HOOK\n");
        return 2;
    }
    static const char *const keys[] = {"user_id", NULL};
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = strcmp(argv[2], "indexed") == 0 ? keys : NULL;
    int n = atoi(argv[3]), k = atoi(argv[4]);
    convo_store *s = NULL;
    convo_error e = {0};
    if (convo_open_ex(&s, argv[1], &so, &e) != 0)
        return fail("open", &e);
    char id[32], extra[64], hook[1024];
    int rc = 0;
    for (int t = 0; t < n && rc == 0; t++) {
        snprintf(id, sizeof id, "t%06d", t);
        snprintf(extra, sizeof extra, "{\"user_id\":\"u%02d\"}", t % 10);
        if (convo_save_extra(s, id, extra, &e) != 0 ||
            convo_append(s, id, &MSG, NULL, 1, NULL, NULL, &e) != 0)
            rc = fail("seed", &e);
    }
    snprintf(hook, sizeof hook, "%s before", argv[5]);
    if (rc == 0 && system(hook) != 0)
        rc = 1;
    for (int j = 0; j < k && rc == 0; j++)
        for (int t = 0; t < n && rc == 0; t++) {
            snprintf(id, sizeof id, "t%06d", t);
            if (convo_append(s, id, &MSG, NULL, 1, NULL, NULL, &e) != 0)
                rc = fail("append", &e);
        }
    snprintf(hook, sizeof hook, "%s after", argv[5]);
    if (rc == 0 && system(hook) != 0)
        rc = 1;
    convo_close(s);
    return rc;
}
