/* unit_body.c — the JSON code of checkpoint bodies (lib/body_json.c) and the
 * choice between it, the byte delta and a new base (lib/body.c): exact round
 * trips of odd bodies, the bytes a LangGraph body costs, corrupt codes. */
#include "internal.h"
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID "1f0cb2a4-8e6b-6f10-8002-3d5e1c9a7b21"

/* Codes body against base, decodes it and checks the bytes; returns the
 * code's size, or -1 when the body is not coded (then nothing to check). */
static const char *const VERSIONS[] = {"0000000000002999.0n965ubn18", "3000"};

static long round_trip_n(const char *base, size_t blen, const char *body, size_t len,
                         const char *id)
{
    convo_jdelta_names names = {id, VERSIONS, 2};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int rc = convo__jdelta_encode(base, blen, body, len, &names, &pk);
    ck_assert_int_ge(rc, 0);
    long size = -1;
    if (rc == 0 || rc == 2) { /* 2: coded, with keys the base has not */
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        ck_assert_int_eq(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
        ck_assert_uint_eq(off, sb.size);
        char *out = NULL;
        size_t n = 0;
        ck_assert_msg(convo__jdelta_decode(base, blen, &up.data, &names, &out, &n) == 0,
                      "decoding %.*s", (int)len, body);
        ck_assert_msg(n == len && memcmp(out, body, len) == 0, "round trip of %.*s gave %.*s",
                      (int)len, body, (int)n, out);
        free(out);
        msgpack_unpacked_destroy(&up);
        size = (long)sb.size;
    }
    msgpack_sbuffer_destroy(&sb);
    return size;
}

static long round_trip(const char *base, const char *body, const char *id)
{
    return round_trip_n(base, strlen(base), body, strlen(body), id);
}

static const char *JS_BASE =
    "{\"v\":4,\"id\":\"1f0cb2a4-0000-6f10-8000-3d5e1c9a7b21\",\"ts\":\"2026-11-26T23:01:02.345Z\","
    "\"channel_values\":{},\"channel_versions\":{\"__start__\":1,\"messages\":2,"
    "\"branch:to:agent\":2},\"versions_seen\":{\"__input__\":{},\"__start__\":{\"__start__\":1},"
    "\"agent\":{\"branch:to:agent\":2}},\"pending_sends\":[]}";

/* What LangGraph.js writes each step costs a few bytes, not its text. */
START_TEST(test_jdelta_langgraph_body)
{
    char body[1024];
    snprintf(body, sizeof body,
             "{\"v\":4,\"id\":\"%s\",\"ts\":\"2026-11-26T23:09:59.999Z\","
             "\"channel_values\":{},\"channel_versions\":{\"__start__\":2998,\"messages\":3000,"
             "\"branch:to:agent\":3000},\"versions_seen\":{\"__input__\":{},\"__start__\":"
             "{\"__start__\":2998},\"agent\":{\"branch:to:agent\":2999}},\"pending_sends\":[]}",
             UUID);
    long n = round_trip(JS_BASE, body, UUID);
    ck_assert_int_gt(n, 0);
    ck_assert_int_le(n, 36); /* the text is 330 bytes; the byte delta ~120 */
    /* LangGraph.js 1.x: string versions with a random part; those the
     * checkpoint's channel list holds are a reference of 3 bytes */
    const char *js1 =
        "{\"v\":4,\"id\":\"" UUID "\",\"ts\":\"2026-11-26T23:09:59.999Z\",\"channel_versions\":"
        "{\"__start__\":\"0000000000002999.0n965ubn18\",\"messages\":\"3000\"},\"versions_seen\":"
        "{\"__input__\":{},\"__start__\":{\"__start__\":\"0000000000002998.ku1yj9nr02\"}}}";
    const char *js1_base =
        "{\"v\":4,\"id\":\"x\",\"ts\":\"2026-11-26T23:01:02.345Z\",\"channel_versions\":"
        "{\"__start__\":\"0000000000000003.2xchhcc3dy\",\"messages\":\"2\"},\"versions_seen\":"
        "{\"__input__\":{},\"__start__\":{\"__start__\":\"0000000000000001.abcdefghij\"}}}";
    n = round_trip(js1_base, js1, UUID);
    ck_assert_int_gt(n, 0);
    ck_assert_int_le(n, 44); /* 2 references, and 15 + 4 bytes of the version not listed */
    /* the same body as the base: one byte of code and the style */
    ck_assert_int_le(round_trip(JS_BASE, JS_BASE, "other"), 4);
    /* Python's json.dumps defaults: ", " and ": ", 49-character versions */
    const char *py_base =
        "{\"v\": 1, \"ts\": \"2026-11-26T23:01:02.345678+00:00\", \"id\": \"x\", "
        "\"channel_versions\": {\"messages\": \"00000000000000000000000000000002.0.4861\"}}";
    const char *py = "{\"v\": 1, \"ts\": \"2026-11-26T23:01:03.000001+00:00\", \"id\": \"" UUID
                     "\", \"channel_versions\": {\"messages\": "
                     "\"00000000000000000000000000000012.0.9173\", \"n\xc3\xa9\": \"\xe2\x82\xac\"}}";
    n = round_trip(py_base, py, UUID);
    ck_assert_int_gt(n, 0);
    ck_assert_int_le(n, 40);
}
END_TEST

/* A LangGraph Python body, msgpack as its serializer writes it. */
static size_t py_body(char *out, const char *id, const char *ts, const char *v1, const char *v2,
                      int odd)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, odd ? 6 : 5);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_int64(&pk, 4);
    msgpack_pack_str_with_body(&pk, "ts", 2);
    msgpack_pack_str_with_body(&pk, ts, strlen(ts));
    msgpack_pack_str_with_body(&pk, "id", 2);
    msgpack_pack_str_with_body(&pk, id, strlen(id));
    msgpack_pack_str_with_body(&pk, "channel_versions", 16);
    msgpack_pack_map(&pk, 2);
    msgpack_pack_str_with_body(&pk, "__start__", 9);
    msgpack_pack_str_with_body(&pk, v1, strlen(v1));
    msgpack_pack_str_with_body(&pk, "messages", 8);
    msgpack_pack_str_with_body(&pk, v2, strlen(v2));
    msgpack_pack_str_with_body(&pk, "pending_sends", 13);
    msgpack_pack_array(&pk, 0);
    if (odd == 1) { /* a float32 and a bin: no tree keeps them exactly */
        msgpack_pack_str_with_body(&pk, "f", 1);
        msgpack_pack_float(&pk, 0.5f);
    } else if (odd == 2) {
        msgpack_pack_str_with_body(&pk, "b", 1);
        msgpack_pack_bin_with_body(&pk, "\x00\x01", 2);
    } else if (odd == 3) { /* a float64, nil, booleans, a negative int */
        msgpack_pack_str_with_body(&pk, "o", 1);
        msgpack_pack_array(&pk, 5);
        msgpack_pack_double(&pk, 0.25);
        msgpack_pack_nil(&pk);
        msgpack_pack_true(&pk);
        msgpack_pack_false(&pk);
        msgpack_pack_int64(&pk, -70000);
    }
    memcpy(out, sb.data, sb.size);
    size_t n = sb.size;
    msgpack_sbuffer_destroy(&sb);
    return n;
}

