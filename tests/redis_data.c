/* redis_data.c — Redis records as stored: a record, extra field, checkpoint
 * or value that does not decode is CONVO_ECORRUPT and a put meeting one
 * writes nothing; the extra limit counts exact bytes; message times come from
 * the server's clock. Part of tests/redis_extra (redis_extra.h). */
#include "redis_extra.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_corrupt)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-corrupt", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    redisContext *c = plain_connect(base_url);
    append_ok(s, "m", NULL);
    extra_ok(s, "m", "{\"a\":1}");
    convo_history *h;
    convo_error err;
    freeReplyObject(cmd(c, "LSET %s:{m}:msgs 1 %s", prefix, "not msgpack"));
    ck_assert_int_eq(convo_load(s, "m", NULL, &h, &err), CONVO_ECORRUPT);
    convo_load_opts o = CONVO_LOAD_OPTS_INIT;
    o.limit = 1; /* the good record alone still loads */
    ck_assert_int_eq(convo_load(s, "m", &o, &h, &err), 0);
    convo_history_free(h);
    freeReplyObject(cmd(c, "HSET %s:{m}:extra \"b\" %s", prefix, "no-ordinal"));
    ck_assert_int_eq(convo_load(s, "m", &o, &h, &err), CONVO_ECORRUPT);
    /* a checkpoint record, a stored value and a pending write that do not decode */
    checkpoint_ok(s, "m", "");
    convo_checkpoint *cp;
    redisReply *rec = cmd(c, "HGET %s:{m}:cp %b", prefix, "\0c1", (size_t)3);
    ck_assert_int_eq(rec->type, REDIS_REPLY_STRING);
    freeReplyObject(cmd(c, "HSET %s:{m}:cp %b %b", prefix, "\0c1", (size_t)3, rec->str,
                        rec->len - 1));
    ck_assert_int_eq(convo_checkpoint_get(s, "m", "", "c1", &cp, &err), CONVO_ECORRUPT);
    freeReplyObject(cmd(c, "HSET %s:{m}:cp %b %b", prefix, "\0c1", (size_t)3, rec->str, rec->len));
    freeReplyObject(rec);
    ck_assert_int_eq(convo_checkpoint_get(s, "m", "", "c1", &cp, &err), 0);
    convo_checkpoint_free(cp);
    freeReplyObject(cmd(c, "HSET %s:{m}:blobs %b junk", prefix, "\0n\0" "1", (size_t)4));
    ck_assert_int_eq(convo_checkpoint_get(s, "m", "", "c1", &cp, &err), CONVO_ECORRUPT);
    ck_assert_int_eq(convo_thread_delete(s, "m", &err), 0);
    redisFree(c);
    convo_close(s);
}
END_TEST

/* A put with messages replacing a checkpoint whose stored record does not
 * decode fails, and stores none of its messages: the script decodes the record
 * before its first write (Redis does not undo a script's writes on an error). */
START_TEST(test_put_log_corrupt_record_writes_nothing)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-putlog-corrupt", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    redisContext *c = plain_connect(base_url);
    const char *msg = two[0];
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "m";
    cp.checkpoint_id = "c1";
    cp.messages = &msg;
    cp.nmessages = 1;
    cp.expected_length = 0;
    cp.log_length = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "%s", err.message);
    /* 0xc1 is no msgpack type: the record's first object does not decode */
    freeReplyObject(cmd(c, "HSET %s:{m}:cp %b %b", prefix, "\0c1", (size_t)3, "\xc1", (size_t)1));
    cp.expected_length = 1;
    cp.log_length = 2;
    ck_assert_int_ne(convo_checkpoint_put(s, &cp, &err), 0);
    ck_assert_int_eq(length_of(s, "m"), 1);
    ck_assert_int_eq(convo_thread_delete(s, "m", &err), 0);
    redisFree(c);
    convo_close(s);
}
END_TEST

START_TEST(test_extra_size_exact)
{
    char prefix[80], url[512];
    snprintf(prefix, sizeof prefix, "prefix=%s-extra", run_id);
    url_with(url, sizeof url, base_url, prefix);
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.max_extra_bytes = 30;
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open_ex(&s, url, &so, &err), 0);
    extra_ok(s, "e", "{\"a\":\"0123456789\"}");
    extra_ok(s, "e", "{\"bb\":\"xy\\\"\"}"); /* {"a":"0123456789","bb":"xy\""}: 30 bytes */
    ck_assert_int_eq(convo_save_extra(s, "e", "{\"c\":0}", &err), CONVO_ETOOLARGE);
    extra_ok(s, "e", "{\"a\":\"\"}"); /* 20 */
    ck_assert_int_eq(convo_save_extra(s, "e", "{\"c\":[1,23]}", &err), CONVO_ETOOLARGE); /* 31 */
    extra_ok(s, "e", "{\"c\":[1,2]}"); /* 30 */
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "e", NULL, &h, &err), 0);
    ck_assert_str_eq(convo_history_extra(h), "{\"a\":\"\",\"bb\":\"xy\\\"\",\"c\":[1,2]}");
    convo_history_free(h);
    ck_assert_int_eq(convo_thread_delete(s, "e", &err), 0);
    convo_close(s);
}
END_TEST

START_TEST(test_created_at_server_clock)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-time", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    double before = now_s();
    append_ok(s, "t", NULL);
    convo_history *h;
    convo_error err;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    double at = (double)convo_history_created_at(h, 0) / 1e6;
    ck_assert_msg(at > before - 10 && at < now_s() + 10, "created_at %.6f vs %.6f", at, before);
    ck_assert_int_eq(convo_history_created_at(h, 0), convo_history_created_at(h, 1));
    ck_assert_str_eq(convo_history_message(h, 1, NULL), two[1]);
    convo_history_free(h);
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    convo_close(s);
}
END_TEST

void redis_add_data_tests(TCase *tc)
{
    tcase_add_test(tc, test_corrupt);
    tcase_add_test(tc, test_put_log_corrupt_record_writes_nothing);
    tcase_add_test(tc, test_extra_size_exact);
    tcase_add_test(tc, test_created_at_server_clock);
}
