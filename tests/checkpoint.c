/* checkpoint.c — the checkpoint conformance suite: `tests/checkpoints URL`
 * runs the same checks of design §3 "Checkpoints" against any driver. */
#include <check.h>
#include <convo.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *url;
static char prefix[64];

static convo_store *open_store(void)
{
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    ck_assert_msg(rc == 0, "open %s: %s", url, err.message);
    return s;
}

/* A thread id unique to this run and test. */
static const char *tid(const char *name)
{
    static char buf[8][256];
    static int n;
    char *b = buf[n++ % 8];
    snprintf(b, 256, "%s-%s", prefix, name);
    return b;
}

static convo_blob blob(const char *type, const char *bytes, size_t len)
{
    convo_blob b = {type, bytes, len};
    return b;
}

static int put(convo_store *s, const char *thread, const char *ns, const char *id,
               const char *parent, const char *metadata, const convo_channel_in *ch, size_t n,
               int64_t log_length)
{
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = thread;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = metadata;
    cp.body = blob("json", "{\"v\":1}", 7);
    cp.channels = ch;
    cp.nchannels = n;
    cp.log_length = log_length;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    if (rc != 0 && rc != CONVO_EINVAL && rc != CONVO_ETOOLARGE)
        ck_abort_msg("put %s: %s", id, err.message);
    return rc;
}

/* The value of channel name in cp as a string ("" when it has no value, NULL if absent). */
static char *channel_value(const convo_checkpoint *cp, const char *name, char *version_out)
{
    static char buf[4][256];
    static int n;
    for (size_t i = 0; i < convo_checkpoint_channel_count(cp); i++) {
        const char *version;
        convo_blob v;
        const char *ch = convo_checkpoint_channel(cp, i, &version, &v);
        if (strcmp(ch, name) != 0)
            continue;
        if (version_out)
            strcpy(version_out, version);
        char *b = buf[n++ % 4];
        snprintf(b, 256, "%.*s", (int)v.len, v.type ? (const char *)v.bytes : "");
        return b;
    }
    return NULL;
}

START_TEST(test_put_get_roundtrip)
{
    convo_store *s = open_store();
    const char *t = tid("roundtrip");
    static const char bin[] = {'a', 0, 'b', (char)0xff, 0};
    convo_blob va = blob("msgpack", bin, 5), vb = blob("json", "[1,2]", 5);
    convo_channel_in ch[] = {{"a", "1", &va}, {"b", "00001.0.5", &vb}, {"empty", "1", NULL}};
    ck_assert_int_eq(put(s, t, NULL, "cp-1", NULL, "{\"source\":\"input\",\"step\":-1}", ch, 3, 7), 0);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, NULL, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_thread_id(cp), t);
    ck_assert_str_eq(convo_checkpoint_ns(cp), "");
    ck_assert_str_eq(convo_checkpoint_id(cp), "cp-1");
    ck_assert_ptr_null(convo_checkpoint_parent_id(cp));
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 7);
    ck_assert_int_gt(convo_checkpoint_created_at(cp), 0);
    json_t *m = json_loads(convo_checkpoint_metadata(cp), 0, NULL);
    json_t *want = json_loads("{\"source\":\"input\",\"step\":-1}", 0, NULL);
    ck_assert(json_equal(m, want));
    json_decref(m);
    json_decref(want);
    convo_blob body = convo_checkpoint_body(cp);
    ck_assert_str_eq(body.type, "json");
    ck_assert_int_eq(body.len, 7);
    ck_assert_mem_eq(body.bytes, "{\"v\":1}", 7);
    ck_assert_int_eq(convo_checkpoint_channel_count(cp), 3);
    const char *version;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &version, &v), "a");
    ck_assert_str_eq(version, "1");
    ck_assert_str_eq(v.type, "msgpack");
    ck_assert_int_eq(v.len, 5);
    ck_assert_mem_eq(v.bytes, bin, 5);
    ck_assert_str_eq(convo_checkpoint_channel(cp, 1, &version, &v), "b");
    ck_assert_str_eq(version, "00001.0.5");
    ck_assert_str_eq(convo_checkpoint_channel(cp, 2, &version, &v), "empty");
    ck_assert_ptr_null(v.type);
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 0);
    convo_checkpoint_free(cp);
    /* by id, and a thread that now exists with no messages */
    ck_assert_int_eq(convo_checkpoint_get(s, t, "", "cp-1", &cp, &err), 0);
    convo_checkpoint_free(cp);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, t, NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 0);
    convo_history_free(h);
    convo_close(s);
}
END_TEST

