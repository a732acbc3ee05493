/* conformance_prefix.c — a channel list given as the log's first k messages
 * and the items after them (convo_checkpoint_in v5 channel_log_prefix): the
 * put of a grown conversation passes only what is new, and stores and gives
 * back the same as the list spelled out; bad prefixes are clear errors with
 * nothing written; a version 4 caller's struct has no such field. */
#include "conformance.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *M[] = {
    "{\"role\":\"user\",\"content\":\"one\",\"id\":\"p0\"}",
    "{\"role\":\"assistant\",\"content\":\"two\",\"id\":\"p1\"}",
    "{\"role\":\"user\",\"content\":\"three\",\"id\":\"p2\"}",
    "{\"role\":\"assistant\",\"content\":\"four\",\"id\":\"p3\"}",
    "{\"role\":\"user\",\"content\":\"five\",\"id\":\"p4\"}",
};
static const char *BRANCH = "{\"role\":\"user\",\"content\":\"instead\",\"id\":\"b0\"}";

/* Puts checkpoint id (parent or NULL) whose messages channel is the log's
 * first `prefix` messages and then texts[0..n) (seqs: NULL or n entries);
 * seqs_out (n entries) may be NULL. version: of the struct. */
static int put_prefixed(const char *tid, const char *id, const char *parent, int64_t prefix,
                        const char *const *texts, const int64_t *seqs, size_t n,
                        int64_t *seqs_out, unsigned version, convo_error *err)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = texts;
    it.seqs = seqs;
    it.n = n;
    it.seqs_out = seqs_out;
    it.log = 1;
    const convo_items_in *per[1] = {&it};
    int64_t prefixes[1] = {prefix};
    convo_channel_in c = {"messages", id, NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.version = version;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.channels = &c;
    cp.nchannels = 1;
    cp.channel_items = per;
    cp.channel_log_prefix = prefixes;
    return convo_checkpoint_put(conf_store, &cp, err);
}

/* The thread's log is texts[0..n). */
static void assert_log(const char *tid, const char *const *texts, size_t n)
{
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    convo_history *h = NULL;
    convo_error err;
    ASSERT_OK(convo_load(conf_store, tid, &o, &h, &err), err);
    ck_assert_uint_eq(convo_history_count(h), n);
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *m = convo_history_message(h, i, &len);
        ck_assert_uint_eq(len, strlen(texts[i]));
        ck_assert(memcmp(m, texts[i], len) == 0);
    }
    convo_history_free(h);
}

/* Checkpoint id's messages channel: want[i] with seq seqs[i]. */
static void assert_list(const char *tid, const char *id, const char *const *want,
                        const int64_t *seqs, size_t n)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ASSERT_OK(convo_checkpoint_get(conf_store, tid, "", id, &cp, &err), err);
    convo_items it;
    ck_assert_int_eq(convo_checkpoint_channel_items(cp, 0, &it), 1);
    ck_assert_uint_eq(it.n, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(it.items[i], want[i]);
        ck_assert_int_eq(it.seqs[i], seqs[i]);
    }
    convo_checkpoint_free(cp);
}

