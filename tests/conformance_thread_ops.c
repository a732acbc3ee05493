/* conformance_thread_ops.c — the conformance suite on whole threads: the extra
 * object's merge and limits, the id listing (convo_thread_list) and its pages,
 * delete, and fork. */
#include "conformance.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------------- extra */

START_TEST(test_extra_shallow_merge)
{
    char t[256];
    TID(t, "merge");
    conf_save_extra_ok(conf_store, t, "{\"a\":1,\"nested\":{\"x\":1,\"y\":2},\"keep\":\"k\"}");
    conf_assert_extra(conf_store, t, "{\"a\":1,\"nested\":{\"x\":1,\"y\":2},\"keep\":\"k\"}");
    conf_save_extra_ok(conf_store, t, "{\"nested\":{\"z\":3},\"a\":null,\"new\":true}");
    conf_assert_extra(conf_store, t,
                      "{\"a\":null,\"nested\":{\"z\":3},\"keep\":\"k\",\"new\":true}");
    conf_save_extra_ok(conf_store, t, "{}");
    conf_assert_extra(conf_store, t,
                      "{\"a\":null,\"nested\":{\"z\":3},\"keep\":\"k\",\"new\":true}");
    conf_save_extra_ok(conf_store, t, "  {\n \"keep\" : [ 1 , 2 ] }  ");
    conf_assert_extra(conf_store, t,
                      "{\"a\":null,\"nested\":{\"z\":3},\"keep\":[1,2],\"new\":true}");
}
END_TEST

START_TEST(test_extra_null_is_a_value)
{
    char t[256];
    TID(t, "null");
    conf_save_extra_ok(conf_store, t, "{\"gone\":null}");
    convo_history *h = conf_load(conf_store, t, NULL);
    json_t *e = conf_parse_json(convo_history_extra(h));
    ck_assert_msg(json_object_get(e, "gone") != NULL && json_is_null(json_object_get(e, "gone")),
                  "null was not stored as a value: %s", convo_history_extra(h));
    json_decref(e);
    convo_history_free(h);
}
END_TEST

START_TEST(test_extra_odd_keys)
{
    char t[256];
    TID(t, "keys");
    const char *patch =
        "{\".\":1,\"$\":2,\"\":3,\"a.b.$c\":4,\"$set\":5,\"$where\":6,\".lead\":7,\"trail.\":8,"
        "\"\xc3\xbc\":9,\"\xe6\x97\xa5\xe6\x9c\xac\":10,\"\xf0\x9f\x98\x80\":11,\"123\":12,\"0\":13,"
        "\"-1\":14,\"1e3\":15,\"__proto__\":16,\"constructor\":17,\"q\\\"uote\":18,"
        "\"back\\\\slash\":19,\"with space\":20,\"line\\nbreak\":21,\"\\u00e9sc\":22,"
        "\"a\\u0001b\":23,\"%2E\":24,\"_id\":25}";
    conf_save_extra_ok(conf_store, t, patch);
    conf_assert_extra(conf_store, t, patch);
    conf_save_extra_ok(conf_store, t, "{\"a.b.$c\":\"replaced\",\"\":null}");
    json_t *want = conf_parse_json(patch);
    json_object_set_new(want, "a.b.$c", json_string("replaced"));
    json_object_set_new(want, "", json_null());
    char *text = json_dumps(want, JSON_COMPACT);
    conf_assert_extra(conf_store, t, text);
    free(text);
    json_decref(want);
}
END_TEST