START_TEST(test_not_found_and_invalid)
{
    convo_store *s = open_store();
    const char *t = tid("nf");
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, NULL, &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "nope", &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(put(s, t, NULL, "c1", NULL, NULL, NULL, 0, 0), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "nope", &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_checkpoint_get(s, t, "other-ns", NULL, &cp, &err), CONVO_ENOTFOUND);
    ck_assert_ptr_null(cp);
    /* missing thread or checkpoint id */
    ck_assert_int_eq(put(s, NULL, NULL, "c1", NULL, NULL, NULL, 0, 0), CONVO_EINVAL);
    ck_assert_int_eq(put(s, t, NULL, NULL, NULL, NULL, NULL, 0, 0), CONVO_EINVAL);
    ck_assert_int_eq(put(s, t, NULL, "", NULL, NULL, NULL, 0, 0), CONVO_EINVAL);
    ck_assert_int_eq(convo_checkpoint_get(s, NULL, NULL, NULL, &cp, &err), CONVO_EINVAL);
    /* bad metadata, duplicate channel, value without type: nothing written */
    ck_assert_int_eq(put(s, t, NULL, "bad", NULL, "{not json", NULL, 0, 0), CONVO_EINVAL);
    ck_assert_int_eq(put(s, t, NULL, "bad", NULL, "[1]", NULL, 0, 0), CONVO_EINVAL);
    convo_blob v = blob("json", "1", 1), untyped = blob(NULL, "1", 1);
    convo_channel_in dup[] = {{"a", "1", &v}, {"a", "2", &v}};
    ck_assert_int_eq(put(s, t, NULL, "bad", NULL, NULL, dup, 2, 0), CONVO_EINVAL);
    convo_channel_in bad[] = {{"a", "1", &untyped}};
    ck_assert_int_eq(put(s, t, NULL, "bad", NULL, NULL, bad, 1, 0), CONVO_EINVAL);
    ck_assert_int_eq(put(s, t, NULL, "bad", NULL, NULL, NULL, 0, -1), CONVO_EINVAL);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "bad", &cp, &err), CONVO_ENOTFOUND);
    convo_write_in w = {0, "ch", blob("json", "1", 1)};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, "nope", "task", "", &w, 1, &err),
                     CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, NULL, "task", "", &w, 1, &err),
                     CONVO_EINVAL);
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, "c1", NULL, "", &w, 1, &err),
                     CONVO_EINVAL);
    convo_close(s);
}
END_TEST

START_TEST(test_channels_stored_once)
{
    convo_store *s = open_store();
    const char *t = tid("once");
    convo_blob a1 = blob("json", "\"A1\"", 4), b1 = blob("json", "\"B1\"", 4),
               a2 = blob("json", "\"A2\"", 4);
    convo_channel_in c1[] = {{"a", "1", &a1}, {"b", "1", &b1}};
    convo_channel_in c2[] = {{"a", "2", &a2}, {"b", "1", NULL}};
    convo_channel_in c3[] = {{"a", "2", NULL}, {"b", "1", NULL}, {"c", "1", NULL}};
    ck_assert_int_eq(put(s, t, NULL, "1", NULL, NULL, c1, 2, 0), 0);
    ck_assert_int_eq(put(s, t, NULL, "2", "1", NULL, c2, 2, 0), 0);
    ck_assert_int_eq(put(s, t, NULL, "3", "2", NULL, c3, 3, 0), 0);
    convo_checkpoint *cp;
    convo_error err;
    char version[64];
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, NULL, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_id(cp), "3");
    ck_assert_str_eq(convo_checkpoint_parent_id(cp), "2");
    ck_assert_str_eq(channel_value(cp, "a", version), "\"A2\"");
    ck_assert_str_eq(version, "2");
    ck_assert_str_eq(channel_value(cp, "b", version), "\"B1\""); /* written by an ancestor */
    ck_assert_str_eq(channel_value(cp, "c", NULL), "");         /* no value ever */
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "1", &cp, &err), 0);
    ck_assert_str_eq(channel_value(cp, "a", NULL), "\"A1\"");
    ck_assert_str_eq(channel_value(cp, "b", NULL), "\"B1\"");
    convo_checkpoint_free(cp);
    /* re-sending a stored version does not replace the stored value */
    convo_blob other = blob("json", "\"X\"", 3);
    convo_channel_in c4[] = {{"a", "1", &other}};
    ck_assert_int_eq(put(s, t, NULL, "4", "3", NULL, c4, 1, 0), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "1", &cp, &err), 0);
    ck_assert_str_eq(channel_value(cp, "a", NULL), "\"A1\"");
    convo_checkpoint_free(cp);
    convo_close(s);
}
END_TEST

