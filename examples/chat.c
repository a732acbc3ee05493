/* chat.c — a chat loop that keeps its conversation in a convo store and picks
 * it up again after a restart. Usage: chat [URL] [THREAD]; reads user lines on
 * stdin and answers each with a canned (echo) assistant reply. */
#include <convo.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loads the thread and prints it; *length gets its message count (0 when new). */
static int restore(convo_store *s, const char *thread, int64_t *length)
{
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, thread, NULL, &h, &err);
    if (rc == CONVO_ENOTFOUND) { /* a new conversation */
        *length = 0;
        printf("restored 0 messages\n");
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "chat: %s\n", err.message);
        return rc;
    }
    *length = convo_history_length(h);
    printf("restored %zu messages\n", convo_history_count(h));
    for (size_t i = 0; i < convo_history_count(h); i++) {
        json_t *msg = json_loads(convo_history_message(h, i, NULL), 0, NULL);
        const char *content = json_string_value(json_object_get(msg, "content"));
        printf("  %s: %s\n", convo_history_role(h, i), content ? content : "");
        json_decref(msg);
    }
    convo_history_free(h);
    return 0;
}

/* {"role":ROLE,"content":TEXT} as compact JSON; the caller frees it. */
static char *message(const char *role, const char *text)
{
    json_t *m = json_pack("{s:s, s:s}", "role", role, "content", text);
    char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    return s;
}

/* Stores the user's line and the reply as one batch, only if nobody else wrote
 * to the thread since we last looked (expected length); reloads on a conflict. */
static int exchange(convo_store *s, const char *thread, const char *line, int64_t *length)
{
    char reply[4200]; /* lines are under 4096 bytes (see main) */
    snprintf(reply, sizeof reply, "You said: %s", line);
    const char *batch[2] = {message("user", line), message("assistant", reply)};
    int rc = CONVO_ECONFLICT;
    if (!batch[0] || !batch[1]) { /* jansson refuses text that is not UTF-8 */
        fprintf(stderr, "chat: skipped a line that is not valid UTF-8\n");
        rc = 0;
    }
    for (int attempt = 0; rc == CONVO_ECONFLICT && attempt < 3; attempt++) {
        convo_append_opts opts = CONVO_APPEND_OPTS_INIT;
        opts.expected_length = *length;
        convo_append_result res;
        convo_error err;
        rc = convo_append(s, thread, batch, NULL, 2, &opts, &res, &err);
        if (rc == 0) {
            *length = res.first_seq + (int64_t)res.count;
            printf("assistant: %s\n", reply);
        } else {
            fprintf(stderr, "chat: %s\n", err.message);
            /* someone else appended: catch up, then retry */
            if (rc == CONVO_ECONFLICT && restore(s, thread, length) != 0)
                break;
        }
    }
    free((char *)batch[0]);
    free((char *)batch[1]);
    return rc;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:chat.db";
    const char *thread = argc > 2 ? argv[2] : "chat";
    convo_store *s;
    convo_error err;
    if (convo_open(&s, url, &err) != 0) {
        fprintf(stderr, "chat: %s\n", err.message);
        return 1;
    }
    int64_t length;
    int rc = restore(s, thread, &length);
    char line[4096];
    while (rc == 0 && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '\0')
            rc = exchange(s, thread, line, &length);
    }
    convo_close(s);
    return rc == 0 ? 0 : 1;
}
