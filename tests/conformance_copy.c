/* conformance_copy.c — copying a thread with its checkpoints (convo_fork_opts
 * with_checkpoints: LangGraph's copy_thread), removing chosen checkpoints
 * (convo_checkpoint_delete: delete_for_runs) and pruning (prune's strategies),
 * on every driver, with their failure paths. */
#include "conformance.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const MSGS[] = {"{\"role\":\"user\",\"content\":\"a\"}",
                                   "{\"role\":\"assistant\",\"content\":\"b\"}",
                                   "{\"role\":\"user\",\"content\":\"c\"}"};

static int put(const char *tid, const char *ns, const char *id, const char *parent,
               const char *metadata, const convo_channel_in *ch, size_t n, int64_t log_length,
               convo_error *err)
{
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = metadata;
    cp.body = (convo_blob){"json", id, strlen(id)};
    cp.channels = ch;
    cp.nchannels = n;
    cp.log_length = log_length;
    return convo_checkpoint_put(conf_store, &cp, err);
}

static void put_ok(const char *tid, const char *ns, const char *id, const char *parent,
                   const char *metadata, const convo_channel_in *ch, size_t n, int64_t log_length)
{
    convo_error err;
    ASSERT_OK(put(tid, ns, id, parent, metadata, ch, n, log_length, &err), err);
}

static void writes_ok(const char *tid, const char *ns, const char *id, const char *task,
                      const convo_write_in *w, size_t n)
{
    convo_error err;
    ASSERT_OK(convo_checkpoint_put_writes(conf_store, tid, ns, id, task, "path", w, n, &err),
              err);
}

/* A source thread: 3 messages, an extra, two namespaces, values first sent by
 * an ancestor, a checkpoint without body type, pending writes of two tasks. */
static void make_source(const char *src)
{
    conf_append(conf_store, src, MSGS, 3);
    conf_save_extra_ok(conf_store, src, "{\"title\":\"t\",\"n\":1}");
    convo_blob v1 = {"json", "[1]", 3}, v2 = {"msgpack", "\x91\x02", 2}, v3 = {"bytes", "", 0};
    convo_channel_in a[] = {{"a", "1", &v1}, {"b", "1", &v3}};
    convo_channel_in b[] = {{"a", "1", NULL}, {"b", "2", &v2}, {"c", "1", NULL}};
    put_ok(src, "", "cp-1", NULL, "{\"step\":1,\"source\":\"input\"}", a, 2, 1);
    put_ok(src, "child:1", "sub-1", NULL, "{\"step\":1,\"parents\":{\"\":\"cp-1\"}}", a, 1, 1);
    put_ok(src, "", "cp-2", "cp-1", "{\"step\":2,\"source\":\"loop\"}", b, 3, 3);
    convo_write_in w[] = {{0, "x", {"json", "\"w0\"", 4}}, {1, "y", {"bytes", "\0\1", 2}},
                          {-1, "__error__", {"json", "\"boom\"", 6}}};
    writes_ok(src, "", "cp-2", "task-b", w, 3);
    writes_ok(src, "", "cp-2", "task-a", w, 1);
    writes_ok(src, "child:1", "sub-1", "task-s", w + 1, 1);
}

static convo_checkpoint_set *list_of(const char *tid, const char *ns)
{
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    lo.checkpoint_ns = ns;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_list(conf_store, &lo, &set, &err), err);
    return set;
}

