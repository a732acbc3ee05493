/* copy-replay.c — the core's copy of a thread with its checkpoints for a driver
 * without thread_copy (lib/thread_copy.c: a fork, then one put per checkpoint),
 * through a memory store whose driver table is wrapped (internal API): what it
 * copies, and that a failure midway removes the target, or names it when that
 * fails too.
 *
 *   tests/copy_replay          (run by make check)
 */
#include "internal.h"
#include <check.h>
#include <stdlib.h>
#include <string.h>

static const convo_driver *memory;
static int puts_left;    /* checkpoint puts to dst before one fails; -1: none fails */
static int delete_fails; /* deleting dst fails */

static int put_may_fail(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    if (strcmp(cp->thread_id, "dst") == 0 && puts_left >= 0 && puts_left-- == 0)
        return convo__error(err, CONVO_EIO, NULL, "server gone");
    return memory->checkpoint_put(b, cp, err);
}

static int delete_may_fail(convo_backend *b, const char *thread_id, convo_error *err)
{
    if (delete_fails && strcmp(thread_id, "dst") == 0)
        return convo__error(err, CONVO_EIO, NULL, "still gone");
    return memory->thread_delete(b, thread_id, err);
}

static convo_driver wrapped;

static convo_store *open_replaying(void)
{
    memory = convo__driver_find("memory");
    ck_assert_ptr_nonnull(memory);
    wrapped = *memory;
    wrapped.thread_copy = NULL;
    wrapped.checkpoint_put = put_may_fail;
    wrapped.thread_delete = delete_may_fail;
    puts_left = -1;
    delete_fails = 0;
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open(&s, "memory:", &err), 0);
    s->driver = &wrapped;
    return s;
}

static void close_replaying(convo_store *s)
{
    s->driver = memory;
    convo_close(s);
}

static void put(convo_store *s, const char *id, const char *parent, const convo_channel_in *ch,
                size_t n, int64_t log_length)
{
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "src";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{\"step\":1}";
    cp.channels = ch;
    cp.nchannels = n;
    cp.log_length = log_length;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "%s", err.message);
}

/* src: 2 messages; c1 sends a value, c2 lists it again and has 2 writes of
 * one task and 1 of another; c3 refers to both messages. */
static void make_source(convo_store *s)
{
    const char *msgs[] = {"{\"role\":\"user\"}", "{\"role\":\"assistant\"}"};
    convo_error err;
    ck_assert_int_eq(convo_append(s, "src", msgs, NULL, 2, NULL, NULL, &err), 0);
    convo_blob v = {"json", "\"v\"", 3};
    convo_channel_in first = {"a", "1", &v}, again = {"a", "1", NULL};
    put(s, "c1", NULL, &first, 1, 1);
    put(s, "c2", "c1", &again, 1, 1);
    put(s, "c3", "c2", &again, 1, 2);
    convo_write_in w[] = {{0, "x", {"json", "1", 1}}, {1, "y", {"json", "2", 1}}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "src", "", "c2", "t1", "p", w, 2, &err), 0);
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "src", "", "c2", "t2", "", w, 1, &err), 0);
}

static size_t count(convo_store *s, const char *thread)
{
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = thread;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_list(s, &lo, &set, &err), 0);
    size_t n = convo_checkpoint_set_count(set);
    convo_checkpoint_set_free(set);
    return n;
}

static int copy(convo_store *s, int64_t upto, convo_error *err)
{
    convo_fork_opts o = CONVO_FORK_OPTS_INIT;
    o.with_checkpoints = 1;
    return convo_thread_fork_ex(s, "src", "dst", upto, &o, err);
}

START_TEST(test_replay_copies)
{
    convo_store *s = open_replaying();
    make_source(s);
    convo_error err;
    ck_assert_msg(copy(s, -1, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(count(s, "dst"), 3);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(convo_checkpoint_get(s, "dst", "", "c2", &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_parent_id(cp), "c1");
    ck_assert_str_eq(convo_checkpoint_metadata(cp), "{\"step\":1}");
    const char *version;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &version, &v), "a");
    ck_assert_msg(v.len == 3 && memcmp(v.bytes, "\"v\"", 3) == 0, "the value c1 sent");
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 3);
    const char *path;
    int64_t idx;
    const char *channel;
    ck_assert_str_eq(convo_checkpoint_write(cp, 1, &path, &idx, &channel, &v), "t1");
    ck_assert_str_eq(path, "p");
    ck_assert_int_eq(idx, 1);
    convo_checkpoint_free(cp);
    /* within one message: c3 is left out */
    ck_assert_int_eq(convo_thread_delete(s, "dst", &err), 0);
    ck_assert_msg(copy(s, 1, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(count(s, "dst"), 2);
    close_replaying(s);
}
END_TEST

START_TEST(test_replay_failure_removes_target)
{
    convo_store *s = open_replaying();
    make_source(s);
    puts_left = 1; /* the second put fails */
    convo_error err;
    ck_assert_int_eq(copy(s, -1, &err), CONVO_EIO);
    ck_assert_msg(strstr(err.message, "server gone") != NULL, "%s", err.message);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "dst", NULL, &h, &err), CONVO_ENOTFOUND);
    ck_assert_uint_eq(count(s, "src"), 3);
    close_replaying(s);
}
END_TEST

START_TEST(test_replay_undo_failure_is_named)
{
    convo_store *s = open_replaying();
    make_source(s);
    puts_left = 0;
    delete_fails = 1;
    convo_error err;
    ck_assert_int_eq(copy(s, -1, &err), CONVO_EIO);
    ck_assert_msg(strstr(err.message, "server gone") &&
                      strstr(err.message, "the partial copy dst is left: still gone"),
                  "the partial copy is not named: %s", err.message);
    close_replaying(s);
}
END_TEST

START_TEST(test_replay_needs_checkpoints)
{
    convo_store *s = open_replaying();
    make_source(s);
    wrapped.checkpoint_list = NULL;
    convo_error err;
    ck_assert_int_eq(copy(s, -1, &err), CONVO_ENOTSUP);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "dst", NULL, &h, &err), CONVO_ENOTFOUND);
    close_replaying(s);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("copy replay");
    TCase *tc = tcase_create("replay");
    tcase_add_test(tc, test_replay_copies);
    tcase_add_test(tc, test_replay_failure_removes_target);
    tcase_add_test(tc, test_replay_undo_failure_is_named);
    tcase_add_test(tc, test_replay_needs_checkpoints);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
