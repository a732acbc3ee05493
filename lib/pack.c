/* pack.c — msgpack helpers shared by the dump format (dump.c) and drivers that
 * keep msgpack records (drivers/redis): strings, byte strings, integers. */
#include "internal.h"
#include <msgpack.h>
#include <string.h>

int convo__pack_str(msgpack_packer *pk, const char *s)
{
    if (!s)
        return msgpack_pack_nil(pk) ? -1 : 0;
    size_t n = strlen(s);
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n) ? -1 : 0;
}

int convo__pack_bin(msgpack_packer *pk, const void *bytes, size_t len)
{
    return msgpack_pack_bin(pk, len) || msgpack_pack_bin_body(pk, bytes, len) ? -1 : 0;
}

int convo__unpack_int(const msgpack_object *o, int64_t *out)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
        *out = (int64_t)o->via.u64;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *out = o->via.i64;
    else
        return -1;
    return 0;
}
