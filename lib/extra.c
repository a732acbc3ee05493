/* extra.c — the shallow merge of an extra patch, for drivers that merge in
 * the client (memory, SQLite): each top-level key of the patch replaces that
 * key; null is kept as a value; key order is stable. */
#include "internal.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int convo__extra_merge(const char *current, size_t current_len, const char *patch,
                       size_t max_bytes, char **out, size_t *out_len, convo_error *err)
{
    json_error_t jerr;
    json_t *cur = current && current_len ? json_loadb(current, current_len, 0, &jerr)
                                         : json_object();
    if (!cur || !json_is_object(cur)) {
        json_decref(cur);
        return convo__error(err, CONVO_ECORRUPT, NULL, "stored extra is not a JSON object");
    }
    json_t *p = json_loads(patch, 0, &jerr);
    if (!p || !json_is_object(p)) {
        json_decref(cur);
        json_decref(p);
        return convo__error(err, CONVO_EINVAL, NULL, "extra patch is not a JSON object");
    }
    int rc = json_object_update(cur, p);
    json_decref(p);
    char *text = rc == 0 ? json_dumps(cur, JSON_COMPACT) : NULL;
    json_decref(cur);
    if (!text)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory merging extra");
    size_t len = strlen(text);
    if (len > max_bytes) {
        free(text);
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "merged extra of %zu bytes would exceed the limit of %zu bytes", len,
                            max_bytes);
    }
    *out = text;
    *out_len = len;
    return 0;
}