START_TEST(test_namespaces)
{
    convo_store *s = open_store();
    const char *t = tid("ns");
    convo_blob v1 = blob("json", "1", 1), v2 = blob("json", "2", 1);
    convo_channel_in c1[] = {{"x", "1", &v1}};
    convo_channel_in c2[] = {{"x", "1", &v2}};
    ck_assert_int_eq(put(s, t, "", "root-1", NULL, NULL, c1, 1, 0), 0);
    ck_assert_int_eq(put(s, t, "child", "child-1", NULL, NULL, c2, 1, 0), 0);
    ck_assert_int_eq(put(s, t, "", "root-2", "root-1", NULL, NULL, 0, 0), 0);
    convo_checkpoint *cp;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, t, "", NULL, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_id(cp), "root-2");
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_get(s, t, "child", NULL, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_id(cp), "child-1");
    ck_assert_str_eq(convo_checkpoint_ns(cp), "child");
    ck_assert_str_eq(channel_value(cp, "x", NULL), "2"); /* values are per namespace */
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_get(s, t, "", "root-1", &cp, &err), 0);
    ck_assert_str_eq(channel_value(cp, "x", NULL), "1");
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_get(s, t, "child", "root-1", &cp, &err), CONVO_ENOTFOUND);
    convo_close(s);
}
END_TEST

START_TEST(test_pending_writes)
{
    convo_store *s = open_store();
    const char *t = tid("writes");
    ck_assert_int_eq(put(s, t, NULL, "c1", NULL, NULL, NULL, 0, 0), 0);
    convo_error err;
    convo_write_in wb[] = {{1, "out", blob("json", "\"b1\"", 4)}, {0, "out", blob("json", "\"b0\"", 4)}};
    convo_write_in wa[] = {{0, "msgs", blob("msgpack", "\x91\x01", 2)},
                           {-1, "__error__", blob("json", "\"e1\"", 4)}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, "c1", "task-b", "p:b", wb, 2, &err), 0);
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, "c1", "task-a", "p:a", wa, 2, &err), 0);
    /* retry of idx 0 keeps the first value; a negative idx replaces */
    convo_write_in again[] = {{0, "msgs", blob("json", "\"changed\"", 9)},
                              {-1, "__error__", blob("json", "\"e2\"", 4)}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, "c1", "task-a", "p:a", again, 2, &err), 0);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "c1", &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 4);
    const char *want_task[] = {"task-a", "task-a", "task-b", "task-b"};
    int64_t want_idx[] = {-1, 0, 0, 1};
    const char *want_val[] = {"\"e2\"", "\x91\x01", "\"b0\"", "\"b1\""};
    for (size_t i = 0; i < 4; i++) {
        const char *path, *channel;
        int64_t idx;
        convo_blob v;
        const char *task = convo_checkpoint_write(cp, i, &path, &idx, &channel, &v);
        ck_assert_str_eq(task, want_task[i]);
        ck_assert_int_eq(idx, want_idx[i]);
        ck_assert_int_eq(v.len, strlen(want_val[i]));
        ck_assert_mem_eq(v.bytes, want_val[i], v.len);
        ck_assert_str_eq(path, i < 2 ? "p:a" : "p:b");
    }
    const char *channel;
    convo_blob v;
    convo_checkpoint_write(cp, 1, NULL, NULL, &channel, &v);
    ck_assert_str_eq(channel, "msgs");
    ck_assert_str_eq(v.type, "msgpack");
    convo_checkpoint_free(cp);
    convo_close(s);
}
END_TEST