static size_t count_of(const char *tid, const char *ns)
{
    convo_checkpoint_set *set = list_of(tid, ns);
    size_t n = convo_checkpoint_set_count(set);
    convo_checkpoint_set_free(set);
    return n;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int same_blob(convo_blob a, convo_blob b)
{
    return same_str(a.type, b.type) && a.len == b.len &&
           (a.len == 0 || memcmp(a.bytes, b.bytes, a.len) == 0);
}

/* d must be s under another thread id: everything but the thread and created_at. */
static void assert_same_checkpoint(const convo_checkpoint *s, const convo_checkpoint *d)
{
    const char *id = convo_checkpoint_id(s);
    ck_assert_str_eq(convo_checkpoint_ns(d), convo_checkpoint_ns(s));
    ck_assert_str_eq(convo_checkpoint_id(d), id);
    ck_assert_msg(same_str(convo_checkpoint_parent_id(d), convo_checkpoint_parent_id(s)),
                  "%s: parent differs", id);
    conf_assert_json_eq(convo_checkpoint_metadata(d), convo_checkpoint_metadata(s), id);
    ck_assert_msg(same_blob(convo_checkpoint_body(d), convo_checkpoint_body(s)), "%s body", id);
    ck_assert_int_eq(convo_checkpoint_log_length(d), convo_checkpoint_log_length(s));
    ck_assert_uint_eq(convo_checkpoint_channel_count(d), convo_checkpoint_channel_count(s));
    for (size_t i = 0; i < convo_checkpoint_channel_count(s); i++) {
        const char *vs, *vd;
        convo_blob bs, bd;
        ck_assert_str_eq(convo_checkpoint_channel(d, i, &vd, &bd),
                         convo_checkpoint_channel(s, i, &vs, &bs));
        ck_assert_str_eq(vd, vs);
        ck_assert_msg(same_blob(bd, bs), "%s channel %zu value differs", id, i);
    }
    ck_assert_uint_eq(convo_checkpoint_write_count(d), convo_checkpoint_write_count(s));
    for (size_t i = 0; i < convo_checkpoint_write_count(s); i++) {
        const char *ps, *pd, *cs, *cd;
        int64_t is, id2;
        convo_blob bs, bd;
        ck_assert_str_eq(convo_checkpoint_write(d, i, &pd, &id2, &cd, &bd),
                         convo_checkpoint_write(s, i, &ps, &is, &cs, &bs));
        ck_assert_str_eq(pd, ps);
        ck_assert_int_eq(id2, is);
        ck_assert_str_eq(cd, cs);
        ck_assert_msg(same_blob(bd, bs), "%s write %zu value differs", id, i);
    }
}

/* dst's checkpoints must be src's, in the same listing order, each the same
 * by get as well (get resolves values through the thread's own store). */
static void assert_same_checkpoints(const char *src, const char *dst, size_t expected)
{
    convo_checkpoint_set *s = list_of(src, NULL), *d = list_of(dst, NULL);
    ck_assert_uint_eq(convo_checkpoint_set_count(d), expected);
    for (size_t i = 0, j = 0; i < convo_checkpoint_set_count(s) && j < expected; i++) {
        const convo_checkpoint *a = convo_checkpoint_set_get(s, i);
        const convo_checkpoint *b = convo_checkpoint_set_get(d, j);
        if (strcmp(convo_checkpoint_id(a), convo_checkpoint_id(b)) != 0)
            continue; /* not copied (upto) */
        ck_assert_str_eq(convo_checkpoint_thread_id(b), dst);
        assert_same_checkpoint(a, b);
        convo_checkpoint *ga, *gb;
        convo_error err;
        ASSERT_OK(convo_checkpoint_get(conf_store, src, convo_checkpoint_ns(a),
                                       convo_checkpoint_id(a), &ga, &err), err);
        ASSERT_OK(convo_checkpoint_get(conf_store, dst, convo_checkpoint_ns(a),
                                       convo_checkpoint_id(a), &gb, &err), err);
        assert_same_checkpoint(ga, gb);
        convo_checkpoint_free(ga);
        convo_checkpoint_free(gb);
        j++;
    }
    convo_checkpoint_set_free(s);
    convo_checkpoint_set_free(d);
}

static int copy(const char *src, const char *dst, int64_t upto, convo_error *err)
{
    convo_fork_opts o = CONVO_FORK_OPTS_INIT;
    o.with_checkpoints = 1;
    return convo_thread_fork_ex(conf_store, src, dst, upto, &o, err);
}

START_TEST(test_copy_thread)
{
    char src[256], dst[256];
    TID(src, "src");
    TID(dst, "dst");
    make_source(src);
    convo_error err;
    ASSERT_OK(copy(src, dst, -1, &err), err);
    conf_assert_same_prefix(conf_store, src, dst, 3);
    conf_assert_extra(conf_store, dst, "{\"title\":\"t\",\"n\":1}");
    assert_same_checkpoints(src, dst, 3);
    ck_assert_uint_eq(count_of(dst, ""), 2);
    ck_assert_uint_eq(count_of(dst, "child:1"), 1);
    /* the latest of each namespace is the source's */
    convo_checkpoint *cp;
    ASSERT_OK(convo_checkpoint_get(conf_store, dst, "", NULL, &cp, &err), err);
    ck_assert_str_eq(convo_checkpoint_id(cp), "cp-2");
    convo_checkpoint_free(cp);
    /* the copy is a thread of its own: writing to it leaves the source alone */
    convo_write_in w = {5, "z", {"json", "1", 1}};
    writes_ok(dst, "", "cp-2", "task-c", &w, 1);
    put_ok(dst, "", "cp-3", "cp-2", "{}", NULL, 0, 3);
    ck_assert_uint_eq(count_of(src, ""), 2);
    ASSERT_OK(convo_checkpoint_get(conf_store, src, "", "cp-2", &cp, &err), err);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 4);
    convo_checkpoint_free(cp);
    /* deleting the source leaves the copy whole */
    ASSERT_OK(convo_thread_delete(conf_store, src, &err), err);
    ASSERT_OK(convo_checkpoint_get(conf_store, dst, "", "cp-2", &cp, &err), err);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 5);
    const char *version;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &version, &v), "a");
    ck_assert_msg(v.type && v.len == 3 && memcmp(v.bytes, "[1]", 3) == 0,
                  "a value first sent by the parent is resolved in the copy");
    convo_checkpoint_free(cp);
}
END_TEST

