/* agent.c — how an agent framework uses convo: load the thread, append one
 * step (a tool call and its result), save the step in extra, print the state.
 * Usage: agent [URL] [THREAD]; one step per run. AGENT_CRASH_AFTER_APPEND=1
 * exits between append and save_extra: the next run redoes that step, and its
 * idempotency key keeps the messages from being stored twice. */
#include <convo.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const convo_error *err)
{
    fprintf(stderr, "agent: %s: %s\n", what, err->message);
    return 1;
}

/* The last finished step, read from extra ({"step":N,...}); 0 for a new thread. */
static int last_step(convo_store *s, const char *thread, json_int_t *step)
{
    convo_history *h = NULL;
    convo_error err;
    *step = 0;
    int rc = convo_load(s, thread, NULL, &h, &err);
    if (rc == CONVO_ENOTFOUND) /* a new thread: an empty patch makes it exist */
        return convo_save_extra(s, thread, "{}", &err) ? fail("create", &err) : 0;
    if (rc != 0)
        return fail("load", &err);
    json_t *extra = json_loads(convo_history_extra(h), 0, NULL);
    *step = json_integer_value(json_object_get(extra, "step"));
    json_decref(extra);
    convo_history_free(h);
    return 0;
}

/* Appends the tool call and its result; the key "step-N" makes a retry of the
 * same step return the first append's seq instead of writing again. */
static int append_step(convo_store *s, const char *thread, json_int_t step)
{
    char call[256], result[128], key[32];
    snprintf(call, sizeof call,
             "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_%lld\","
             "\"type\":\"function\",\"function\":{\"name\":\"add\","
             "\"arguments\":\"{\\\"a\\\":%lld,\\\"b\\\":%lld}\"}}]}",
             (long long)step, (long long)step, (long long)step);
    snprintf(result, sizeof result,
             "{\"role\":\"tool_result\",\"tool_call_id\":\"call_%lld\",\"content\":\"%lld\"}",
             (long long)step, (long long)(step + step));
    snprintf(key, sizeof key, "step-%lld", (long long)step);
    const char *batch[2] = {call, result};
    convo_append_opts opts = CONVO_APPEND_OPTS_INIT;
    opts.idempotency_key = key;
    convo_append_result res;
    convo_error err;
    if (convo_append(s, thread, batch, NULL, 2, &opts, &res, &err) != 0)
        return fail("append", &err);
    printf("step %lld: messages %lld..%lld%s\n", (long long)step, (long long)res.first_seq,
           (long long)(res.first_seq + (int64_t)res.count - 1),
           res.replayed ? " (already stored: replayed)" : "");
    return 0;
}

static int save_step(convo_store *s, const char *thread, json_int_t step)
{
    char patch[128];
    snprintf(patch, sizeof patch, "{\"step\":%lld,\"last_tool\":\"add\"}", (long long)step);
    convo_error err;
    return convo_save_extra(s, thread, patch, &err) ? fail("save_extra", &err) : 0;
}

static int print_state(convo_store *s, const char *thread)
{
    convo_load_opts opts = CONVO_LOAD_OPTS_INIT;
    opts.tail = 1; /* the length and extra come with any load */
    convo_history *h;
    convo_error err;
    if (convo_load(s, thread, &opts, &h, &err) != 0)
        return fail("load", &err);
    printf("thread %s: %lld messages, extra %s\n", thread,
           (long long)convo_history_length(h), convo_history_extra(h));
    convo_history_free(h);
    return 0;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:agent.db";
    const char *thread = argc > 2 ? argv[2] : "agent";
    const char *crash = getenv("AGENT_CRASH_AFTER_APPEND");
    convo_store *s;
    convo_error err;
    if (convo_open(&s, url, &err) != 0)
        return fail("open", &err);
    json_int_t step;
    int rc = last_step(s, thread, &step);
    if (rc == 0)
        rc = append_step(s, thread, step + 1);
    if (rc == 0 && crash && strcmp(crash, "1") == 0) {
        fprintf(stderr, "agent: crashing before save_extra, as asked\n");
        _Exit(1); /* like a crash: no cleanup */
    }
    if (rc == 0)
        rc = save_step(s, thread, step + 1);
    if (rc == 0)
        rc = print_state(s, thread);
    convo_close(s);
    return rc;
}