START_TEST(test_extra_types)
{
    char t[256];
    TID(t, "types");
    const char *patch =
        "{\"s\":\"str\",\"empty\":\"\",\"u\":\"\xc3\xa9\xf0\x9f\x98\x80\\n\\t\\\"\",\"i\":42,"
        "\"neg\":-7,\"zero\":0,\"f\":1.5,\"small\":-2.5e-10,\"huge\":1e300,\"t\":true,"
        "\"fa\":false,\"n\":null,\"arr\":[1,\"a\",null,{\"x\":1},[],[[2]]],\"obj\":{},"
        "\"deep\":{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":[{\"f\":\"g\"}]}}}}}}";
    conf_save_extra_ok(conf_store, t, patch);
    conf_assert_extra(conf_store, t, patch);
}
END_TEST

/* Numbers that a double cannot hold exactly, and a real that looks integral. */
START_TEST(test_extra_number_precision)
{
    char t[256];
    TID(t, "prec");
    const char *patch = "{\"p53\":9007199254740993,\"max\":9223372036854775807,"
                        "\"min\":-9223372036854775808,\"tenth\":0.1,\"third\":0.3333333333333333,"
                        "\"one\":1.0}";
    conf_save_extra_ok(conf_store, t, patch);
    conf_assert_extra(conf_store, t, patch);
}
END_TEST

START_TEST(test_extra_many_keys)
{
    char t[256];
    TID(t, "many");
    json_t *want = json_object(), *patch = json_object();
    for (int i = 0; i < 500; i++) {
        char k[32];
        snprintf(k, sizeof k, "key%03d", i);
        json_object_set_new(patch, k, json_integer(i));
    }
    char *text = json_dumps(patch, JSON_COMPACT);
    conf_save_extra_ok(conf_store, t, text);
    free(text);
    json_object_update(want, patch);
    json_object_clear(patch);
    for (int i = 250; i < 750; i++) {
        char k[32];
        snprintf(k, sizeof k, "key%03d", i);
        json_object_set_new(patch, k, json_string(k));
    }
    text = json_dumps(patch, JSON_COMPACT);
    conf_save_extra_ok(conf_store, t, text);
    free(text);
    json_object_update(want, patch);
    text = json_dumps(want, JSON_COMPACT);
    conf_assert_extra(conf_store, t, text);
    free(text);
    json_decref(want);
    json_decref(patch);
}
END_TEST

START_TEST(test_extra_invalid)
{
    static const char *const bad[] = {"{bad", "[1,2]", "\"s\"", "42", "null", "", "  ",
                                      "{\"a\":1} x", "{\"a\":1,\"a\":2}", "{\"a\":\"\xff\"}"};
    char t[256], u[256];
    TID(t, "new");
    TID(u, "existing");
    conf_save_extra_ok(conf_store, u, "{\"k\":1}");
    convo_error err;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = convo_save_extra(conf_store, t, bad[i], &err);
        ck_assert_msg(rc == CONVO_EINVAL, "patch '%s' gave %d", bad[i], rc);
        ASSERT_FAILS(rc, err, CONVO_EINVAL);
        ASSERT_FAILS(convo_save_extra(conf_store, u, bad[i], &err), err, CONVO_EINVAL);
    }
    ASSERT_FAILS(convo_save_extra(conf_store, t, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_save_extra(conf_store, u, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_save_extra(NULL, u, "{}", &err), err, CONVO_EINVAL);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
    conf_assert_extra(conf_store, u, "{\"k\":1}");
}
END_TEST

START_TEST(test_extra_and_messages_independent)
{
    char t[256];
    TID(t, "indep");
    conf_save_extra_ok(conf_store, t, "{\"a\":1}");
    ck_assert_int_eq(conf_length(conf_store, t), 0);
    ck_assert_int_eq(conf_append(conf_store, t, conf_three, 3), 0);
    conf_assert_extra(conf_store, t, "{\"a\":1}");
    conf_save_extra_ok(conf_store, t, "{\"b\":2}");
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), 3);
    for (size_t i = 0; i < 3; i++)
        conf_assert_message(h, i, conf_three[i], strlen(conf_three[i]), i == 0 ? "user" : i == 1 ? "assistant" : "tool", (int64_t)i);
    conf_assert_json_eq(convo_history_extra(h), "{\"a\":1,\"b\":2}", "extra");
    convo_history_free(h);
    ck_assert_int_eq(conf_append(conf_store, t, conf_three, 1), 3);
}
END_TEST

/* ------------------------------------------------------------- thread list */

/* Creates prefix+name for each name (alternating append and save_extra) and
 * returns the full ids. */
static char **make_threads(convo_store *s, const char *prefix, const char *const *names, size_t n)
{
    char **ids = calloc(n, sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(prefix) + strlen(names[i]) + 1;
        ck_assert((ids[i] = malloc(len)) != NULL);
        snprintf(ids[i], len, "%s%s", prefix, names[i]);
        if (i % 2)
            conf_save_extra_ok(s, ids[i], "{}");
        else
            conf_append(s, ids[i], conf_three, 1);
    }
    return ids;
}

static const char *const order_names[] = {
    "0", "A", "B", "Z", "a", "a b", "a/b", "a:b", "aa", "b", "~", "{x}",
    "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\xc2\xa0", "a\xc3\xa9", "ab", "aB",
};
#define ORDER_N (sizeof order_names / sizeof *order_names)

START_TEST(test_list_byte_order)
{
    char p[256];
    TID(p, "");
    char **ids = make_threads(conf_store, p, order_names, ORDER_N);
    conf_assert_listed(conf_store, p, ids, ORDER_N, 100);
    conf_assert_listed(conf_store, p, ids, ORDER_N, 3);
    conf_assert_listed(conf_store, p, ids, ORDER_N, 1);
    conf_ids_free(ids, ORDER_N);
}
END_TEST

static void assert_first_after(convo_store *s, const char *after, const char *expected)
{
    convo_thread_page *pg;
    convo_error err;
    ASSERT_OK(convo_thread_list(s, after, 2, &pg, &err), err);
    ck_assert_msg(convo_thread_page_count(pg) >= 1, "nothing listed after '%s'", after);
    ck_assert_str_eq(convo_thread_page_id(pg, 0), expected);
    convo_thread_page_free(pg);
}

START_TEST(test_list_after)
{
    char p[256], after[300], want[300];
    TID(p, "");
    char **ids = make_threads(conf_store, p, order_names, ORDER_N);
    snprintf(after, sizeof after, "%sa", p);
    snprintf(want, sizeof want, "%sa b", p);
    assert_first_after(conf_store, after, want); /* strictly after an existing id */
    snprintf(after, sizeof after, "%sa0", p);
    snprintf(want, sizeof want, "%sa:b", p);
    assert_first_after(conf_store, after, want); /* after an id that does not exist */
    snprintf(after, sizeof after, "%s", p);
    snprintf(want, sizeof want, "%s0", p);
    assert_first_after(conf_store, after, want);
    conf_ids_free(ids, ORDER_N);
}
END_TEST

START_TEST(test_list_pagination)
{
    char p[256];
    TID(p, "");
    char *names[25];
    for (int i = 0; i < 25; i++) {
        char n[16];
        snprintf(n, sizeof n, "%02d", i);
        names[i] = strdup(n);
    }
    char **ids = make_threads(conf_store, p, (const char *const *)names, 25);
    convo_thread_page *pg;
    convo_error err;
    ASSERT_OK(convo_thread_list(conf_store, p, 10, &pg, &err), err);
    ck_assert_int_eq(convo_thread_page_count(pg), 10);
    ck_assert_pstr_eq(convo_thread_page_next(pg), ids[9]);
    convo_thread_page_free(pg);
    ASSERT_OK(convo_thread_list(conf_store, ids[9], 10, &pg, &err), err);
    ck_assert_int_eq(convo_thread_page_count(pg), 10);
    ck_assert_str_eq(convo_thread_page_id(pg, 0), ids[10]);
    ck_assert_pstr_eq(convo_thread_page_next(pg), ids[19]);
    convo_thread_page_free(pg);
    conf_assert_listed(conf_store, p, ids, 25, 10);
    conf_assert_listed(conf_store, p, ids, 25, 25);
    conf_assert_listed(conf_store, p, ids, 25, 7);
    conf_ids_free(ids, 25);
    for (int i = 0; i < 25; i++)
        free(names[i]);
}
END_TEST

/* Lists from `after` to the end of the store; checks next is NULL exactly on
 * the last page. Returns how many ids were listed. */
static size_t list_to_end(convo_store *s, const char *after, size_t limit)
{
    char *from = strdup(after);
    size_t total = 0;
    for (int pages = 0;; pages++) {
        ck_assert_msg(pages < 10000, "listing never ends");
        convo_thread_page *pg;
        convo_error err;
        ASSERT_OK(convo_thread_list(s, from, limit, &pg, &err), err);
        int left = 0;
        conf_check_page(pg, from, limit, "", &left);
        size_t k = convo_thread_page_count(pg);
        total += k;
        const char *next = convo_thread_page_next(pg);
        if (!next) {
            if (k > 0) {
                convo_thread_page *rest;
                ASSERT_OK(convo_thread_list(s, convo_thread_page_id(pg, k - 1), limit, &rest,
                                            &err),
                          err);
                ck_assert_msg(convo_thread_page_count(rest) == 0,
                              "next was NULL but more threads follow");
                convo_thread_page_free(rest);
            }
            convo_thread_page_free(pg);
            break;
        }
        free(from);
        from = strdup(next);
        convo_thread_page_free(pg);
    }
    free(from);
    return total;
}

START_TEST(test_list_last_page)
{
    char p[300];
    snprintf(p, sizeof p, CONF_HIGH "%s/%s/", conf_prefix, __func__);
    static const char *const names[] = {"x", "y", "z"};
    char **ids = make_threads(conf_store, p, names, 3);
    ck_assert_int_ge(list_to_end(conf_store, p, 3), 3);
    ck_assert_int_ge(list_to_end(conf_store, p, 2), 3);
    ck_assert_int_ge(list_to_end(conf_store, p, 1), 3);
    ck_assert_int_ge(list_to_end(conf_store, p, 100), 3);
    ck_assert_int_eq(list_to_end(conf_store, ids[0], 1), list_to_end(conf_store, p, 1) - 1);
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(convo_thread_delete(conf_store, ids[i], NULL), 0);
    conf_ids_free(ids, 3);
}
END_TEST

START_TEST(test_list_deleted_disappear)
{
    char p[256];
    TID(p, "");
    static const char *const names[] = {"a", "b", "c", "d", "e"};
    char **ids = make_threads(conf_store, p, names, 5);
    ck_assert_int_eq(convo_thread_delete(conf_store, ids[1], NULL), 0);
    ck_assert_int_eq(convo_thread_delete(conf_store, ids[4], NULL), 0);
    char *left[] = {ids[0], ids[2], ids[3]};
    conf_assert_listed(conf_store, p, left, 3, 2);
    conf_ids_free(ids, 5);
}
END_TEST

START_TEST(test_list_arguments)
{
    convo_thread_page *pg = (convo_thread_page *)1;
    convo_error err;
    ASSERT_OK(convo_thread_list(conf_store, NULL, 0, &pg, &err), err);
    ck_assert_int_le(convo_thread_page_count(pg), 100);
    convo_thread_page_free(pg);
    ASSERT_OK(convo_thread_list(conf_store, "", 5, &pg, &err), err);
    ck_assert_int_le(convo_thread_page_count(pg), 5);
    convo_thread_page_free(pg);
    ASSERT_FAILS(convo_thread_list(conf_store, NULL, 10001, &pg, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_thread_list(conf_store, NULL, 10, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_thread_list(NULL, NULL, 10, &pg, &err), err, CONVO_EINVAL);
    convo_thread_page_free(NULL);
    convo_history_free(NULL);
}
END_TEST

/* ------------------------------------------------------------------- delete */

START_TEST(test_delete_removes_everything)
{
    char t[256];
    TID(t, "del");
    convo_append_result r;
    convo_error err;
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "key", -1, &r, &err), err);
    conf_save_extra_ok(conf_store, t, "{\"old\":1}");
    ASSERT_OK(convo_thread_delete(conf_store, t, &err), err);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
    ASSERT_FAILS(convo_thread_delete(conf_store, t, &err), err, CONVO_ENOTFOUND);
    /* a new thread of the same id: seq from 0, no old key, no old extra */
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three + 1, 2, "key", -1, &r, &err), err);
    conf_assert_result(&r, 0, 2, 0);
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), 2);
    conf_assert_message(h, 0, conf_three[1], strlen(conf_three[1]), "assistant", 0);
    conf_assert_json_eq(convo_history_extra(h), "{}", "extra after delete");
    convo_history_free(h);
    char p[256];
    TID(p, "");
    size_t n;
    char **ids = conf_list_prefix(conf_store, p, 10, &n);
    ck_assert_int_eq(n, 1);
    conf_ids_free(ids, n);
}
END_TEST

