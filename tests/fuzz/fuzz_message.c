/* fuzz_message.c — libFuzzer target for input validation (lib/validate.c):
 * convo__check_utf8 against a reference decoder written from the Unicode
 * table of well-formed sequences, convo__check_thread_id against the rules of
 * design §2, and convo__check_message and its fast path convo__scan_message
 * against jansson's own reading with the same flags. */
#include "internal.h"
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)
#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), abort())

/* Unicode 15, table 3-7: the well-formed UTF-8 byte sequences. */
static int reference_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
        if (c <= 0x7F) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return 0;
        }
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return 0;
        i += len;
    }
    return 1;
}

/* design §2: 1..512 bytes of UTF-8, no control characters (C0, DEL, C1). */
static int reference_thread_id(const char *id)
{
    size_t n = strlen(id);
    if (n < 1 || n > CONVO_MAX_THREAD_ID_BYTES || !reference_utf8((const unsigned char *)id, n))
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c < 0x20 || c == 0x7F)
            return 0;
        if (c == 0xC2 && (unsigned char)id[i + 1] >= 0x80 && (unsigned char)id[i + 1] <= 0x9F)
            return 0; /* U+0080..U+009F */
    }
    return 1;
}

static void check_error(int rc, const convo_error *err, const char *what)
{
    if (rc == 0)
        return;
    if (err->code != rc || !err->message[0] || strpbrk(err->message, "\r\n"))
        FAIL("%s: error %d with message \"%s\" (code %d)", what, rc, err->message, err->code);
}

static void check_message(const uint8_t *data, size_t size, int limited)
{
    static char *const roles[] = {"user", "assistant", "tool\nresult", NULL};
    convo_limits limits = {limited ? 64 : CONVO_DEFAULT_MAX_MESSAGE_BYTES,
                           CONVO_DEFAULT_MAX_BATCH_MESSAGES, CONVO_DEFAULT_MAX_EXTRA_BYTES,
                           CONVO_DEFAULT_MAX_CHECKPOINT_BYTES};
    char *role = NULL;
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__check_message((const char *)data, size, &limits, limited ? roles : NULL,
                                  &role, &err);
    check_error(rc, &err, "check_message");
    if (rc != 0) {
        if (role)
            FAIL("a refused message returned a role");
        if (size > limits.max_message_bytes && rc != CONVO_ETOOLARGE)
            FAIL("a message over the limit was not CONVO_ETOOLARGE: %d", rc);
        return;
    }
    /* accepted: a JSON object whose "role" is the non-empty string returned */
    if (size > limits.max_message_bytes)
        FAIL("a message over the limit was accepted");
    json_t *m = json_loadb((const char *)data, size, FLAGS, NULL);
    json_t *r = json_object_get(m, "role");
    if (!json_is_object(m) || !json_is_string(r) || !role || strcmp(role, json_string_value(r)) ||
        !*role || strlen(role) > CONVO_MAX_ROLE_BYTES)
        FAIL("accepted message without a proper role (role \"%s\")", role ? role : "(null)");
    if (!reference_utf8(data, size))
        FAIL("accepted a message that is not UTF-8");
    json_decref(m);
    free(role);
}

/* Where the scanner is sure, jansson accepts the bytes and reads the same role. */
static void check_scan(const uint8_t *data, size_t size)
{
    const char *role;
    size_t n;
    if (!convo__scan_message((const char *)data, size, &role, &n))
        return;
    json_t *m = json_loadb((const char *)data, size, FLAGS, NULL);
    json_t *r = json_object_get(m, "role");
    if (!json_is_object(m) || !json_is_string(r) || json_string_length(r) != n ||
        memcmp(json_string_value(r), role, n) != 0 || n == 0 || n > CONVO_MAX_ROLE_BYTES)
        FAIL("the scanner is sure of a message jansson refuses or reads another role from");
    json_decref(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_scan(data, size);
    int got = convo__check_utf8((const char *)data, size);
    if (got != reference_utf8(data, size))
        FAIL("convo__check_utf8 says %d, the reference %d", got, !got);

    char *id = malloc(size + 1);
    memcpy(id, data, size);
    id[size] = '\0';
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__check_thread_id(id, &err);
    check_error(rc, &err, "check_thread_id");
    if ((rc == 0) != reference_thread_id(id))
        FAIL("convo__check_thread_id returned %d, the reference says %s", rc,
             reference_thread_id(id) ? "valid" : "invalid");
    free(id);

    check_message(data, size, 0);
    check_message(data, size, 1);
    return 0;
}