/* Copying up to a length keeps the checkpoints within it; a source with
 * checkpoints and no messages copies too (LangGraph's plain saver use). */
START_TEST(test_copy_thread_upto_and_no_messages)
{
    char src[256], dst[256], bare[256], bare2[256];
    TID(src, "src");
    TID(dst, "dst");
    TID(bare, "bare");
    TID(bare2, "bare2");
    make_source(src);
    convo_error err;
    ASSERT_OK(copy(src, dst, 2, &err), err);
    ck_assert_int_eq(conf_length(conf_store, dst), 2);
    assert_same_checkpoints(src, dst, 2); /* cp-2 refers to 3 messages */
    put_ok(bare, "", "only", NULL, "{\"run_id\":\"r\"}", NULL, 0, 0);
    ASSERT_OK(copy(bare, bare2, -1, &err), err);
    ck_assert_int_eq(conf_length(conf_store, bare2), 0);
    assert_same_checkpoints(bare, bare2, 1);
}
END_TEST

/* Unknown source, existing target, bad input: an error, and nothing written. */
START_TEST(test_copy_thread_failures)
{
    char src[256], dst[256], missing[256], other[256];
    TID(src, "src");
    TID(dst, "dst");
    TID(missing, "missing");
    TID(other, "other");
    make_source(src);
    convo_error err;
    ASSERT_FAILS(copy(missing, dst, -1, &err), err, CONVO_ENOTFOUND);
    ck_assert_int_eq(conf_length(conf_store, dst), -1);
    ck_assert_uint_eq(count_of(dst, NULL), 0);
    /* the target exists: it keeps what it had */
    conf_append(conf_store, other, MSGS, 1);
    put_ok(other, "", "mine", NULL, "{}", NULL, 0, 1);
    ASSERT_FAILS(copy(src, other, -1, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, other), 1);
    convo_checkpoint_set *set = list_of(other, NULL);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    ck_assert_str_eq(convo_checkpoint_id(convo_checkpoint_set_get(set, 0)), "mine");
    convo_checkpoint_set_free(set);
    /* bad input */
    convo_fork_opts o = CONVO_FORK_OPTS_INIT;
    o.with_checkpoints = 2;
    ASSERT_FAILS(convo_thread_fork_ex(conf_store, src, dst, -1, &o, &err), err, CONVO_EINVAL);
    o.with_checkpoints = 1;
    o.version = CONVO_FORK_OPTS_VERSION + 1;
    ASSERT_FAILS(convo_thread_fork_ex(conf_store, src, dst, -1, &o, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(copy(src, src, -1, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(copy(src, "bad\nid", -1, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(copy(src, dst, 4, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(copy(src, dst, -2, &err), err, CONVO_EINVAL);
    o = (convo_fork_opts)CONVO_FORK_OPTS_INIT;
    o.with_checkpoints = 1;
    o.expected_generation = 7;
    ASSERT_FAILS(convo_thread_fork_ex(conf_store, src, dst, -1, &o, &err), err,
                 CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, dst), -1);
    ck_assert_uint_eq(count_of(dst, NULL), 0);
    /* and the source is as it was */
    ck_assert_uint_eq(count_of(src, NULL), 3);
}
END_TEST

/* The drivers that copy a thread in one atomic step (docs/checkpoints.md);
 * the others replay the checkpoints and remove the target when that fails. */
static int copies_in_one_step(void)
{
    static const char *const atomic[] = {"memory", "sqlite", "postgres", "redis", "mongo"};
    for (size_t i = 0; i < sizeof atomic / sizeof *atomic; i++)
        if (strcmp(convo_store_driver(conf_store), atomic[i]) == 0)
            return 1;
    return 0;
}

/* A copy is whole or not there: through a handle whose checkpoint limit the
 * second checkpoint passes, a replay fails midway and removes the target; a
 * copy in one step does not replay, so it copies everything. */
START_TEST(test_copy_thread_all_or_nothing)
{
    SKIP_IF_PRIVATE(); /* a second handle on the same data */
    char src[256], dst[256], big[600];
    TID(src, "src");
    TID(dst, "dst");
    memset(big, 'x', sizeof big);
    convo_blob v = {"bytes", big, sizeof big};
    convo_channel_in ch = {"a", "1", &v};
    conf_append(conf_store, src, MSGS, 1);
    put_ok(src, "", "small", NULL, "{}", NULL, 0, 1);
    put_ok(src, "", "large", "small", "{}", &ch, 1, 1);
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.max_checkpoint_bytes = 256;
    convo_store *small = conf_open_ex(&so);
    convo_fork_opts o = CONVO_FORK_OPTS_INIT;
    o.with_checkpoints = 1;
    convo_error err;
    int rc = convo_thread_fork_ex(small, src, dst, -1, &o, &err);
    convo_close(small);
    if (copies_in_one_step()) {
        ASSERT_OK(rc, err);
        assert_same_checkpoints(src, dst, 2);
    } else {
        ASSERT_FAILS(rc, err, CONVO_ETOOLARGE);
        ck_assert_int_eq(conf_length(conf_store, dst), -1);
        ck_assert_uint_eq(count_of(dst, NULL), 0);
    }
}
END_TEST

/* Items of a and b (channel or write i, per `write`) must be the same. */
static void assert_same_items(const convo_checkpoint *a, const convo_checkpoint *b, size_t i,
                              int write)
{
    convo_items x, y;
    int hx = write ? convo_checkpoint_write_items(a, i, &x) : convo_checkpoint_channel_items(a, i, &x);
    int hy = write ? convo_checkpoint_write_items(b, i, &y) : convo_checkpoint_channel_items(b, i, &y);
    ck_assert_int_eq(hy, hx);
    if (!hx)
        return;
    ck_assert_uint_eq(y.n, x.n);
    for (size_t k = 0; k < x.n; k++) {
        ck_assert_str_eq(y.items[k], x.items[k]);
        ck_assert_int_eq(y.seqs[k], x.seqs[k]);
    }
}

static void put_items_ok(const char *tid, const char *id, const char *parent,
                         const char *const *items, size_t n)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = items;
    it.n = n;
    it.log = 1;
    const convo_items_in *per[1] = {&it};
    convo_channel_in c = {"messages", id, NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.channels = &c;
    cp.nchannels = 1;
    cp.channel_items = per;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put(conf_store, &cp, &err), err);
}

/* Checkpoints whose messages channel lives in the log (log references) copy
 * with it: the copy resolves the same items at the same seqs, and one past
 * `upto` is left out. */
START_TEST(test_copy_thread_log_references)
{
    char src[256], dst[256], part[256];
    TID(src, "src");
    TID(dst, "dst");
    TID(part, "part");
    const char *const turn1[] = {MSGS[0], MSGS[1]}, *const turn2[] = {MSGS[0], MSGS[1], MSGS[2]};
    put_items_ok(src, "c1", NULL, turn1, 2);
    put_items_ok(src, "c2", "c1", turn2, 3);
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &MSGS[2];
    it.n = 1;
    const convo_items_in *per[1] = {&it};
    convo_write_in w = {0, "messages", {NULL, NULL, 0}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = src;
    in.checkpoint_id = "c2";
    in.task_id = "task";
    in.writes = &w;
    in.n = 1;
    in.items = per;
    convo_error err;
    ASSERT_OK(convo_checkpoint_put_writes_ex(conf_store, &in, &err), err);
    ck_assert_int_eq(conf_length(conf_store, src), 3);
    ASSERT_OK(copy(src, dst, -1, &err), err);
    conf_assert_same_prefix(conf_store, src, dst, 3);
    assert_same_checkpoints(src, dst, 2);
    for (int k = 0; k < 2; k++) {
        const char *id = k ? "c2" : "c1";
        convo_checkpoint *a, *b;
        ASSERT_OK(convo_checkpoint_get(conf_store, src, "", id, &a, &err), err);
        ASSERT_OK(convo_checkpoint_get(conf_store, dst, "", id, &b, &err), err);
        for (size_t i = 0; i < convo_checkpoint_channel_count(a); i++)
            assert_same_items(a, b, i, 0);
        for (size_t i = 0; i < convo_checkpoint_write_count(a); i++)
            assert_same_items(a, b, i, 1);
        ck_assert_int_eq(convo_checkpoint_log_length(b), convo_checkpoint_log_length(a));
        convo_checkpoint_free(a);
        convo_checkpoint_free(b);
    }
    ASSERT_OK(copy(src, part, 2, &err), err);
    convo_checkpoint_set *set = list_of(part, NULL);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    ck_assert_str_eq(convo_checkpoint_id(convo_checkpoint_set_get(set, 0)), "c1");
    convo_checkpoint_set_free(set);
}
END_TEST

/* A version 1 options struct (no with_checkpoints) still forks messages only. */
START_TEST(test_fork_opts_version_1)
{
    char src[256], dst[256];
    TID(src, "src");
    TID(dst, "dst");
    make_source(src);
    struct {
        unsigned int version;
        int64_t expected_generation;
    } v1 = {1, -1};
    convo_error err;
    ASSERT_OK(convo_thread_fork_ex(conf_store, src, dst, -1, (const convo_fork_opts *)&v1, &err),
              err);
    conf_assert_same_prefix(conf_store, src, dst, 3);
    ck_assert_uint_eq(count_of(dst, NULL), 0);
}
END_TEST

/* The copy's dump holds the same checkpoints and writes as the source's. */
START_TEST(test_copy_thread_export)
{
    char src[256], dst[256];
    TID(src, "src");
    TID(dst, "dst");
    make_source(src);
    convo_error err;
    ASSERT_OK(copy(src, dst, -1, &err), err);
    convo_dump_stats st[2];
    const char *ids[2] = {src, dst};
    for (int i = 0; i < 2; i++) {
        conf_buf buf = {0};
        memset(&st[i], 0, sizeof st[i]);
        ASSERT_OK(convo_export(conf_store, &ids[i], 1, conf_buf_write, &buf, NULL, &st[i], &err),
                  err);
        free(buf.data);
    }
    ck_assert_uint_eq(st[1].messages, 3);
    ck_assert_uint_eq(st[1].checkpoints, st[0].checkpoints);
    ck_assert_uint_eq(st[1].checkpoints, 3);
    ck_assert_uint_eq(st[1].writes, st[0].writes);
    ck_assert_uint_eq(st[1].writes, 5);
}
END_TEST

/* ------------------------------------------------------------------ delete */

static uint64_t delete_where(const char *tid, const char *ns, const char *filter)
{
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = tid;
    lo.checkpoint_ns = ns;
    lo.filter_json = filter;
    uint64_t removed = 99;
    convo_error err;
    ASSERT_OK(convo_checkpoint_delete(conf_store, &lo, &removed, &err), err);
    return removed;
}

/* delete_for_runs: every thread's and namespace's checkpoints of a run go,
 * with their writes; values a remaining checkpoint lists stay. */
START_TEST(test_checkpoint_delete_runs)
{
    char t1[256], t2[256], r1[300], r2[300], f1[400], f2[400], md[400];
    TID(t1, "t1");
    TID(t2, "t2");
    snprintf(r1, sizeof r1, "%s-run-1", conf_prefix);
    snprintf(r2, sizeof r2, "%s-run-2", conf_prefix);
    snprintf(f1, sizeof f1, "{\"run_id\":\"%s\"}", r1);
    snprintf(f2, sizeof f2, "{\"run_id\":\"%s\"}", r2);
    convo_blob v1 = {"json", "\"one\"", 5};
    convo_channel_in ch1 = {"a", "1", &v1}, ch1again = {"a", "1", NULL};
    put_ok(t1, "", "c1", NULL, f1, &ch1, 1, 0);
    put_ok(t1, "", "c2", "c1", f2, &ch1again, 1, 0);
    put_ok(t1, "child:1", "s1", NULL, f1, NULL, 0, 0);
    put_ok(t2, "", "d1", NULL, f1, NULL, 0, 0);
    snprintf(md, sizeof md, "{\"run_id\":\"%s\",\"step\":3}", r2);
    put_ok(t2, "", "d2", "d1", md, NULL, 0, 0);
    convo_write_in w = {0, "x", {"json", "1", 1}};
    writes_ok(t1, "", "c1", "task", &w, 1);
    writes_ok(t1, "", "c2", "task", &w, 1);
    ck_assert_uint_eq(delete_where(NULL, NULL, f1), 3);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ASSERT_FAILS(convo_checkpoint_get(conf_store, t1, "", "c1", &cp, &err), err,
                 CONVO_ENOTFOUND);
    ASSERT_FAILS(convo_checkpoint_get(conf_store, t1, "child:1", "s1", &cp, &err), err,
                 CONVO_ENOTFOUND);
    ck_assert_uint_eq(count_of(t2, NULL), 1);
    /* c2 keeps the value c1 sent, and its own write */
    ASSERT_OK(convo_checkpoint_get(conf_store, t1, "", "c2", &cp, &err), err);
    const char *version;
    convo_blob v;
    convo_checkpoint_channel(cp, 0, &version, &v);
    ck_assert_msg(same_blob(v, v1), "the value c2 lists survives c1's removal");
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    /* a write to a removed checkpoint does not bring it back */
    ASSERT_FAILS(convo_checkpoint_put_writes(conf_store, t1, "", "c1", "task", "", &w, 1, &err),
                 err, CONVO_ENOTFOUND);
    /* nothing matches any more: not an error */
    ck_assert_uint_eq(delete_where(NULL, NULL, f1), 0);
    /* one thread and namespace only */
    ck_assert_uint_eq(delete_where(t2, "child:1", f2), 0);
    ck_assert_uint_eq(delete_where(t2, "", f2), 1);
    ck_assert_uint_eq(count_of(t1, NULL), 1);
    ck_assert_uint_eq(delete_where(t1, NULL, NULL), 1);
    ck_assert_uint_eq(count_of(t1, NULL), 0);
    /* the threads and their messages stay */
    ck_assert_int_eq(conf_length(conf_store, t1), 0);
    /* a thread nobody wrote */
    char none[256];
    TID(none, "none");
    ck_assert_uint_eq(delete_where(none, NULL, NULL), 0);
}
END_TEST

START_TEST(test_checkpoint_delete_bad_input)
{
    char t[256];
    TID(t, "t");
    put_ok(t, "", "c1", NULL, "{\"run_id\":\"x\"}", NULL, 0, 0);
    convo_error err;
    uint64_t removed = 5;
    ASSERT_FAILS(convo_checkpoint_delete(conf_store, NULL, &removed, &err), err, CONVO_EINVAL);
    ck_assert_uint_eq(removed, 0);
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = t;
    lo.filter_json = "[1]";
    ASSERT_FAILS(convo_checkpoint_delete(conf_store, &lo, &removed, &err), err, CONVO_EINVAL);
    lo.filter_json = "{";
    ASSERT_FAILS(convo_checkpoint_delete(conf_store, &lo, NULL, &err), err, CONVO_EINVAL);
    lo.filter_json = NULL;
    lo.thread_id = "bad\001id";
    ASSERT_FAILS(convo_checkpoint_delete(conf_store, &lo, NULL, &err), err, CONVO_EINVAL);
    lo.thread_id = t;
    lo.before = "no-such-checkpoint";
    ASSERT_FAILS(convo_checkpoint_delete(conf_store, &lo, NULL, &err), err, CONVO_ENOTFOUND);
    lo.before = NULL;
    lo.version = 99;
    ASSERT_FAILS(convo_checkpoint_delete(conf_store, &lo, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_checkpoint_delete(NULL, &lo, NULL, &err), err, CONVO_EINVAL);
    ck_assert_uint_eq(count_of(t, NULL), 1);
}
END_TEST

/* prune's strategies: keep_latest (1 per namespace, with its writes), delete (0). */
START_TEST(test_prune_strategies)
{
    char t[256], missing[256];
    TID(t, "t");
    TID(missing, "missing");
    put_ok(t, "", "c1", NULL, "{}", NULL, 0, 0);
    put_ok(t, "", "c2", "c1", "{}", NULL, 0, 0);
    put_ok(t, "child:1", "s1", NULL, "{}", NULL, 0, 0);
    put_ok(t, "child:1", "s2", "s1", "{}", NULL, 0, 0);
    put_ok(t, "", "c3", "c2", "{}", NULL, 0, 0);
    convo_write_in w = {0, "ch", {"json", "\"val\"", 5}};
    writes_ok(t, "", "c3", "task", &w, 1);
    convo_error err;
    ASSERT_OK(convo_checkpoint_prune(conf_store, t, 1, &err), err);
    convo_checkpoint_set *set = list_of(t, NULL);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 2);
    convo_checkpoint_set_free(set);
    convo_checkpoint *cp;
    ASSERT_OK(convo_checkpoint_get(conf_store, t, "", NULL, &cp, &err), err);
    ck_assert_str_eq(convo_checkpoint_id(cp), "c3");
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    ASSERT_OK(convo_checkpoint_get(conf_store, t, "child:1", NULL, &cp, &err), err);
    ck_assert_str_eq(convo_checkpoint_id(cp), "s2");
    convo_checkpoint_free(cp);
    ASSERT_OK(convo_checkpoint_prune(conf_store, t, 0, &err), err);
    ck_assert_uint_eq(count_of(t, NULL), 0);
    ASSERT_FAILS(convo_checkpoint_prune(conf_store, missing, 1, &err), err, CONVO_ENOTFOUND);
}
END_TEST

void conf_add_copy_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "copy_thread");
    tcase_add_test(tc, test_copy_thread);
    tcase_add_test(tc, test_copy_thread_upto_and_no_messages);
    tcase_add_test(tc, test_copy_thread_failures);
    tcase_add_test(tc, test_copy_thread_all_or_nothing);
    tcase_add_test(tc, test_copy_thread_log_references);
    tcase_add_test(tc, test_fork_opts_version_1);
    tcase_add_test(tc, test_copy_thread_export);
    tc = conf_tcase(s, "checkpoint_delete");
    tcase_add_test(tc, test_checkpoint_delete_runs);
    tcase_add_test(tc, test_checkpoint_delete_bad_input);
    tcase_add_test(tc, test_prune_strategies);
}