START_TEST(test_prefix_put_appends_only_the_new)
{
    char tid[256];
    TID(tid, "t");
    convo_error err;
    int64_t out[2] = {-7, -7};
    /* the first checkpoint spells its list out; then each passes only the new */
    ASSERT_OK(put_prefixed(tid, "c1", NULL, 0, M, NULL, 1, out, CONVO_CHECKPOINT_IN_VERSION, &err),
              err);
    ck_assert_int_eq(out[0], 0);
    ASSERT_OK(put_prefixed(tid, "c3", "c1", 1, M + 1, NULL, 2, out, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ck_assert_int_eq(out[0], 1);
    ck_assert_int_eq(out[1], 2);
    /* an item the caller knows by its seq, then a new one */
    int64_t seqs[2] = {2, -1};
    const char *texts[2] = {NULL, M[3]};
    ASSERT_OK(put_prefixed(tid, "c4", "c3", 2, texts, seqs, 2, out, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ck_assert_int_eq(out[0], 2);
    ck_assert_int_eq(out[1], 3);
    /* nothing new: the whole list is the prefix */
    ASSERT_OK(put_prefixed(tid, "c4b", "c4", 4, NULL, NULL, 0, NULL, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ASSERT_OK(put_prefixed(tid, "c5", "c4b", 4, M + 4, NULL, 1, out, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ck_assert_int_eq(out[0], 4);
    /* each message once in the log; each checkpoint its whole list */
    assert_log(tid, M, 5);
    const int64_t all[5] = {0, 1, 2, 3, 4};
    assert_list(tid, "c1", M, all, 1);
    assert_list(tid, "c3", M, all, 3);
    assert_list(tid, "c4", M, all, 4);
    assert_list(tid, "c4b", M, all, 4);
    assert_list(tid, "c5", M, all, 5);
}
END_TEST

START_TEST(test_prefix_branch_stays_inline)
{
    char tid[256];
    TID(tid, "t");
    convo_error err;
    ASSERT_OK(put_prefixed(tid, "c3", NULL, 0, M, NULL, 3, NULL, CONVO_CHECKPOINT_IN_VERSION, &err),
              err);
    /* from c3 (three messages) a branch keeping two and adding another: not
     * the parent's list grown, so the new item stays inline */
    int64_t out[1] = {-7};
    ASSERT_OK(put_prefixed(tid, "b3", "c3", 2, &BRANCH, NULL, 1, out, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ck_assert_int_eq(out[0], -1);
    assert_log(tid, M, 3);
    const char *want[3] = {M[0], M[1], BRANCH};
    const int64_t seqs[3] = {0, 1, -1};
    assert_list(tid, "b3", want, seqs, 3);
}
END_TEST

START_TEST(test_prefix_bad_input_writes_nothing)
{
    char tid[256];
    TID(tid, "t");
    convo_error err;
    ASSERT_OK(put_prefixed(tid, "c3", NULL, 0, M, NULL, 3, NULL, CONVO_CHECKPOINT_IN_VERSION, &err),
              err);
    /* a negative prefix */
    ck_assert_int_eq(put_prefixed(tid, "x1", "c3", -1, M + 3, NULL, 1, NULL,
                                  CONVO_CHECKPOINT_IN_VERSION, &err), CONVO_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "log prefix"));
    /* past the log: the thread has 3 messages (the parent says 3: one read) */
    int64_t out[1] = {-7};
    ck_assert_int_eq(put_prefixed(tid, "x2", "c3", 4, M + 4, NULL, 1, out,
                                  CONVO_CHECKPOINT_IN_VERSION, &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "past the thread's 3"));
    ck_assert_int_eq(out[0], -7);
    /* and with no parent at all */
    ck_assert_int_eq(put_prefixed(tid, "x3", NULL, 9, M + 4, NULL, 1, NULL,
                                  CONVO_CHECKPOINT_IN_VERSION, &err), CONVO_ECONFLICT);
    /* a prefix on a channel without items */
    int64_t prefixes[1] = {2};
    convo_blob v = {"json", "[]", 2};
    convo_channel_in c = {"messages", "x4", &v};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = "x4";
    cp.channels = &c;
    cp.nchannels = 1;
    cp.channel_log_prefix = prefixes;
    ck_assert_int_eq(convo_checkpoint_put(conf_store, &cp, &err), CONVO_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "no items"));
    /* nothing of it was written */
    assert_log(tid, M, 3);
    const char *ids[] = {"x1", "x2", "x3", "x4"};
    for (size_t i = 0; i < 4; i++) {
        convo_checkpoint *got = NULL;
        ck_assert_int_eq(convo_checkpoint_get(conf_store, tid, "", ids[i], &got, &err),
                         CONVO_ENOTFOUND);
    }
}
END_TEST

START_TEST(test_prefix_not_read_from_a_version_4_struct)
{
    char tid[256];
    TID(tid, "t");
    convo_error err;
    ASSERT_OK(put_prefixed(tid, "c3", NULL, 0, M, NULL, 3, NULL, CONVO_CHECKPOINT_IN_VERSION, &err),
              err);
    /* a version 4 caller's struct ends before channel_log_prefix: what lies
     * there is not read, and its list is the items it gives */
    ASSERT_OK(put_prefixed(tid, "v4", "c3", 3, M, NULL, 5, NULL, 4, &err), err);
    assert_log(tid, M, 5);
    const int64_t all[5] = {0, 1, 2, 3, 4};
    assert_list(tid, "v4", M, all, 5);
}
END_TEST

START_TEST(test_prefix_compared_run_by_run)
{
    char tid[256];
    TID(tid, "t");
    convo_error err;
    int64_t out[3] = {-7, -7, -7};
    ASSERT_OK(put_prefixed(tid, "c3", NULL, 0, M, NULL, 3, NULL, CONVO_CHECKPOINT_IN_VERSION, &err),
              err);
    /* the parent's one run [0, 3) against a prefix of 1 and two items by seq:
     * the same list cut elsewhere, so the new item enters the log */
    int64_t seqs[3] = {1, 2, -1};
    const char *texts[3] = {NULL, NULL, M[3]};
    ASSERT_OK(put_prefixed(tid, "c4", "c3", 1, texts, seqs, 3, out, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ck_assert_int_eq(out[0], 1);
    ck_assert_int_eq(out[1], 2);
    ck_assert_int_eq(out[2], 3);
    /* the items by seq out of order: not the parent's list grown, the new
     * one stays inline */
    int64_t swapped[3] = {2, 1, -1};
    const char *texts2[3] = {NULL, NULL, M[4]};
    ASSERT_OK(put_prefixed(tid, "x4", "c4", 1, texts2, swapped, 3, out,
                           CONVO_CHECKPOINT_IN_VERSION, &err), err);
    ck_assert_int_eq(out[2], -1);
    assert_log(tid, M, 4);
    const int64_t all[4] = {0, 1, 2, 3};
    assert_list(tid, "c4", M, all, 4);
    const char *want[4] = {M[0], M[2], M[1], M[4]};
    const int64_t got[4] = {0, 2, 1, -1};
    assert_list(tid, "x4", want, got, 4);
}
END_TEST

START_TEST(test_prefix_over_a_branch)
{
    char tid[256];
    TID(tid, "t");
    convo_error err;
    ASSERT_OK(put_prefixed(tid, "c3", NULL, 0, M, NULL, 3, NULL, CONVO_CHECKPOINT_IN_VERSION, &err),
              err);
    /* b3 is [0, 2) and an inline item; its child keeps all three (the inline
     * one by its text) and adds one: the parent's list grown, so the new item
     * enters the log after the thread's three messages */
    ASSERT_OK(put_prefixed(tid, "b3", "c3", 2, &BRANCH, NULL, 1, NULL,
                           CONVO_CHECKPOINT_IN_VERSION, &err), err);
    const char *tail[2] = {BRANCH, M[3]};
    int64_t out[2] = {-7, -7};
    ASSERT_OK(put_prefixed(tid, "b4", "b3", 2, tail, NULL, 2, out, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ck_assert_int_eq(out[0], -1);
    ck_assert_int_eq(out[1], 3);
    assert_log(tid, M, 4);
    const char *want[4] = {M[0], M[1], BRANCH, M[3]};
    const int64_t seqs[4] = {0, 1, -1, 3};
    assert_list(tid, "b4", want, seqs, 4);
    /* a different text where the parent has its inline item: stays inline */
    ASSERT_OK(put_prefixed(tid, "b4x", "b3", 2, M + 3, NULL, 1, out, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ck_assert_int_eq(out[0], -1);
    assert_log(tid, M, 4);
}
END_TEST

START_TEST(test_prefix_first_list_over_a_longer_log)
{
    char tid[256];
    TID(tid, "t");
    convo_error err;
    conf_append(conf_store, tid, M, 3);
    /* no parent list: the list is taken to be the log's first messages, as
     * many as it has, and compared by text (the thread has more) */
    int64_t out[1] = {-7};
    ASSERT_OK(put_prefixed(tid, "c2", NULL, 1, M + 1, NULL, 1, out, CONVO_CHECKPOINT_IN_VERSION,
                           &err), err);
    ck_assert_int_eq(out[0], 1);
    const int64_t all[3] = {0, 1, 2};
    assert_list(tid, "c2", M, all, 2);
    /* a text other than the log's at its place stays inline */
    ASSERT_OK(put_prefixed(tid, "d2", NULL, 1, &BRANCH, NULL, 1, out,
                           CONVO_CHECKPOINT_IN_VERSION, &err), err);
    ck_assert_int_eq(out[0], -1);
    assert_log(tid, M, 3);
}
END_TEST

void conf_add_prefix_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "prefix");
    tcase_add_test(tc, test_prefix_put_appends_only_the_new);
    tcase_add_test(tc, test_prefix_branch_stays_inline);
    tcase_add_test(tc, test_prefix_bad_input_writes_nothing);
    tcase_add_test(tc, test_prefix_not_read_from_a_version_4_struct);
    tcase_add_test(tc, test_prefix_compared_run_by_run);
    tcase_add_test(tc, test_prefix_over_a_branch);
    tcase_add_test(tc, test_prefix_first_list_over_a_longer_log);
}