START_TEST(test_delete_unknown)
{
    char t[256];
    TID(t, "never");
    convo_error err;
    ASSERT_FAILS(convo_thread_delete(conf_store, t, &err), err, CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_thread_delete(conf_store, t, NULL), CONVO_ENOTFOUND);
    ASSERT_FAILS(convo_thread_delete(NULL, t, &err), err, CONVO_EINVAL);
}
END_TEST

START_TEST(test_delete_extra_only_thread)
{
    char t[256];
    TID(t, "extraonly");
    conf_save_extra_ok(conf_store, t, "{}");
    convo_error err;
    ASSERT_OK(convo_thread_delete(conf_store, t, &err), err);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
}
END_TEST

/* Deleting "d" must not touch ids that merely start with it or match it as a pattern. */
START_TEST(test_delete_spares_neighbours)
{
    char p[256];
    TID(p, "");
    static const char *const names[] = {"d", "d*", "d?", "d1", "d:x", "d{x}", "d/x", "d\\",
                                        "d[a]", "d%", "d_", "*", "D"};
    size_t n = sizeof names / sizeof *names;
    char **ids = make_threads(conf_store, p, names, n);
    convo_error err;
    ASSERT_OK(convo_thread_delete(conf_store, ids[0], &err), err);
    ASSERT_OK(convo_thread_delete(conf_store, ids[1], &err), err);
    ASSERT_OK(convo_thread_delete(conf_store, ids[11], &err), err);
    for (size_t i = 0; i < n; i++) {
        int gone = i == 0 || i == 1 || i == 11;
        int64_t len = conf_length(conf_store, ids[i]);
        ck_assert_msg(gone ? len == -1 : len >= 0, "thread '%s': length %lld after deletes",
                      names[i], (long long)len);
        if (!gone)
            ck_assert_int_eq(len, i % 2 ? 0 : 1);
    }
    char *left[16];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (i != 0 && i != 1 && i != 11)
            left[k++] = ids[i];
    conf_assert_listed(conf_store, p, left, k, 4);
    conf_ids_free(ids, n);
}
END_TEST