static size_t list_ids(convo_store *s, const convo_checkpoint_list_opts *o, char ids[][64],
                       int expect_rc)
{
    convo_checkpoint_set *set = NULL;
    convo_error err;
    int rc = convo_checkpoint_list(s, o, &set, &err);
    ck_assert_msg(rc == expect_rc, "list: %d %s", rc, err.message);
    size_t n = convo_checkpoint_set_count(set);
    for (size_t i = 0; i < n; i++)
        snprintf(ids[i], 64, "%s", convo_checkpoint_id(convo_checkpoint_set_get(set, i)));
    convo_checkpoint_set_free(set);
    return n;
}

START_TEST(test_list)
{
    convo_store *s = open_store();
    const char *t = tid("list");
    /* ids that do not sort in the order they were put */
    const char *ids[] = {"zeta", "alpha", "mid", "beta", "omega"};
    char meta[128];
    for (int i = 0; i < 5; i++) {
        snprintf(meta, sizeof meta, "{\"source\":\"%s\",\"step\":%d,\"tags\":[\"t%d\",\"all\"],\"x\":{\"y\":%d}}",
                 i % 2 ? "loop" : "input", i, i, i);
        ck_assert_int_eq(put(s, t, NULL, ids[i], i ? ids[i - 1] : NULL, meta, NULL, 0, i), 0);
    }
    ck_assert_int_eq(put(s, t, "sub", "sub-1", NULL, "{\"source\":\"loop\",\"step\":3}", NULL, 0, 0), 0);
    char got[16][64];
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = t;
    o.checkpoint_ns = "";
    ck_assert_int_eq(list_ids(s, &o, got, 0), 5);
    for (int i = 0; i < 5; i++)
        ck_assert_str_eq(got[i], ids[4 - i]); /* newest first */
    o.limit = 2;
    ck_assert_int_eq(list_ids(s, &o, got, 0), 2);
    ck_assert_str_eq(got[0], "omega");
    ck_assert_str_eq(got[1], "beta");
    o.limit = 0;
    o.before = "mid";
    ck_assert_int_eq(list_ids(s, &o, got, 0), 2);
    ck_assert_str_eq(got[0], "alpha");
    ck_assert_str_eq(got[1], "zeta");
    o.before = "zeta";
    ck_assert_int_eq(list_ids(s, &o, got, 0), 0);
    o.before = "no-such-checkpoint";
    list_ids(s, &o, got, CONVO_ENOTFOUND);
    o.before = NULL;
    o.filter_json = "{\"source\":\"loop\",\"step\":3}";
    ck_assert_int_eq(list_ids(s, &o, got, 0), 1);
    ck_assert_str_eq(got[0], "beta");
    o.filter_json = "{\"tags\":[\"all\"],\"x\":{}}";
    ck_assert_int_eq(list_ids(s, &o, got, 0), 5);
    o.filter_json = "{\"x\":{\"y\":2}}";
    ck_assert_int_eq(list_ids(s, &o, got, 0), 1);
    ck_assert_str_eq(got[0], "mid");
    o.filter_json = "{\"source\":\"nope\"}";
    ck_assert_int_eq(list_ids(s, &o, got, 0), 0);
    o.filter_json = "[1]";
    list_ids(s, &o, got, CONVO_EINVAL);
    /* every namespace of the thread */
    o.filter_json = "{\"source\":\"loop\",\"step\":3}";
    o.checkpoint_ns = NULL;
    ck_assert_int_eq(list_ids(s, &o, got, 0), 2);
    ck_assert_str_eq(got[0], "sub-1");
    ck_assert_str_eq(got[1], "beta");
    /* before needs a thread */
    o.thread_id = NULL;
    o.before = "beta";
    list_ids(s, &o, got, CONVO_EINVAL);
    /* across threads */
    const char *t2 = tid("list-other");
    ck_assert_int_eq(put(s, t2, NULL, "other-1", NULL, "{\"source\":\"loop\",\"step\":3}", NULL, 0, 0), 0);
    o.before = NULL;
    size_t n = list_ids(s, &o, got, 0);
    int seen_beta = 0, seen_other = 0;
    for (size_t i = 0; i < n; i++) {
        seen_beta |= strcmp(got[i], "beta") == 0;
        seen_other |= strcmp(got[i], "other-1") == 0;
    }
    ck_assert(seen_beta && seen_other);
    convo_close(s);
}
END_TEST