START_TEST(test_jdelta_msgpack_body)
{
    char base[512], body[512];
    size_t bl = py_body(base, "x", "2026-11-26T23:01:02.345678+00:00",
                        "00000000000000000000000000000001.0.4861", "00000000000000000000000000000002.0.1234", 0);
    size_t n = py_body(body, UUID, "2026-11-26T23:01:03.000001+00:00",
                       "0000000000002999.0n965ubn18", "00000000000000000000000000000012.0.9173", 0);
    long size = round_trip_n(base, bl, body, n, UUID);
    ck_assert_int_gt(size, 0);
    ck_assert_int_le(size, 40); /* of 180 bytes */
    n = py_body(body, UUID, "2026-11-26T23:01:03.000001+00:00", "a", "b", 3);
    ck_assert_int_gt(round_trip_n(base, bl, body, n, UUID), 0);
    for (int odd = 1; odd <= 2; odd++) {
        n = py_body(body, UUID, "2026-11-26T23:01:03.000001+00:00", "a", "b", odd);
        ck_assert_int_eq(round_trip_n(base, bl, body, n, UUID), -1);
    }
    /* a msgpack body against a JSON base, and a truncated one: not coded */
    n = py_body(body, UUID, "t", "a", "b", 0);
    ck_assert_int_eq(round_trip_n(JS_BASE, strlen(JS_BASE), body, n, UUID), -1);
    ck_assert_int_eq(round_trip_n(base, bl, body, n - 1, UUID), -1);
}
END_TEST