/* --------------------------------------------------------------------- fork */

void conf_assert_same_prefix(convo_store *s, const char *src, const char *dst, int64_t upto)
{
    convo_history *a = conf_load(s, src, NULL), *b = conf_load(s, dst, NULL);
    ck_assert_int_eq(convo_history_length(b), upto);
    ck_assert_int_eq(convo_history_count(b), upto);
    for (size_t i = 0; i < (size_t)upto; i++) {
        size_t len;
        const char *m = convo_history_message(a, i, &len);
        conf_assert_message(b, i, m, len, convo_history_role(a, i), (int64_t)i);
        ck_assert_int_eq(convo_history_created_at(b, i), convo_history_created_at(a, i));
    }
    conf_assert_json_eq(convo_history_extra(b), convo_history_extra(a), "forked extra");
    convo_history_free(a);
    convo_history_free(b);
}

START_TEST(test_fork_copies)
{
    char src[256], all[256], part[256], none[256];
    TID(src, "src");
    TID(all, "all");
    TID(part, "part");
    TID(none, "none");
    conf_append(conf_store, src, conf_rt_msgs, (int64_t)conf_rt_n);
    conf_save_extra_ok(conf_store, src, "{\"title\":\"x\",\"n\":{\"deep\":[1,2]}}");
    convo_error err;
    ASSERT_OK(convo_thread_fork(conf_store, src, all, -1, &err), err);
    conf_assert_same_prefix(conf_store, src, all, (int64_t)conf_rt_n);
    ASSERT_OK(convo_thread_fork(conf_store, src, part, 4, &err), err);
    conf_assert_same_prefix(conf_store, src, part, 4);
    ASSERT_OK(convo_thread_fork(conf_store, src, none, 0, &err), err);
    conf_assert_same_prefix(conf_store, src, none, 0);
    char exact[256];
    TID(exact, "exact");
    ASSERT_OK(convo_thread_fork(conf_store, src, exact, (int64_t)conf_rt_n, &err), err);
    conf_assert_same_prefix(conf_store, src, exact, (int64_t)conf_rt_n);
}
END_TEST

