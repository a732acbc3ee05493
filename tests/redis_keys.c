/* redis_keys.c — the Redis driver's key scheme seen by a plain hiredis
 * client: P:{tag}:SUFFIX, one slot per thread, the tag decoding to the id,
 * checkpoint keys included, nothing left after a delete, nothing written by a
 * store that only reads. Part of tests/redis_extra (redis_extra.h). */
#include "redis_extra.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CRC16-CCITT (XMODEM), as Redis Cluster hashes keys. */
static unsigned crc16(const char *buf, size_t len)
{
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)buf[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
        crc &= 0xffff;
    }
    return crc;
}

/* CLUSTER KEYSLOT, computed here: the hash tag rule of the Redis Cluster spec. */
static unsigned keyslot(const char *key)
{
    size_t len = strlen(key);
    const char *open = strchr(key, '{');
    if (open) {
        const char *close = strchr(open + 1, '}');
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & 16383;
    }
    return crc16(key, len) & 16383;
}


static void percent_decode(char *out, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n + 1) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            out[o++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
}


static const char *const odd_ids[] = {
    "plain", "we{ir}d:id", "}{", "glob*?[x]\\", "\xc3\xbcn\xc3\xaf c\xc3\xb8" "d\xc3\xa9",
    "sp ace", "%41", "a:b:c", "{}", NULL};

/* One thread's keys: P:{tag}:SUFFIX, one slot, the tag decoding to the id. */
static void check_key_shape(const char *prefix, const char *key, char *tag_out, size_t size)
{
    size_t plen = strlen(prefix);
    ck_assert_msg(strncmp(key, prefix, plen) == 0 && key[plen] == ':', "foreign key %s", key);
    const char *open = key + plen + 1;
    ck_assert_msg(*open == '{', "key without a hash tag: %s", key);
    const char *close = strchr(open, '}');
    ck_assert_msg(close != NULL, "unclosed tag in %s", key);
    static const char *const suffixes[] = {":meta", ":msgs", ":idem",  ":extra", ":cp",
                                           ":cpidx", ":blobs", ":writes", NULL};
    const char *suffix = close + 1;
    size_t k = 0;
    while (suffixes[k] && strcmp(suffix, suffixes[k]) != 0)
        k++;
    ck_assert_msg(suffixes[k] != NULL, "unexpected key %s", key);
    ck_assert_msg((size_t)(close - open - 1) < size, "tag too long");
    ck_assert_msg(memchr(open + 1, ':', (size_t)(close - open - 1)) == NULL, "':' in tag of %s",
                  key);
    snprintf(tag_out, size, "%.*s", (int)(close - open - 1), open + 1);
}

static void check_key_scheme(redisContext *c, const char *prefix, const char *const *ids,
                             size_t nids, size_t min_keys)
{
    char pat[300];
    glob_escape(pat, sizeof pat - 2, prefix);
    strcat(pat, ":*");
    keyset ks = scan_keys(c, pat);
    char index_key[300], store_key[300], ix[300];
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    snprintf(store_key, sizeof store_key, "%s:store", prefix); /* layout, put order */
    snprintf(ix, sizeof ix, "%s:ix:", prefix); /* the thread index (tests/redis-index.c) */
    size_t seen[64] = {0};
    unsigned slot[64];
    for (size_t i = 0; i < ks.n; i++) {
        if (strcmp(ks.k[i], index_key) == 0 || strcmp(ks.k[i], store_key) == 0 ||
            strncmp(ks.k[i], ix, strlen(ix)) == 0)
            continue;
        char tag[2048], id[2048];
        check_key_shape(prefix, ks.k[i], tag, sizeof tag);
        percent_decode(id, tag, strlen(tag));
        size_t j = 0;
        while (j < nids && strcmp(ids[j], id) != 0)
            j++;
        ck_assert_msg(j < nids, "key %s decodes to unknown thread '%s'", ks.k[i], id);
        unsigned s = keyslot(ks.k[i]);
        ck_assert_msg(seen[j] == 0 || slot[j] == s, "keys of '%s' in two slots", id);
        slot[j] = s;
        seen[j]++;
    }
    for (size_t j = 0; j < nids; j++)
        ck_assert_msg(seen[j] >= min_keys, "thread '%s' has %zu keys", ids[j], seen[j]);
    keys_free(&ks);
}