/* Bodies that follow none of the rules still come back byte for byte. */
START_TEST(test_jdelta_odd_bodies)
{
    const char *odd[] = {
        /* an id that is not a UUID, and not the checkpoint's */
        "{\"v\":4,\"id\":\"checkpoint #7 \xc3\xbc\",\"ts\":\"2026-11-26T23:01:02.345Z\"}",
        /* times of another shape, out of range, before the base's, leap days */
        "{\"ts\":\"2026-11-26T23:01:02.345678+00:00\"}",
        "{\"ts\":\"2026-11-26T23:01:02Z\"}",
        "{\"ts\":\"2026-02-30T23:01:02.345Z\"}",
        "{\"ts\":\"2024-02-29T00:00:00.000Z\"}",
        "{\"ts\":\"1970-01-01T00:00:00.000Z\"}",
        "{\"ts\":\"0000-03-01T00:00:00.000Z\"}",
        "{\"ts\":\"9999-12-31T23:59:59.999Z\"}",
        "{\"ts\":\"2026-11-26T23:01:02.34Z\"}",
        "{\"ts\":\"2026-11-26 23:01:02.345Z\"}",
        "{\"ts\":\"2026-11-26T23:01:02.345+05:30\"}",
        "{\"ts\":\"2026-11-26T23:01:02.345Zjunk-longer-than-eight\"}",
        /* versions that go down, negative, at the ends of int64 */
        "{\"channel_versions\":{\"__start__\":-5,\"messages\":1,\"branch:to:agent\":"
        "9223372036854775807},\"versions_seen\":{\"agent\":{\"x\":-9223372036854775808}}}",
        /* keys in another order, some gone, some new; containers swapped */
        "{\"ts\":1,\"v\":4,\"channel_values\":[],\"pending_sends\":{},\"new\":null}",
        "{\"versions_seen\":[1,[2,{\"a\":null}]],\"channel_versions\":\"text\"}",
        "{\"v\":[],\"channel_versions\":{},\"versions_seen\":{\"__input__\":[],\"agent\":true}}",
        /* reals, booleans, nulls, empty keys, escapes, unicode in keys and values */
        "{\"\":0.5,\"b\":false,\"c\":null,\"d\":-0.25,\"e\":\"line\\nbreak \\\"q\\\" \\\\\","
        "\"\xf0\x9f\x98\x80\":\"\xe2\x82\xac\xc3\xbc\"}",
        "{\"v\":4,\"id\":\"" UUID "\",\"list\":[\"" UUID "\",\"" UUID "x\",null,1,[[[]]]]}",
        /* arrays longer and shorter than the base's */
        "{\"pending_sends\":[1,2,3]}",
        "{}",
    };
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++)
        ck_assert_msg(round_trip(JS_BASE, odd[i], UUID) > 0, "not coded: %s", odd[i]);
    /* a long, non-ASCII value (metadata-sized and more) */
    size_t big = 200000;
    char *huge = malloc(big + 64);
    ck_assert_ptr_nonnull(huge);
    int n = snprintf(huge, 64, "{\"v\":4,\"ts\":\"");
    for (size_t k = 0; k < big; k += 2)
        memcpy(huge + n + k, "\xc3\xa9", 2);
    strcpy(huge + n + big, "\"}");
    ck_assert_int_gt(round_trip(JS_BASE, huge, UUID), (long)big);
    free(huge);
    /* a base with another shape than the body */
    ck_assert_int_gt(round_trip("[1,2,{\"a\":1}]", "{\"a\":[1,{\"b\":2}]}", UUID), 0);
    ck_assert_int_gt(round_trip("[\"2026-11-26T23:01:02.345Z\"]", "[\"2026-11-26T23:01:02.346Z\"]",
                                UUID),
                     0);
}
END_TEST

/* Text jansson would not write back the same is not coded (the byte delta
 * takes it), nor is what is nested too deeply. */
START_TEST(test_jdelta_not_coded)
{
    const char *not_coded[] = {
        "{ \"v\":4}", "{\"v\":4 }", "{\"v\": 4,\"a\":1}", "{\"v\":1e5}", "{\"v\":1.50}",
        "{\"v\":4,\"v\":5}", "not json", "{\"v\":99999999999999999999999}",
        "{\"a\":\"\\u00e9\"}", "{\"a\":\"\\/\"}", "{\"a\":\"\\u00e9\xc3\xa9\"}", "",
    };
    for (size_t i = 0; i < sizeof not_coded / sizeof *not_coded; i++)
        ck_assert_msg(round_trip(JS_BASE, not_coded[i], UUID) == -1, "coded: %s",
                      not_coded[i]);
    ck_assert_int_eq(round_trip("not json", "{\"v\":4}", UUID), -1);
    char deep[400] = "";
    for (int i = 0; i < 100; i++)
        strcat(deep, "[");
    for (int i = 0; i < 100; i++)
        strcat(deep, "]");
    ck_assert_int_eq(round_trip(JS_BASE, deep, UUID), -1);
}
END_TEST

