/* sqlite-layout11.c — layout 11's channel values in the channel list
 * (docs/sqlite.md, "Layout 11"): a small value in the entry of the checkpoint
 * that brings it, a large one in convo_blobs; a put listing a version its row
 * before does not finds the value already stored (a copy of a sibling, a
 * second root, a fork from an older parent) and keeps the first; full lists
 * carry the values at the chain's bound, also through another connection; the
 * swap of a value into a log reference rewrites the entry; the migration from
 * layout 10. `tests/sqlite_layout11 DIR` works in DIR. */
#include "sqlite_layout.h"

#include <stdlib.h>
#include <string.h>

static const char *U1 = "{\"role\":\"user\",\"content\":\"hi\"}";

/* Checkpoint id of thread t with parent (or NULL) and channels a and b at
 * versions va, vb with values xa, xb (NULL: listed without a value). */
static int put_ab(convo_store *s, const char *t, const char *id, const char *parent,
                  const char *va, const char *xa, const char *vb, const char *xb)
{
    convo_blob ba = {"json", xa, xa ? strlen(xa) : 0}, bb = {"json", xb, xb ? strlen(xb) : 0};
    convo_channel_in ch[2] = {{"a", va, xa ? &ba : NULL}, {"b", vb, xb ? &bb : NULL}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = t;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{\"source\":\"loop\"}";
    cp.channels = ch;
    cp.nchannels = 2;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    ck_assert_msg(rc == 0, "put %s: %s", id, err.message);
    return rc;
}

/* Checkpoint id of thread t has channel name at version with value want
 * (NULL: no value). */
static void assert_value(convo_store *s, const char *t, const char *id, const char *name,
                         const char *version, const char *want)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, t, "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    size_t i = 0, n = convo_checkpoint_channel_count(cp);
    const char *v = NULL, *got = NULL;
    convo_blob b = {NULL, NULL, 0};
    while (i < n && strcmp((got = convo_checkpoint_channel(cp, i, &v, &b)), name) != 0)
        i++;
    ck_assert_msg(i < n, "%s has no channel %s", id, name);
    ck_assert_str_eq(v, version);
    if (!want)
        ck_assert_msg(b.type == NULL, "%s: %s has a value", id, name);
    else
        ck_assert_msg(b.type && b.len == strlen(want) && memcmp(b.bytes, want, b.len) == 0,
                      "%s: %s's value is not %s", id, name, want);
    convo_checkpoint_free(cp);
}

static long long blobs(const char *path)
{
    return sql_int(path, "SELECT count(*) FROM convo_blobs");
}

/* A JSON string value of n bytes. */
static char *large(size_t n, char fill)
{
    char *v = malloc(n + 1);
    ck_assert_ptr_nonnull(v);
    memset(v, fill, n);
    v[0] = v[n - 1] = '"';
    v[n] = '\0';
    return v;
}

START_TEST(test_small_in_entries_large_in_blobs)
{
    const char *path = db_path("entries");
    convo_store *s = open_db(path);
    char *big = large(4097, 'x'), *edge = large(4096, 'y');
    put_ab(s, "t", "c1", NULL, "1", "\"one\"", "1", big);
    ck_assert_int_eq(blobs(path), 1); /* b's 4,097 bytes; a's 5 in its entry */
    put_ab(s, "t", "c2", "c1", "2", edge, "1", NULL);
    ck_assert_int_eq(blobs(path), 1); /* 4,096 bytes still in the entry */
    assert_value(s, "t", "c1", "a", "1", "\"one\"");
    assert_value(s, "t", "c1", "b", "1", big);
    assert_value(s, "t", "c2", "a", "2", edge);
    assert_value(s, "t", "c2", "b", "1", big);
    /* an empty value is a value, not none */
    put_ab(s, "t", "c3", "c2", "3", "", "1", NULL);
    assert_value(s, "t", "c3", "a", "3", "");
    /* a version never given a value has none */
    put_ab(s, "t", "c4", "c3", "4", NULL, "1", NULL);
    assert_value(s, "t", "c4", "a", "4", NULL);
    /* its value sent by a later put (LangGraph's validation suite: values
     * only for newVersions) is that put's and stays for the ones after */
    put_ab(s, "t", "c5", "c4", "4", "\"late\"", "1", NULL);
    put_ab(s, "t", "c6", "c5", "4", "\"later\"", "1", NULL);
    assert_value(s, "t", "c5", "a", "4", "\"late\"");
    assert_value(s, "t", "c6", "a", "4", "\"late\"");
    free(big);
    free(edge);
    convo_close(s);
}
END_TEST

/* LangGraph's updateState(config, values, '__copy__') puts the saved
 * checkpoint's versions again without values, its parent as parent: the
 * values are in the sibling's entries. A second root, and a fork from an
 * older parent, find theirs too. */
START_TEST(test_values_found_beyond_the_row_before)
{
    const char *path = db_path("found");
    convo_store *s = open_db(path);
    put_ab(s, "t", "p", NULL, "1", "\"a1\"", "1", "\"b1\"");
    put_ab(s, "t", "c", "p", "2", "\"a2\"", "2", "\"b2\"");
    put_ab(s, "t", "d", "c", "3", "\"a3\"", "2", NULL);
    put_ab(s, "t", "copy", "p", "2", NULL, "2", NULL); /* c's versions */
    assert_value(s, "t", "copy", "a", "2", "\"a2\"");
    assert_value(s, "t", "copy", "b", "2", "\"b2\"");
    put_ab(s, "t", "root", NULL, "3", NULL, "1", NULL);
    assert_value(s, "t", "root", "a", "3", "\"a3\"");
    assert_value(s, "t", "root", "b", "1", "\"b1\"");
    put_ab(s, "t", "fork", "p", "1", NULL, "9", "\"b9\""); /* p's a, 4 rows back */
    assert_value(s, "t", "fork", "a", "1", "\"a1\"");
    assert_value(s, "t", "fork", "b", "9", "\"b9\"");
    ck_assert_int_eq(blobs(path), 0);
    /* the first value of a version stays: a sibling and a re-put bringing
     * other bytes for it, small or large */
    char *big = large(100, 'z');
    put_ab(s, "t", "sib", "p", "2", "\"other\"", "2", big);
    assert_value(s, "t", "sib", "a", "2", "\"a2\"");
    assert_value(s, "t", "sib", "b", "2", "\"b2\"");
    put_ab(s, "t", "c", "p", "2", "\"again\"", "2", "\"b2!\"");
    assert_value(s, "t", "c", "a", "2", "\"a2\"");
    assert_value(s, "t", "c", "b", "2", "\"b2\"");
    put_ab(s, "t", "big", "p", "7", big, "1", NULL);
    ck_assert_int_eq(blobs(path), 0); /* brought: in its entry */
    put_ab(s, "t", "other", "p", "8", "\"a8\"", "1", NULL);
    put_ab(s, "t", "big2", "d", "7", "\"small\"", "1", NULL);
    assert_value(s, "t", "big2", "a", "7", big);
    /* found in big's row and over 64 bytes: into convo_blobs, not repeated */
    ck_assert_int_eq(blobs(path), 1);
    assert_value(s, "t", "big", "a", "7", big);
    free(big);
    convo_close(s);
}
END_TEST

/* Channel b of thread t keeps the value c0 brought for 60 checkpoints, put
 * by two connections in turn (so neither's memo of the row before holds):
 * every full list at the chain's bound carries it (a value over 64 bytes
 * goes to convo_blobs once instead), a prune leaving the newest 3 and a fork
 * with checkpoints keep it readable. */
static void carry(convo_store *s[2], const char *path, const char *t, const char *kept)
{
    char id[16], parent[16], va[16], fork[16];
    for (int k = 0; k < 60; k++) {
        snprintf(id, sizeof id, "c%02d", k);
        snprintf(parent, sizeof parent, "c%02d", k - 1);
        snprintf(va, sizeof va, "%d", k);
        put_ab(s[k % 2], t, id, k ? parent : NULL, va, "1", "0", k ? NULL : kept);
    }
    ck_assert_int_ge(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE substr(channel_list, 1, 1) <> x'00'"),
                     3);
    for (int k = 0; k < 60; k++) {
        snprintf(id, sizeof id, "c%02d", k);
        assert_value(s[k % 2], t, id, "b", "0", kept);
    }
    convo_error err;
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    snprintf(fork, sizeof fork, "%s-fork", t);
    ck_assert_int_eq(convo_thread_fork_ex(s[0], t, fork, 0, &fo, &err), 0);
    assert_value(s[1], fork, "c41", "b", "0", kept);
    ck_assert_int_eq(convo_checkpoint_prune(s[1], t, 3, &err), 0);
    for (int k = 57; k < 60; k++) {
        snprintf(id, sizeof id, "c%02d", k);
        assert_value(s[0], t, id, "b", "0", kept);
    }
    assert_value(s[0], fork, "c59", "b", "0", kept);
}

START_TEST(test_full_lists_carry_values)
{
    const char *path = db_path("carry");
    convo_store *s[2] = {open_db(path), open_db(path)};
    carry(s, path, "t", "\"kept\"");
    ck_assert_int_eq(blobs(path), 0);
    char *big = large(65, 'k');
    carry(s, path, "u", big);
    /* once in thread u, once in its fork (copied) */
    ck_assert_int_eq(blobs(path), 2);
    free(big);
    convo_close(s[0]);
    convo_close(s[1]);
}
END_TEST

/* Checkpoint id whose "messages" channel is the list items in the log, and
 * with input (non-NULL) a "__start__" value holding it inline, as LangGraph's
 * input checkpoint does (lib/items.c plans what goes into the log). */
static void put_items(convo_store *s, const char *id, const char *parent,
                      const char *const *items, size_t n, const char *input)
{
    convo_items_in in = CONVO_ITEMS_IN_INIT, it = CONVO_ITEMS_IN_INIT;
    in.items = &input;
    in.n = 1;
    in.key = "messages";
    it.items = items;
    it.n = n;
    it.log = 1;
    const convo_items_in *per[2] = {&it, &in};
    convo_channel_in c[2] = {{"messages", id, NULL}, {"__start__", id, NULL}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{}";
    cp.channels = c;
    cp.nchannels = input ? 2 : 1;
    cp.channel_items = per;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

/* The seq of item 0 of channel name of checkpoint id (-1: inline). */
static int64_t item_seq(convo_store *s, const char *id, const char *name)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", NULL, id, &cp, &err) == 0, "%s", err.message);
    size_t i = 0;
    const char *v;
    convo_blob b;
    while (i < convo_checkpoint_channel_count(cp) &&
           strcmp(convo_checkpoint_channel(cp, i, &v, &b), name) != 0)
        i++;
    convo_items it;
    ck_assert_int_eq(convo_checkpoint_channel_items(cp, i, &it), 1);
    ck_assert_uint_ge(it.n, 1);
    ck_assert_str_eq(it.items[0], U1);
    int64_t seq = it.seqs[0];
    convo_checkpoint_free(cp);
    return seq;
}

/* c1's input holds U1 inline (not yet in the log); c2 appends U1 and turns
 * c1's input into a reference: the entry in c1's row is rewritten. */
START_TEST(test_swap_rewrites_the_entry)
{
    const char *path = db_path("swap");
    convo_store *s = open_db(path);
    put_items(s, "c1", NULL, NULL, 0, U1);
    ck_assert_int_eq(item_seq(s, "c1", "__start__"), -1);
    ck_assert_int_eq(sql_int(path, "SELECT instr(channel_list, CAST('hi' AS BLOB)) > 0"
                                   " FROM convo_checkpoints WHERE id = 'c1'"),
                     1);
    put_items(s, "c2", "c1", &U1, 1, NULL);
    ck_assert_int_eq(item_seq(s, "c2", "messages"), 0);
    ck_assert_int_eq(item_seq(s, "c1", "__start__"), 0);
    ck_assert_int_eq(sql_int(path, "SELECT instr(channel_list, CAST('hi' AS BLOB)) > 0"
                                   " FROM convo_checkpoints WHERE id = 'c1'"),
                     0);
    ck_assert_int_eq(blobs(path), 0);
    convo_close(s);
}
END_TEST

/* A layout-10 file: its values in convo_blobs (here: each over 4,096 bytes,
 * as layout 11 keeps them too, so the rows are what layout 10 wrote). Opened, it
 * is layout 11; its values read back, and new checkpoints coded against its
 * rows find them (unchanged versions, a copy of an old sibling). */
START_TEST(test_migration_10_to_11)
{
    const char *path = db_path("ten");
    convo_store *s = open_db(path);
    char *a1 = large(5000, 'a'), *b1 = large(6000, 'b'), *a2 = large(4500, 'c');
    put_ab(s, "t", "p", NULL, "1", a1, "1", b1);
    put_ab(s, "t", "c", "p", "2", a2, "1", NULL);
    convo_close(s);
    ck_assert_int_eq(blobs(path), 3);
    exec_raw(path, LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 LAYOUT_13_TO_12 "UPDATE convo_meta SET value = '10' WHERE key = 'schema_version'");
    s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     SQLITE_LAYOUT_NOW);
    assert_value(s, "t", "c", "a", "2", a2);
    assert_value(s, "t", "c", "b", "1", b1);
    put_ab(s, "t", "d", "c", "3", "\"a3\"", "1", NULL);
    put_ab(s, "t", "copy", "p", "2", NULL, "1", NULL);
    assert_value(s, "t", "d", "a", "3", "\"a3\"");
    assert_value(s, "t", "d", "b", "1", b1);
    assert_value(s, "t", "copy", "a", "2", a2);
    ck_assert_int_eq(blobs(path), 3);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
    free(a1);
    free(b1);
    free(a2);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("layout11");
    TCase *tc = tcase_create("layout11");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_small_in_entries_large_in_blobs);
    tcase_add_test(tc, test_values_found_beyond_the_row_before);
    tcase_add_test(tc, test_full_lists_carry_values);
    tcase_add_test(tc, test_swap_rewrites_the_entry);
    tcase_add_test(tc, test_migration_10_to_11);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