START_TEST(test_key_scheme)
{
    char prefix[80], other[80];
    snprintf(prefix, sizeof prefix, "%s-keys", run_id);
    snprintf(other, sizeof other, "%s-keys-other", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    convo_store *o = open_prefix(base_url, other, NULL);
    const char *ids[16];
    size_t n = 0;
    for (; odd_ids[n]; n++) {
        ids[n] = odd_ids[n];
        append_ok(s, ids[n], "k1");
        extra_ok(s, ids[n], "{\"a\":1}");
        checkpoint_ok(s, ids[n], odd_ids[(n + 1) % 9]); /* odd namespaces too */
        append_ok(o, ids[n], "k1"); /* the same ids under another prefix */
    }
    char long_id[513];
    memset(long_id, '}', 512);
    long_id[512] = '\0';
    append_ok(s, long_id, "k");
    ids[n++] = long_id;
    convo_error err;
    ck_assert_int_eq(convo_thread_fork(s, "plain", "fork{dst}", -1, &err), 0);
    ids[n++] = "fork{dst}";
    redisContext *c = plain_connect(base_url);
    check_key_scheme(c, prefix, ids, n, 3);
    /* the threads with checkpoints have all eight keys */
    for (size_t i = 0; odd_ids[i]; i++) {
        char gprefix[300], tag[1600], pat[4096];
        glob_escape(gprefix, sizeof gprefix, prefix);
        size_t t = 0;
        for (const unsigned char *q = (const unsigned char *)odd_ids[i]; *q; q++)
            t += (size_t)(*q > 0x20 && *q != 0x7f && !strchr("%{}:*?[]\\", *q)
                              ? snprintf(tag + t, sizeof tag - t, "%c", *q)
                              : snprintf(tag + t, sizeof tag - t, "%%%02X", *q));
        char gtag[3300];
        glob_escape(gtag, sizeof gtag, tag);
        snprintf(pat, sizeof pat, "%s:{%s}:*", gprefix, gtag);
        keyset one = scan_keys(c, pat);
        ck_assert_msg(one.n == 8, "thread '%s' has %zu keys, not 8", odd_ids[i], one.n);
        keys_free(&one);
    }
    /* the index holds the raw ids, in byte order */
    char index_key[120];
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), (long long)n);
    for (size_t i = 0; i < n; i++) {
        redisReply *r = cmd(c, "ZSCORE %s %s", index_key, ids[i]);
        ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "0") == 0,
                      "'%s' not in the index with score 0", ids[i]);
        freeReplyObject(r);
    }
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(convo_thread_delete(s, ids[i], &err), 0);
    char pat[200];
    glob_escape(pat, sizeof pat - 2, prefix);
    strcat(pat, ":*");
    keyset left = scan_keys(c, pat);
    char store_key[120]; /* the store's own: its layout version and last put order */
    snprintf(store_key, sizeof store_key, "%s:store", prefix);
    ck_assert_msg(left.n == 1 && strcmp(left.k[0], store_key) == 0,
                  "%zu keys left after deleting every thread, e.g. %s", left.n,
                  left.n ? left.k[0] : "");
    keys_free(&left);
    /* the other prefix saw none of it */
    for (size_t i = 0; odd_ids[i]; i++)
        ck_assert_int_eq(length_of(o, odd_ids[i]), 2);
    check_key_scheme(c, other, odd_ids, n - 2, 3);
    for (size_t i = 0; odd_ids[i]; i++)
        convo_thread_delete(o, odd_ids[i], NULL);
    redisFree(c);
    convo_close(s);
    convo_close(o);
}
END_TEST

/* Reading a new prefix writes nothing (issue 23: `convo threads` created P:store);
 * once it has a thread, the next open records the layout in P:store. */
START_TEST(test_read_only_open_writes_nothing)
{
    char prefix[80], pat[200], store_key[120];
    snprintf(prefix, sizeof prefix, "%s-readonly", run_id);
    snprintf(pat, sizeof pat, "%s:*", prefix);
    snprintf(store_key, sizeof store_key, "%s:store", prefix);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    convo_thread_page *page;
    convo_history *h;
    convo_error err;
    ck_assert_int_eq(convo_thread_list(s, NULL, 10, &page, &err), 0);
    convo_thread_page_free(page);
    ck_assert_int_eq(convo_load(s, "nosuch", NULL, &h, &err), CONVO_ENOTFOUND);
    convo_close(s);
    convo_close(open_prefix(base_url, prefix, NULL));
    redisContext *c = plain_connect(base_url);
    keyset ks = scan_keys(c, pat);
    ck_assert_msg(ks.n == 0, "%zu keys after reading a new prefix, e.g. %s", ks.n,
                  ks.n ? ks.k[0] : "");
    keys_free(&ks);
    s = open_prefix(base_url, prefix, NULL);
    append_ok(s, "t", NULL);
    convo_close(s);
    convo_close(open_prefix(base_url, prefix, NULL));
    redisReply *r = cmd(c, "HGET %s v", store_key);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, "8") == 0,
                  "%s v is not 8 after an open of a store with threads", store_key);
    freeReplyObject(r);
    redisFree(c);
}
END_TEST

void redis_add_key_tests(TCase *tc)
{
    tcase_add_test(tc, test_key_scheme);
    tcase_add_test(tc, test_read_only_open_writes_nothing);
}