START_TEST(test_put_same_key_replaces)
{
    convo_store *s = open_store();
    const char *t = tid("replace");
    ck_assert_int_eq(put(s, t, NULL, "a", NULL, "{\"n\":1}", NULL, 0, 1), 0);
    ck_assert_int_eq(put(s, t, NULL, "b", "a", "{\"n\":2}", NULL, 0, 2), 0);
    ck_assert_int_eq(put(s, t, NULL, "a", NULL, "{\"n\":3}", NULL, 0, 3), 0);
    char got[8][64];
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = t;
    ck_assert_int_eq(list_ids(s, &o, got, 0), 2);
    convo_checkpoint *cp;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "a", &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 3);
    ck_assert_ptr_nonnull(strstr(convo_checkpoint_metadata(cp), "3"));
    convo_checkpoint_free(cp);
    convo_close(s);
}
END_TEST

START_TEST(test_delete_removes_everything)
{
    convo_store *s = open_store();
    const char *t = tid("delete");
    const char *msg = "{\"role\":\"user\",\"content\":\"hi\"}";
    convo_error err;
    ck_assert_int_eq(convo_append(s, t, &msg, NULL, 1, NULL, NULL, &err), 0);
    convo_blob v = blob("json", "1", 1);
    convo_channel_in ch[] = {{"a", "1", &v}};
    ck_assert_int_eq(put(s, t, NULL, "c1", NULL, NULL, ch, 1, 1), 0);
    convo_write_in w = {0, "a", blob("json", "2", 1)};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, "c1", "task", "", &w, 1, &err), 0);
    ck_assert_int_eq(convo_thread_delete(s, t, &err), 0);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, NULL, &cp, &err), CONVO_ENOTFOUND);
    /* a late write must not resurrect the checkpoint */
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, "c1", "task", "", &w, 1, &err),
                     CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "c1", &cp, &err), CONVO_ENOTFOUND);
    char got[4][64];
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = t;
    ck_assert_int_eq(list_ids(s, &o, got, 0), 0);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, t, NULL, &h, &err), CONVO_ENOTFOUND);
    /* a new checkpoint with an old channel version does not find the old value */
    convo_channel_in ref[] = {{"a", "1", NULL}};
    ck_assert_int_eq(put(s, t, NULL, "c2", NULL, NULL, ref, 1, 0), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "c2", &cp, &err), 0);
    ck_assert_str_eq(channel_value(cp, "a", NULL), "");
    convo_checkpoint_free(cp);
    convo_close(s);
}
END_TEST