START_TEST(test_fork_errors)
{
    char src[256], dst[256], other[256], nosrc[256];
    TID(src, "src");
    TID(dst, "dst");
    TID(other, "other");
    TID(nosrc, "nosrc");
    conf_append(conf_store, src, conf_three, 3);
    conf_save_extra_ok(conf_store, other, "{\"mine\":1}");
    convo_error err;
    ASSERT_FAILS(convo_thread_fork(conf_store, nosrc, dst, -1, &err), err, CONVO_ENOTFOUND);
    ASSERT_FAILS(convo_thread_fork(conf_store, src, dst, 4, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_thread_fork(conf_store, src, dst, -2, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_thread_fork(conf_store, src, src, -1, &err), err, CONVO_EINVAL);
    ck_assert_int_eq(conf_length(conf_store, dst), -1);
    ASSERT_FAILS(convo_thread_fork(conf_store, src, other, -1, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, other), 0);
    conf_assert_extra(conf_store, other, "{\"mine\":1}");
    ASSERT_OK(convo_thread_fork(conf_store, src, dst, 1, &err), err);
    ASSERT_FAILS(convo_thread_fork(conf_store, src, dst, 1, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, dst), 1);
    ASSERT_FAILS(convo_thread_fork(NULL, src, dst, 1, &err), err, CONVO_EINVAL);
}
END_TEST

START_TEST(test_fork_independent)
{
    char src[256], dst[256];
    TID(src, "src");
    TID(dst, "dst");
    conf_append(conf_store, src, conf_three, 3);
    conf_save_extra_ok(conf_store, src, "{\"a\":1}");
    convo_error err;
    ASSERT_OK(convo_thread_fork(conf_store, src, dst, 2, &err), err);
    ck_assert_int_eq(conf_append(conf_store, src, conf_three, 2), 3);
    conf_save_extra_ok(conf_store, src, "{\"a\":2,\"b\":1}");
    ck_assert_int_eq(conf_length(conf_store, dst), 2);
    conf_assert_extra(conf_store, dst, "{\"a\":1}");
    ck_assert_int_eq(conf_append(conf_store, dst, conf_three + 2, 1), 2);
    conf_save_extra_ok(conf_store, dst, "{\"c\":3}");
    ck_assert_int_eq(conf_length(conf_store, src), 5);
    conf_assert_extra(conf_store, src, "{\"a\":2,\"b\":1}");
    conf_assert_extra(conf_store, dst, "{\"a\":1,\"c\":3}");
    convo_history *h = conf_load(conf_store, dst, NULL);
    conf_assert_message(h, 2, conf_three[2], strlen(conf_three[2]), "tool", 2);
    convo_history_free(h);
    ASSERT_OK(convo_thread_delete(conf_store, src, &err), err);
    ck_assert_int_eq(conf_length(conf_store, dst), 3);
}
END_TEST

START_TEST(test_fork_extra_only_source)
{
    char src[256], dst[256];
    TID(src, "src");
    TID(dst, "dst");
    conf_save_extra_ok(conf_store, src, "{\"only\":\"extra\"}");
    convo_error err;
    ASSERT_FAILS(convo_thread_fork(conf_store, src, dst, 1, &err), err, CONVO_EINVAL);
    ASSERT_OK(convo_thread_fork(conf_store, src, dst, -1, &err), err);
    ck_assert_int_eq(conf_length(conf_store, dst), 0);
    conf_assert_extra(conf_store, dst, "{\"only\":\"extra\"}");
}
END_TEST

/* Idempotency keys stay with the source: a retry on the fork stores anew. */
START_TEST(test_fork_leaves_idempotency_keys)
{
    char src[256], dst[256];
    TID(src, "src");
    TID(dst, "dst");
    convo_append_result r;
    convo_error err;
    ASSERT_OK(conf_append_opts(conf_store, src, conf_three, 2, "k", -1, &r, &err), err);
    ASSERT_OK(convo_thread_fork(conf_store, src, dst, -1, &err), err);
    ASSERT_OK(conf_append_opts(conf_store, dst, conf_three, 2, "k", -1, &r, &err), err);
    conf_assert_result(&r, 2, 2, 0);
    ASSERT_OK(conf_append_opts(conf_store, src, conf_three, 2, "k", -1, &r, &err), err);
    conf_assert_result(&r, 0, 2, 1);
}
END_TEST

void conf_add_thread_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "extra");
    tcase_add_test(tc, test_extra_shallow_merge);
    tcase_add_test(tc, test_extra_null_is_a_value);
    tcase_add_test(tc, test_extra_odd_keys);
    tcase_add_test(tc, test_extra_types);
    tcase_add_test(tc, test_extra_number_precision);
    tcase_add_test(tc, test_extra_many_keys);
    tcase_add_test(tc, test_extra_invalid);
    tcase_add_test(tc, test_extra_and_messages_independent);
    tc = conf_tcase(s, "list");
    tcase_add_test(tc, test_list_byte_order);
    tcase_add_test(tc, test_list_after);
    tcase_add_test(tc, test_list_pagination);
    tcase_add_test(tc, test_list_last_page);
    tcase_add_test(tc, test_list_deleted_disappear);
    tcase_add_test(tc, test_list_arguments);
    tc = conf_tcase(s, "delete");
    tcase_add_test(tc, test_delete_removes_everything);
    tcase_add_test(tc, test_delete_unknown);
    tcase_add_test(tc, test_delete_extra_only_thread);
    tcase_add_test(tc, test_delete_spares_neighbours);
    tc = conf_tcase(s, "fork");
    tcase_add_test(tc, test_fork_copies);
    tcase_add_test(tc, test_fork_errors);
    tcase_add_test(tc, test_fork_independent);
    tcase_add_test(tc, test_fork_extra_only_source);
    tcase_add_test(tc, test_fork_leaves_idempotency_keys);
}