static int decode_code(const char *base, const void *code, size_t len, char **out)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0, n = 0;
    ck_assert_int_eq(msgpack_unpack_next(&up, code, len, &off), MSGPACK_UNPACK_SUCCESS);
    convo_jdelta_names names = {UUID, VERSIONS, 2};
    int rc = convo__jdelta_decode(base, strlen(base), &up.data, &names, out, &n);
    msgpack_unpacked_destroy(&up);
    return rc;
}

/* A code that does not fit its base is CONVO_ECORRUPT, never a wrong body. */
START_TEST(test_jdelta_corrupt)
{
    struct {
        const char *code;
        size_t len;
    } bad[] = {
        {"\x92\x04\xc0", 3},                 /* style out of range */
        {"\x93\x00\xc0\xc0", 4},             /* three members */
        {"\x92\x00\x9f" "\xc0\xc0\xc0\xc0\xc0\xc0\xc0\xc0\xc0\xc0\xc0\xc0\xc0\xc0\xc0", 18},
                                             /* more values than the base has keys */
        {"\x92\x00\x81\x7f\x01", 5},         /* a key number past the base's */
        {"\x92\x00\x81\xa1x\xc0", 6},        /* a new key, "unchanged" without a base */
        {"\x92\x00\xd4\x09\x00", 5},         /* an unknown ext */
        {"\x92\x00\x91\xd4\x03\x02", 6},     /* a time where the base has an int */
        {"\x92\x00\x82\xa1x\x01\xa1x\x02", 10}, /* a key twice */
        {"\x92\x00\xa2\xc3\x28", 5},         /* not UTF-8 */
        {"\x92\x00\x91\xd4\x06\x02", 6},     /* a channel version past the list */
        {"\x92\x00\x81\xa2\xc3\x28\x01", 7}, /* a key not UTF-8 (was freed twice) */
        {"\x92\x00\x93\xc0\xc0\xc7\x0a\x03\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 18},
                                             /* a time INT64_MAX units past the base's */
        {"\x92\x00\x93\xc0\xc0\xc7\x0a\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 18},
                                             /* ... INT64_MIN units before it */
        {"\x92\x00\xd4\x08\x03", 5},         /* ext 8: a version past the list */
        {"\x92\x00\xd4\x08\x80", 5},         /* ext 8: a varint cut short */
        {"\x92\x00\xc7\x09\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00", 14},
                                             /* ext 8: 9 places, the base has 8 keys */
        {"\x92\x00\x91\xd4\x08\x01", 6},     /* ext 8 where the base has an int */
        {"\x92\x00\x81\xa1x\xd4\x08\x01", 8}, /* ext 8 without a base */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *out = NULL;
        ck_assert_msg(decode_code(JS_BASE, bad[i].code, bad[i].len, &out) == CONVO_ECORRUPT,
                      "case %zu decoded", i);
        ck_assert_ptr_null(out);
    }
    char *out = NULL;
    ck_assert_int_eq(decode_code("not json", "\x92\x00\xc0", 3, &out), CONVO_ECORRUPT);
    /* a counter with a random tail (ext 7) that does not fit */
    const char *seq_base = "{\"a\":\"0000000000000001.abc\"}";
    struct {
        const char *code;
        size_t len;
    } seq_bad[] = {
        {"\x92\x00\x91\xd5\x07\x00\x00", 7},             /* a tail of 0 digits */
        {"\x92\x00\x91\xd6\x07\x00\x01\x05\x00", 9},     /* 2 bytes for 1 digit */
        {"\x92\x00\x91\xc7\x03\x07\x00\x01\x24", 9},     /* 36: not 1 base-36 digit */
        {"\x92\x00\x91\xc7\x03\x07\x09\x01\x05", 9},     /* a counter below 0 */
        {"\x92\x00\x91\xc7\x03\x07\x00\x0d\x05", 9},     /* 13 digits */
    };
    for (size_t i = 0; i < sizeof seq_bad / sizeof *seq_bad; i++) {
        ck_assert_msg(decode_code(seq_base, seq_bad[i].code, seq_bad[i].len, &out) ==
                          CONVO_ECORRUPT,
                      "counter case %zu decoded", i);
        ck_assert_ptr_null(out);
    }
    /* the right code decodes: 0000000000000002.f */
    ck_assert_int_eq(decode_code(seq_base, "\x92\x00\x91\xc7\x03\x07\x02\x01\x0f", 9, &out),
                     0);
    ck_assert_int_eq(memcmp(out, "{\"a\":\"0000000000000002.f\"}", 26), 0);
    free(out);
}
END_TEST

/* JS LangGraph's versions ("0000000000002998.ku1yj9nr02") that the channel
 * list does not hold (versions_seen) are coded as the counter's difference to
 * the base's and the tail in base 36: 12 bytes, not the 18 of a shared prefix
 * and the rest; any other string falls back, and every one comes back
 * exactly. */
START_TEST(test_jdelta_counter_tail)
{
    char body[512], base[512];
    const char *pairs[][2] = {
        {"0000000000002998.ku1yj9nr02", "0000000000000001.abcdefghij"},
        {"0000000000000001.0000000000", "0000000000002998.ku1yj9nr02"}, /* lower, zeros */
        {"0000000000000009.zzzzzzzzzzzz", "0000000000000001.a"},      /* 12 digits */
        {"0000000000000009.zzzzzzzzzzzzz", "0000000000000001.a"},     /* 13: a prefix */
        {"000000000000009.abc", "0000000000000001.a"},                /* other width */
        {"0000000000000009.ABC", "0000000000000001.a"},               /* not base 36 */
        {"00000000000000000000000000000005.0.837", "00000000000000000000000000000001.0.1"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        snprintf(body, sizeof body, "{\"id\":\"" UUID "\",\"seen\":{\"x\":\"%s\"}}",
                 pairs[i][0]);
        snprintf(base, sizeof base, "{\"id\":\"b\",\"seen\":{\"x\":\"%s\"}}", pairs[i][1]);
        long n = round_trip(base, body, UUID);
        ck_assert_msg(n > 0, "case %zu not coded", i);
        if (i == 0)
            ck_assert_int_le(n, 20); /* with a shared prefix and the rest: 26 */
    }
}
END_TEST

/* An object of the base's keys whose changed values are all the checkpoint's
 * versions (channel_versions, a node's versions_seen) is one ext 8 with a byte
 * a key (0: unchanged, else 1 + the version's index), not an array of ext 6
 * references of 3 bytes each; an object with any other change, or a version
 * that is the checkpoint's id, is coded as before; each comes back exactly. */
START_TEST(test_jdelta_versions_object)
{
    const char *base = "{\"id\":\"b\",\"cv\":{\"a\":\"x\",\"b\":\"y\",\"c\":\"z\",\"d\":\"w\"}}";
    char body[512];
    snprintf(body, sizeof body,
             "{\"id\":\"" UUID "\",\"cv\":{\"a\":\"%s\",\"b\":\"%s\",\"c\":\"%s\",\"d\":\"w\"}}",
             VERSIONS[0], VERSIONS[1], VERSIONS[1]);
    /* style, the array of 2, ext 2 for the id, ext 8 of 3 places (6 bytes)
     * against 10 for an array of three ext 6 */
    ck_assert_int_eq(round_trip(base, body, UUID), 2 + 1 + 3 + 6);
    /* unchanged places among versions */
    snprintf(body, sizeof body,
             "{\"id\":\"" UUID "\",\"cv\":{\"a\":\"x\",\"b\":\"%s\",\"c\":\"z\",\"d\":\"%s\"}}",
             VERSIONS[1], VERSIONS[0]);
    ck_assert_int_eq(round_trip(base, body, UUID), 2 + 1 + 3 + 6);
    /* one version: ext 8 of one byte */
    snprintf(body, sizeof body,
             "{\"id\":\"" UUID "\",\"cv\":{\"a\":\"%s\",\"b\":\"y\",\"c\":\"z\",\"d\":\"w\"}}",
             VERSIONS[1]);
    ck_assert_int_eq(round_trip(base, body, UUID), 2 + 1 + 3 + 3);
    /* a change that is not a version, an int, the id: not ext 8, still exact */
    const char *other[] = {"\"q\"", "7", "\"" UUID "\""};
    for (size_t i = 0; i < 3; i++) {
        snprintf(body, sizeof body,
                 "{\"id\":\"" UUID "\",\"cv\":{\"a\":\"%s\",\"b\":%s,\"c\":\"z\",\"d\":\"w\"}}",
                 VERSIONS[0], other[i]);
        long n = round_trip(base, body, UUID);
        ck_assert_msg(n > 2 + 1 + 3 + 4, "case %zu: %ld bytes", i, n);
    }
    /* another key order: a map, as before */
    snprintf(body, sizeof body,
             "{\"id\":\"" UUID "\",\"cv\":{\"b\":\"%s\",\"a\":\"x\",\"c\":\"z\",\"d\":\"w\"}}",
             VERSIONS[0]);
    ck_assert_int_gt(round_trip(base, body, UUID), 0);
}
END_TEST

/* Times whose units do not fit in 64 bits (nanoseconds after 2262) are coded
 * as strings, not as a difference that overflowed. */
START_TEST(test_jdelta_time_range)
{
    const char *base = "{\"ts\":\"2026-11-26T23:01:02.123456789Z\"}";
    const char *bodies[] = {
        "{\"ts\":\"2026-11-26T23:01:03.123456789Z\"}",
        "{\"ts\":\"9999-12-31T23:59:59.999999999Z\"}",
        "{\"ts\":\"0000-01-01T00:00:00.000000000Z\"}",
        "{\"ts\":\"9999-12-31T23:59:59.99999999+00:00\"}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++)
        ck_assert_int_gt(round_trip(base, bodies[i], UUID), 0);
    /* a base at the far end and a body at the near one */
    ck_assert_int_gt(round_trip("{\"ts\":\"0000-01-01T00:00:00.0000000Z\"}",
                                "{\"ts\":\"9999-12-31T23:59:59.9999999Z\"}", UUID),
                     0);
}
END_TEST

/* A version-1 record whose stored length is not what its ops make is
 * CONVO_ECORRUPT before anything of that length is allocated. */
static int resolve_v1(const char *record, size_t len)
{
    convo_checkpoint *cp = convo__checkpoint_new("t", "", "c", NULL, "{}", CONVO_DELTA_TYPE,
                                                 record, len, 0, 0);
    ck_assert_ptr_nonnull(cp);
    ck_assert_int_eq(convo__checkpoint_add_channel(cp, CONVO_BODY_CHANNEL, "b", "json", "{}", 2),
                     0);
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__body_resolve(cp, &err);
    if (rc == 0) {
        convo_blob b = convo_checkpoint_body(cp);
        ck_assert_str_eq(b.type, "json");
        ck_assert_uint_eq(b.len, 2);
        ck_assert_int_eq(memcmp(b.bytes, "{}", 2), 0);
    }
    convo_checkpoint_free(cp);
    return rc;
}

START_TEST(test_body_corrupt_length)
{
    /* [1, "json", 2, bin(COPY 0 2)]: well formed */
    ck_assert_int_eq(resolve_v1("\x94\x01\xa4json\x02\xc4\x03\x00\x00\x02", 13), 0);
    /* the same ops with a length of 2^62 (malloc'd whole before) */
    ck_assert_int_eq(resolve_v1("\x94\x01\xa4json\xcf\x40\0\0\0\0\0\0\0\xc4\x03\x00\x00\x02", 21),
                     CONVO_ECORRUPT);
    /* a length past what the ops make, and one short of it */
    ck_assert_int_eq(resolve_v1("\x94\x01\xa4json\x03\xc4\x03\x00\x00\x02", 13),
                     CONVO_ECORRUPT);
    ck_assert_int_eq(resolve_v1("\x94\x01\xa4json\x01\xc4\x03\x00\x00\x02", 13),
                     CONVO_ECORRUPT);
    /* a negative length, a copy past the base, an op that is neither */
    ck_assert_int_eq(resolve_v1("\x94\x01\xa4json\xff\xc4\x03\x00\x00\x02", 13),
                     CONVO_ECORRUPT);
    ck_assert_int_eq(resolve_v1("\x94\x01\xa4json\x02\xc4\x03\x00\x01\x02", 13),
                     CONVO_ECORRUPT);
    ck_assert_int_eq(resolve_v1("\x94\x01\xa4json\x02\xc4\x03\x02\x00\x02", 13),
                     CONVO_ECORRUPT);
}
END_TEST

/* The plan takes the smallest record: the JSON code for a LangGraph body, the
 * byte delta for text jansson would change, a new base for a drifted body. */
START_TEST(test_body_plan_choice)
{
    convo_checkpoint *parent =
        convo__checkpoint_new("t", "", "p", NULL, "{}", NULL, NULL, 0, 0, 0);
    ck_assert_ptr_nonnull(parent);
    ck_assert_int_eq(convo__checkpoint_add_channel(parent, CONVO_BODY_CHANNEL, "p", "json",
                                                   JS_BASE, strlen(JS_BASE)),
                     0);
    char body[1024];
    snprintf(body, sizeof body, "%s", JS_BASE);
    memcpy(strstr(body, "1f0cb2a4-0000"), UUID, strlen(UUID));
    memcpy(strstr(body, "23:01:02.345"), "23:05:07.001", 12);
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = UUID;
    cp.body = (convo_blob){"json", body, strlen(body)};
    convo_body_plan plan;
    convo_error err;
    ck_assert_int_eq(convo__body_plan(parent, &cp, &plan, &err), 0);
    ck_assert_uint_le(plan.delta.len, 16);
    ck_assert_str_eq(plan.channel.version, "p"); /* the parent's base */
    ck_assert_ptr_null(plan.channel.value);
    /* read back through the reserved channel */
    convo_checkpoint *got =
        convo__checkpoint_new("t", "", UUID, "p", "{}", CONVO_DELTA_TYPE, plan.delta.bytes,
                              plan.delta.len, 0, 0);
    ck_assert_int_eq(convo__checkpoint_add_channel(got, CONVO_BODY_CHANNEL, "p", "json",
                                                   JS_BASE, strlen(JS_BASE)),
                     0);
    ck_assert_int_eq(convo__body_resolve(got, &err), 0);
    convo_blob b = convo_checkpoint_body(got);
    ck_assert_str_eq(b.type, "json");
    ck_assert_uint_eq(b.len, strlen(body));
    ck_assert_int_eq(memcmp(b.bytes, body, b.len), 0);
    ck_assert_uint_eq(convo_checkpoint_channel_count(got), 0);
    convo_checkpoint_free(got);
    convo__body_plan_free(&plan);
    /* a space jansson would not write: the byte delta (version 1) */
    char spaced[1100];
    snprintf(spaced, sizeof spaced, "%s ", body);
    cp.body.bytes = spaced;
    cp.body.len = strlen(spaced);
    ck_assert_int_eq(convo__body_plan(parent, &cp, &plan, &err), 0);
    ck_assert_int_eq(((const unsigned char *)plan.delta.bytes)[1], 1);
    ck_assert_str_eq(plan.channel.version, "p");
    convo__body_plan_free(&plan);
    /* a body with a key the base has not: coded, but a new base */
    char more[1100];
    snprintf(more, sizeof more, "%.*s,\"new\":1}", (int)strlen(body) - 1, body);
    cp.body.bytes = more;
    cp.body.len = strlen(more);
    ck_assert_int_eq(convo__body_plan(parent, &cp, &plan, &err), 0);
    ck_assert_str_eq(plan.channel.version, UUID);
    ck_assert_ptr_nonnull(plan.channel.value);
    convo__body_plan_free(&plan);
    /* another body altogether: a new base, this checkpoint's */
    cp.body.bytes = "{\"other\":\"altogether\"}";
    cp.body.len = strlen(cp.body.bytes);
    ck_assert_int_eq(convo__body_plan(parent, &cp, &plan, &err), 0);
    ck_assert_str_eq(plan.channel.version, UUID);
    ck_assert_ptr_nonnull(plan.channel.value);
    convo__body_plan_free(&plan);
    convo_checkpoint_free(parent);
}
END_TEST

/* Metadata as shape and values: exact for jansson's compact text, nothing
 * else coded, corrupt values refused. */
static void shape_round_trip(const char *json, const char *want_shape, long max_values)
{
    char *shape = NULL, *back = NULL;
    void *values = NULL;
    size_t vlen = 0, len = 0;
    ck_assert_int_eq(convo__json_shape_split(json, strlen(json), 512, &shape, &values, &vlen), 0);
    if (want_shape)
        ck_assert_str_eq(shape, want_shape);
    ck_assert_int_le((long)vlen, max_values);
    ck_assert_int_eq(convo__json_shape_join(shape, strlen(shape), values, vlen, &back, &len), 0);
    ck_assert_uint_eq(len, strlen(json));
    ck_assert_str_eq(back, json);
    free(shape);
    free(values);
    free(back);
}

START_TEST(test_json_shape)
{
    shape_round_trip("{\"source\":\"loop\",\"step\":2998,\"parents\":{}}",
                     "{\"source\":0,\"step\":0,\"parents\":{}}", 9);
    shape_round_trip("{\"source\":\"loop\",\"step\":7,\"parents\":{},"
                     "\"counters_since_delta_snapshot\":{\"messages\":3}}",
                     NULL, 9);
    shape_round_trip("{}", "{}", 1);
    /* odd metadata: unicode keys and values, reals, nulls, booleans, arrays,
     * numbers at the ends of int64, a long text */
    shape_round_trip("{\"\xc3\xa9t\xc3\xa9\":\"\xf0\x9f\x98\x80\",\"r\":0.5,\"n\":null,\"t\":true,"
                     "\"f\":false,\"a\":[1,\"x\",[],{\"k\":-9223372036854775808}],"
                     "\"big\":9223372036854775807,\"e\":\"\\n\\\"\"}",
                     "{\"\xc3\xa9t\xc3\xa9\":0,\"r\":0,\"n\":null,\"t\":true,\"f\":false,"
                     "\"a\":[0,0,[],{\"k\":0}],\"big\":0,\"e\":0}", 64);
    char *long_text = malloc(100100);
    ck_assert_ptr_nonnull(long_text);
    strcpy(long_text, "{\"writes\":\"");
    memset(long_text + 11, 'x', 100000);
    strcpy(long_text + 100011, "\"}");
    shape_round_trip(long_text, "{\"writes\":0}", 100010);
    free(long_text);
    /* not coded: not an object, not jansson's compact text, a shape too long */
    const char *not_coded[] = {"[1]", "{ \"a\":1}", "{\"a\":1.50}", "{\"a\":1,\"a\":2}",
                               "{\"a\":\"\\u00e9\"}", "nope", ""};
    char *shape = NULL;
    void *values = NULL;
    size_t vlen = 0;
    for (size_t i = 0; i < sizeof not_coded / sizeof *not_coded; i++) {
        ck_assert_msg(convo__json_shape_split(not_coded[i], strlen(not_coded[i]), 512, &shape,
                                              &values, &vlen) == 1,
                      "coded: %s", not_coded[i]);
        ck_assert_ptr_null(shape);
        ck_assert_ptr_null(values);
    }
    ck_assert_int_eq(convo__json_shape_split("{\"abcdef\":1}", 12, 10, &shape, &values, &vlen), 1);
    /* values that do not fit their shape */
    char *back = NULL;
    size_t len = 0;
    const char *shape2 = "{\"a\":0,\"b\":[0]}";
    struct {
        const char *v;
        size_t n;
    } bad[] = {{"\x91\x01", 2},                /* one value short */
               {"\x93\x01\x02\x03", 4},        /* one too many */
               {"\x92\x01\xc0", 3},            /* nil is no value */
               {"\x92\x01", 2},                /* truncated */
               {"\x82\x01\x02\x03\x04", 5}};  /* not an array */
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(convo__json_shape_join(shape2, strlen(shape2), bad[i].v, bad[i].n, &back,
                                             &len) == CONVO_ECORRUPT,
                      "case %zu joined", i);
        ck_assert_ptr_null(back);
    }
    ck_assert_int_eq(convo__json_shape_join("{\"a\":1}", 7, "\x91\x01", 2, &back, &len),
                     CONVO_ECORRUPT); /* 1 is no placeholder */
    ck_assert_int_eq(convo__json_shape_join("[0]", 3, "\x91\x01", 2, &back, &len),
                     CONVO_ECORRUPT); /* a shape is an object */
}
END_TEST

void unit_add_body_tests(Suite *s)
{
    TCase *tc = tcase_create("body");
    tcase_add_test(tc, test_jdelta_langgraph_body);
    tcase_add_test(tc, test_jdelta_odd_bodies);
    tcase_add_test(tc, test_jdelta_msgpack_body);
    tcase_add_test(tc, test_jdelta_not_coded);
    tcase_add_test(tc, test_jdelta_corrupt);
    tcase_add_test(tc, test_jdelta_time_range);
    tcase_add_test(tc, test_jdelta_counter_tail);
    tcase_add_test(tc, test_jdelta_versions_object);
    tcase_add_test(tc, test_body_corrupt_length);
    tcase_add_test(tc, test_body_plan_choice);
    tcase_add_test(tc, test_json_shape);
    suite_add_tcase(s, tc);
}