START_TEST(test_prune)
{
    convo_store *s = open_store();
    const char *t = tid("prune");
    convo_blob first = blob("json", "\"first\"", 7);
    char v[8][8];
    convo_blob vals[8];
    for (int i = 0; i < 6; i++) {
        snprintf(v[i], sizeof v[i], "%d", i);
        vals[i] = blob("json", v[i], strlen(v[i]));
        char id[16], parent[16], version[8];
        snprintf(id, sizeof id, "c%d", i);
        snprintf(parent, sizeof parent, "c%d", i - 1);
        snprintf(version, sizeof version, "%d", i);
        /* channel "keep" is written once by c0 and only referenced later */
        convo_channel_in ch[] = {{"keep", "1", i == 0 ? &first : NULL}, {"n", version, &vals[i]}};
        ck_assert_int_eq(put(s, t, NULL, id, i ? parent : NULL, NULL, ch, 2, i), 0);
    }
    ck_assert_int_eq(put(s, t, "other", "o1", NULL, NULL, NULL, 0, 0), 0);
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_prune(s, t, 2, &err), 0);
    char got[8][64];
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = t;
    o.checkpoint_ns = "";
    ck_assert_int_eq(list_ids(s, &o, got, 0), 2);
    ck_assert_str_eq(got[0], "c5");
    ck_assert_str_eq(got[1], "c4");
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "c4", &cp, &err), 0);
    ck_assert_str_eq(channel_value(cp, "keep", NULL), "\"first\"");
    ck_assert_str_eq(channel_value(cp, "n", NULL), "4");
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "c1", &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_checkpoint_get(s, t, "other", NULL, &cp, &err), 0);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_prune(s, tid("prune-unknown"), 1, &err), CONVO_ENOTFOUND);
    convo_close(s);
}
END_TEST

START_TEST(test_limit)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.max_checkpoint_bytes = 1000;
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open_ex(&s, url, &so, &err), 0);
    const char *t = tid("limit");
    static char big[2000];
    memset(big, 'x', sizeof big);
    convo_blob v = blob("bytes", big, sizeof big);
    convo_channel_in ch[] = {{"a", "1", &v}};
    ck_assert_int_eq(put(s, t, NULL, "c1", NULL, NULL, ch, 1, 0), CONVO_ETOOLARGE);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, NULL, &cp, &err), CONVO_ENOTFOUND);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, t, NULL, &h, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(put(s, t, NULL, "c1", NULL, NULL, NULL, 0, 0), 0);
    convo_write_in w = {0, "a", blob("bytes", big, sizeof big)};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, t, NULL, "c1", "task", "", &w, 1, &err),
                     CONVO_ETOOLARGE);
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "c1", &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 0);
    convo_checkpoint_free(cp);
    convo_close(s);
}
END_TEST

START_TEST(test_log_length_and_fork)
{
    /* a framework keeps messages in the log and branches from an older snapshot */
    convo_store *s = open_store();
    const char *t = tid("log"), *branch = tid("log-branch");
    convo_error err;
    char id[16], msg[64];
    for (int turn = 0; turn < 4; turn++) {
        snprintf(msg, sizeof msg, "{\"role\":\"user\",\"content\":\"turn %d\"}", turn);
        const char *m = msg;
        ck_assert_int_eq(convo_append(s, t, &m, NULL, 1, NULL, NULL, &err), 0);
        snprintf(id, sizeof id, "turn-%d", turn);
        ck_assert_int_eq(put(s, t, NULL, id, NULL, NULL, NULL, 0, turn + 1), 0);
    }
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, t, NULL, "turn-1", &cp, &err), 0);
    int64_t upto = convo_checkpoint_log_length(cp);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(upto, 2);
    ck_assert_int_eq(convo_thread_fork(s, t, branch, upto, &err), 0);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, branch, NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 2);
    ck_assert_str_eq(convo_history_message(h, 1, NULL), "{\"role\":\"user\",\"content\":\"turn 1\"}");
    convo_history_free(h);
    convo_close(s);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s URL\n", argv[0]);
        return 2;
    }
    url = argv[1];
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    snprintf(prefix, sizeof prefix, "ckpt-%08x", (unsigned)rand());
    Suite *suite = suite_create("checkpoints");
    TCase *tc = tcase_create("checkpoints");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_put_get_roundtrip);
    tcase_add_test(tc, test_not_found_and_invalid);
    tcase_add_test(tc, test_channels_stored_once);
    tcase_add_test(tc, test_namespaces);
    tcase_add_test(tc, test_pending_writes);
    tcase_add_test(tc, test_list);
    tcase_add_test(tc, test_put_same_key_replaces);
    tcase_add_test(tc, test_delete_removes_everything);
    tcase_add_test(tc, test_prune);
    tcase_add_test(tc, test_limit);
    tcase_add_test(tc, test_log_length_and_fork);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
