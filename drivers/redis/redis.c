/* redis.c — the Redis driver (hiredis): threads, their messages, extra and
 * checkpoints. Every mutating call is one Lua script run with EVALSHA on the
 * keys of a single thread, which all share one {hash tag}, but the common
 * append (a bare RPUSHX); the thread index is a separate sorted set. See
 * docs/redis.md. */
#include "config.h"
#include "cluster.h"
#include "drivers/redis/lua.h"
#include <convo/driver.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <limits.h>
#include <msgpack.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#define DEFAULT_PREFIX "convo"
#define DEFAULT_POOL 8
#define DEFAULT_TIMEOUT_MS 5000
#define MAX_PREFIX_BYTES 128
#define RECENT_SLOTS 4096 /* threads a store remembers having indexed */

/* ---- the Lua scripts ----
 * KEYS are the keys of one thread, in the order of enum key_kind below:
 * msgs idem meta extra cp cpidx blobs writes. Only the append script may get
 * fewer (msgs, or msgs and idem). Lua sees "\\0" as a NUL byte: it separates
 * namespace, ids and versions in fields and index members (none of them can
 * hold a control character). */

/* Shared by every script but append: KEYS by name; expire every key of the
 * thread together (PEXPIREAT with one deadline), or make them all permanent
 * again (the eight keys of the thread: a ninth, P:store, is the store's); run
 * a command over ARGV[first..last] 1000 arguments at a time. */
#define LUA_PRELUDE                                                                        \
    "if redis.replicate_commands then redis.replicate_commands() end\n"                   \
    "local MSGS, IDEM, META, EXTRA, CP, CPIDX, BLOBS, WRITES = unpack(KEYS)\n"             \
    "local function expire_all(ttl)\n"                                                   \
    "  if ttl > 0 then\n"                                                                \
    "    local t = redis.call('TIME')\n"                                                 \
    "    local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl\n"   \
    "    for i = 1, 8 do redis.call('PEXPIREAT', KEYS[i], at) end\n"                     \
    "  elseif redis.call('PTTL', META) > 0 then\n"                                       \
    "    for i = 1, 8 do redis.call('PERSIST', KEYS[i]) end\n"                           \
    "  end\n"                                                                            \
    "end\n"                                                                              \
    "local function chunked(cmd, key, list, first, last)\n"                              \
    "  for i = first, last, 1000 do\n"                                                   \
    "    redis.call(cmd, key, unpack(list, i, math.min(i + 999, last)))\n"               \
    "  end\n"                                                                            \
    "end\n"

/* The hot path, so no prelude and nothing the client can do instead: the
 * client packs whole records [created_at, role, bytes], the script pushes
 * them as they came (a Lua string built here would cost more than the push).
 * ARGV: may create ('1'/'0'), idempotency key ('' = none), expected length
 * (-1 = none), ttl ms, then the records. Without leave to create, a thread
 * with no message list (new, or no message yet) or, for a store without
 * ttl, one with a deadline answers CONVO_CREATE and writes nothing: the
 * client then runs it again with every key, inside the index protocol.
 * Returns first_seq, or {first_seq, count} for a replay. */
static const char script_append[] =
    "local create, key = ARGV[1] == '1', ARGV[2]\n"
    "local expect, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    /* only reading TIME needs effects replication (Redis 4) */
    "if ttl > 0 and redis.replicate_commands then redis.replicate_commands() end\n"
    "if key ~= '' then\n"
    "  local prior = redis.call('HGET', KEYS[2], key)\n"
    "  if prior then\n"
    "    local first, n = string.match(prior, '^(%d+) (%d+)$')\n"
    "    if not first then return redis.error_reply('CONVO_CORRUPT bad idempotency record') end\n"
    "    return {tonumber(first), tonumber(n)}\n"
    "  end\n"
    "end\n"
    "if expect >= 0 then\n"
    "  local len = redis.call('LLEN', KEYS[1])\n"
    "  if expect ~= len then\n"
    "    return redis.error_reply('CONVO_CONFLICT thread has ' .. len ..\n"
    "                             ' messages, expected ' .. expect)\n"
    "  end\n"
    "end\n"
    "if not create then\n"
    "  local pttl = redis.call('PTTL', KEYS[1])\n"
    "  if pttl == -2 or (ttl == 0 and pttl ~= -1) then\n"
    "    return redis.status_reply('CONVO_CREATE')\n"
    "  end\n"
    "end\n"
    "local len\n"
    "for i = 5, #ARGV, 1000 do\n"
    "  len = redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))\n"
    "end\n"
    "local n = #ARGV - 4\n"
    "local first = len - n\n"
    "if create and first == 0 then redis.call('HSETNX', KEYS[3], 'v', '2') end\n"
    "if key ~= '' then redis.call('HSET', KEYS[2], key, first .. ' ' .. n) end\n"
    "if ttl > 0 then\n"
    "  local t = redis.call('TIME')\n"
    "  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl\n"
    "  for i = 1, #KEYS do redis.call('PEXPIREAT', KEYS[i], at) end\n"
    "elseif create and redis.call('PTTL', KEYS[3]) > 0 then\n"
    "  for i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end\n"
    "end\n"
    "return first\n";

/* After the common append (RPUSHX, no script) found a deadline on the list,
 * left by a store with ttl: a store without ttl makes every key of the thread
 * permanent again. KEYS: all eight. Returns 0 when the list is gone already
 * (expired or deleted since the push), else 1. */
static const char script_persist[] =
    "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end\n"
    "for i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end\n"
    "return 1\n";

/* ARGV: may create, max merged bytes, ttl ms, then field/value pairs (field =
 * the key as JSON text, value = the value as compact JSON). Hash values are
 * stored as "<insertion ordinal> <json>"; meta keeps xb (sum of #field + 1 +
 * #json), xc (key count) and xn (last ordinal), so the merged size is exact. */
static const char script_extra[] = LUA_PRELUDE
    "local create, maxb, ttl = ARGV[1] == '1', tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local m = redis.call('HMGET', META, 'v', 'xb', 'xc', 'xn')\n"
    "if not m[1] and not create then return redis.status_reply('CONVO_CREATE') end\n"
    "local xb, xc, xn = tonumber(m[2]) or 0, tonumber(m[3]) or 0, tonumber(m[4]) or 0\n"
    "local vals = {}\n"
    "for i = 4, #ARGV, 2 do\n"
    "  local f, v = ARGV[i], ARGV[i + 1]\n"
    "  local old = redis.call('HGET', EXTRA, f)\n"
    "  local ord\n"
    "  if old then\n"
    "    local sp = string.find(old, ' ', 1, true)\n"
    "    if not sp then return redis.error_reply('CONVO_CORRUPT bad extra value') end\n"
    "    ord = string.sub(old, 1, sp - 1)\n"
    "    xb = xb - (#old - sp)\n"
    "  else\n"
    "    xn = xn + 1\n"
    "    xc = xc + 1\n"
    "    ord = string.format('%d', xn)\n"
    "    xb = xb + #f + 1\n"
    "  end\n"
    "  xb = xb + #v\n"
    "  vals[#vals + 1] = f\n"
    "  vals[#vals + 1] = ord .. ' ' .. v\n"
    "end\n"
    "local size = 2 + xb + math.max(xc - 1, 0)\n"
    "if size > maxb then\n"
    "  return redis.error_reply('CONVO_TOOLARGE merged extra of ' .. size ..\n"
    "                           ' bytes would exceed the limit of ' .. maxb .. ' bytes')\n"
    "end\n"
    "chunked('HSET', EXTRA, vals, 1, #vals)\n"
    "if not m[1] then redis.call('HSET', META, 'v', '2') end\n"
    "redis.call('HSET', META, 'xb', string.format('%d', xb),\n"
    "           'xc', string.format('%d', xc), 'xn', string.format('%d', xn))\n"
    "expire_all(ttl)\n"
    "return 1\n";

static const char script_delete[] = LUA_PRELUDE
    "if redis.call('EXISTS', META) == 0 then\n"
    "  return redis.error_reply('CONVO_NOTFOUND thread not found')\n"
    "end\n"
    "redis.call('DEL', unpack(KEYS))\n"
    "return 1\n";

/* Creates the destination of a fork from what was read off the source.
 * ARGV: ttl ms, record count n, xb, xc, xn, n records, extra field/value pairs. */
static const char script_fork[] = LUA_PRELUDE
    "if redis.call('EXISTS', META) == 1 then\n"
    "  return redis.error_reply('CONVO_CONFLICT destination thread already exists')\n"
    "end\n"
    "local ttl, n = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "chunked('RPUSH', MSGS, ARGV, 6, 5 + n)\n"
    "chunked('HSET', EXTRA, ARGV, 6 + n, #ARGV)\n"
    "redis.call('HSET', META, 'v', '2', 'xb', ARGV[3], 'xc', ARGV[4], 'xn', ARGV[5])\n"
    "expire_all(ttl)\n"
    "return 1\n";

/* Restores messages [first, first + n) of a dump: whole records (created_at
 * included) from the client. ARGV: ttl ms, first seq, records. Returns 1 when
 * the thread already holds them (the same dump imported again), else 0. */
static const char script_import[] = LUA_PRELUDE
    "local ttl, first = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "local len = redis.call('LLEN', MSGS)\n"
    "if len >= first + #ARGV - 2 then return 1 end\n"
    "if len ~= first then\n"
    "  return redis.error_reply('CONVO_CONFLICT thread has ' .. len ..\n"
    "                           ' messages, the dump continues at ' .. first)\n"
    "end\n"
    "chunked('RPUSH', MSGS, ARGV, 3, #ARGV)\n"
    "redis.call('HSETNX', META, 'v', '2')\n"
    "expire_all(ttl)\n"
    "return 0\n";

/* Checkpoints. A record (the value of field "NS\0ID" in cp) is four msgpack
 * objects in a row: put order, created_at, the channel list [ch, version, ...]
 * (strings: the only part a script decodes), and the client's tail. cpidx is
 * a sorted set of score 0 read by range of bytes:
 *   "o\0" ORDER "\0" NS "\0" ID          every checkpoint, in put order
 *   "n\0" NS "\0" ORDER "\0" ID          per namespace, in put order
 *   "w\0" NS "\0" ID "\0" TASK "\0" IDX  the pending writes of a checkpoint
 * ORDER is the store-wide put order (microseconds, see checkpoint.lua and
 * docs/redis.md, "Put order") as 16 hex digits. */
#define LUA_CP_PRELUDE                                                                     \
    "local function rec_order(rec)\n"                                                    \
    "  local _, o = cmsgpack.unpack_one(rec)\n"                                           \
    "  return o\n"                                                                       \
    "end\n"                                                                              \
    "local function rec_channels(rec)\n"                                                 \
    "  local o1 = cmsgpack.unpack_one(rec)\n"                                             \
    "  local o2 = cmsgpack.unpack_one(rec, o1)\n"                                         \
    "  local _, ch = cmsgpack.unpack_one(rec, o2)\n"                                      \
    "  return ch\n"                                                                      \
    "end\n"                                                                              \
    "local function hex(order) return string.format('%016x', order) end\n"               \
    "local function next_ns(after)\n"                                                    \
    "  local from = after and ('[n\\0' .. after .. '\\1') or '[n\\0'\n"                  \
    "  local m = redis.call('ZRANGEBYLEX', CPIDX, from, '(n\\1', 'LIMIT', 0, 1)\n"        \
    "  return m[1] and string.match(m[1], '^n%z([^%z]*)%z')\n"                           \
    "end\n"                                                                              \
    "local function writes_of(field)\n"                                                  \
    "  return '[w\\0' .. field .. '\\0', '(w\\0' .. field .. '\\1'\n"                     \
    "end\n"                                                                              \
    "local function hmget_all(key, fields)\n"                                            \
    "  local out = {}\n"                                                                 \
    "  for i = 1, #fields, 1000 do\n"                                                    \
    "    local part = redis.call('HMGET', key, unpack(fields, i, math.min(i + 999, #fields)))\n" \
    "    for j = 1, #part do out[#out + 1] = part[j] end\n"                              \
    "  end\n"                                                                            \
    "  return out\n"                                                                     \
    "end\n"                                                                              \
    /* {field, record, values in channel order, pending writes}, or false */             \
    "local function fetch(field)\n"                                                      \
    "  local rec = redis.call('HGET', CP, field)\n"                                      \
    "  if not rec then return false end\n"                                               \
    "  local ns = string.match(field, '^([^%z]*)%z')\n"                                  \
    "  local ch, bf = rec_channels(rec), {}\n"                                           \
    "  for i = 1, #ch, 2 do bf[#bf + 1] = ns .. '\\0' .. ch[i] .. '\\0' .. ch[i + 1] end\n" \
    "  local wf = redis.call('ZRANGEBYLEX', CPIDX, writes_of(field))\n"                  \
    "  for i = 1, #wf do wf[i] = string.sub(wf[i], 3) end\n"                             \
    "  return {field, rec, hmget_all(BLOBS, bf), hmget_all(WRITES, wf)}\n"                \
    "end\n"

/* ARGV: may create, ttl ms, ns, id, created_at (the client's clock, as for
 * messages), order hint, channel list, tail, then value field/value pairs
 * ("NS\0CHANNEL\0VERSION" -> msgpack [type, bytes]). KEYS: the thread's eight,
 * and P:store on one server. Returns the checkpoint's order. */
static const char script_cp_put[] = LUA_PRELUDE LUA_CP_PRELUDE LUA_CHECKPOINT
    "if redis.call('EXISTS', META) == 0 then\n"
    "  if ARGV[1] ~= '1' then return redis.status_reply('CONVO_CREATE') end\n"
    "  redis.call('HSET', META, 'v', '2')\n"
    "end\n"
    "migrate()\n"
    "local order = put_checkpoint(ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[7], ARGV[8], 9,\n"
    "                             tonumber(ARGV[6]))\n"
    "expire_all(tonumber(ARGV[2]))\n"
    "return order\n";

/* drivers/redis/put_log.lua: messages and a checkpoint in one script. */
static const char script_cp_put_log[] = LUA_PRELUDE LUA_CP_PRELUDE LUA_CHECKPOINT LUA_PUT_LOG;

/* A thread of layout 1 to layout 2 (nothing else: a missing thread stays
 * missing). KEYS as for a put. */
static const char script_cp_migrate[] = LUA_PRELUDE LUA_CP_PRELUDE LUA_CHECKPOINT
    "migrate()\n"
    "return 1\n";

/* ARGV: ttl ms, "NS\0ID", then (mode, field, value) triples: field
 * "NS\0ID\0TASK\0IDX"; mode 'r' replaces (idx < 0), 'k' keeps the first. */
static const char script_cp_writes[] = LUA_PRELUDE LUA_CP_PRELUDE
    "if redis.call('HEXISTS', CP, ARGV[2]) == 0 then\n"
    "  return redis.error_reply('CONVO_NOTFOUND checkpoint not found')\n"
    "end\n"
    "for i = 3, #ARGV, 3 do\n"
    "  redis.call(ARGV[i] == 'r' and 'HSET' or 'HSETNX', WRITES, ARGV[i + 1], ARGV[i + 2])\n"
    "  redis.call('ZADD', CPIDX, 0, 'w\\0' .. ARGV[i + 1])\n"
    "end\n"
    "expire_all(tonumber(ARGV[1]))\n"
    "return 1\n";

/* ARGV: ns, id ('' = the latest of ns). Reads only. */
static const char script_cp_get[] = LUA_PRELUDE LUA_CP_PRELUDE
    "local ns, id = ARGV[1], ARGV[2]\n"
    "if id == '' then\n"
    "  local m = redis.call('ZREVRANGEBYLEX', CPIDX, '(n\\0' .. ns .. '\\1',\n"
    "                       '[n\\0' .. ns .. '\\0', 'LIMIT', 0, 1)\n"
    "  id = m[1] and string.match(m[1], '^n%z[^%z]*%z%x+%z(.*)$')\n"
    "end\n"
    "local r = id and fetch(ns .. '\\0' .. id)\n"
    "if not r then return redis.error_reply('CONVO_NOTFOUND checkpoint not found') end\n"
    "return r\n";

/* One page of a listing, newest first. ARGV: one namespace ('1'/'0'), ns,
 * cursor (ORDER of the last one seen, or of `before`; '' = the newest), page
 * size. Returns {next cursor or '', fetch() of each}. Reads only. */
static const char script_cp_list[] = LUA_PRELUDE LUA_CP_PRELUDE
    "local one, ns, upper, count = ARGV[1] == '1', ARGV[2], ARGV[3], tonumber(ARGV[4])\n"
    "local lo, hi, pat\n"
    "if one then\n"
    "  lo, pat = '[n\\0' .. ns .. '\\0', '^n%z[^%z]*%z(%x+)%z(.*)$'\n"
    "  hi = upper ~= '' and ('(n\\0' .. ns .. '\\0' .. upper) or ('(n\\0' .. ns .. '\\1')\n"
    "else\n"
    "  lo, pat = '[o\\0', '^o%z(%x+)%z(.*)$'\n"
    "  hi = upper ~= '' and ('(o\\0' .. upper) or '(o\\1'\n"
    "end\n"
    "local m = redis.call('ZREVRANGEBYLEX', CPIDX, hi, lo, 'LIMIT', 0, count)\n"
    "local out = {#m < count and '' or string.match(m[#m], pat)}\n"
    "for i = 1, #m do\n"
    "  local _, rest = string.match(m[i], pat)\n"
    "  local r = fetch(one and (ns .. '\\0' .. rest) or rest)\n"
    "  if r then out[#out + 1] = r end\n"
    "end\n"
    "return out\n";

/* ARGV: keep_last. Drops older checkpoints of each namespace with their
 * writes, then every value no remaining checkpoint lists. */
static const char script_cp_prune[] = LUA_PRELUDE LUA_CP_PRELUDE
    "if redis.call('EXISTS', META) == 0 then\n"
    "  return redis.error_reply('CONVO_NOTFOUND thread not found')\n"
    "end\n"
    "local ns = next_ns(nil)\n"
    "while ns do\n"
    "  local old = redis.call('ZREVRANGEBYLEX', CPIDX, '(n\\0' .. ns .. '\\1',\n"
    "                         '[n\\0' .. ns .. '\\0', 'LIMIT', ARGV[1], -1)\n"
    "  for i = 1, #old do\n"
    "    local order, id = string.match(old[i], '^n%z[^%z]*%z(%x+)%z(.*)$')\n"
    "    local field = ns .. '\\0' .. id\n"
    "    redis.call('HDEL', CP, field)\n"
    "    redis.call('ZREM', CPIDX, old[i], 'o\\0' .. order .. '\\0' .. field)\n"
    "    local w = redis.call('ZRANGEBYLEX', CPIDX, writes_of(field))\n"
    "    for j = 1, #w do w[j] = string.sub(w[j], 3) end\n"
    "    chunked('HDEL', WRITES, w, 1, #w)\n"
    "    redis.call('ZREMRANGEBYLEX', CPIDX, writes_of(field))\n"
    "  end\n"
    "  ns = next_ns(ns)\n"
    "end\n"
    "local used, all = {}, redis.call('HGETALL', CP)\n"
    "for i = 1, #all, 2 do\n"
    "  local n, ch = string.match(all[i], '^([^%z]*)%z'), rec_channels(all[i + 1])\n"
    "  for j = 1, #ch, 2 do used[n .. '\\0' .. ch[j] .. '\\0' .. ch[j + 1]] = true end\n"
    "end\n"
    "local gone = {}\n"
    "for _, f in ipairs(redis.call('HKEYS', BLOBS)) do\n"
    "  if not used[f] then gone[#gone + 1] = f end\n"
    "end\n"
    "chunked('HDEL', BLOBS, gone, 1, #gone)\n"
    "return 1\n";

enum {
    S_APPEND, S_PERSIST, S_EXTRA, S_DELETE, S_FORK, S_IMPORT, S_CP_PUT, S_CP_PUT_LOG,
    S_CP_MIGRATE, S_CP_WRITES, S_CP_GET, S_CP_LIST, S_CP_PRUNE, S_COUNT
};
static const char *const scripts[S_COUNT] = {
    script_append,     script_persist,   script_extra,      script_delete,
    script_fork,       script_import,    script_cp_put,     script_cp_put_log,
    script_cp_migrate, script_cp_writes, script_cp_get,     script_cp_list,
    script_cp_prune};

/* ---- the backend and its connections ---- */

typedef struct rconn {
    redisContext *c;
    uint64_t gen; /* creation number, to drop connections older than a failure */
    int broken;   /* a send failed: the connection must not be reused */
    rcl_conns *nodes; /* cluster mode (c is NULL): a socket per node */
} rconn;

struct convo_backend {
    convo_pool *pool;
    convo_limits limits;
    char *host, *socket_path, *user, *password, *redacted;
    int port, db;
    long long ttl_ms;
    int connect_timeout_ms, timeout_ms;
    char *prefix, *index_key;
    char *store_key;            /* P:store: layout version, on one server the put order */
    atomic_int_fast64_t order_hint; /* the highest checkpoint order this store saw */
    char sha[S_COUNT][41];
    atomic_uint_fast64_t recent[RECENT_SLOTS]; /* threads written lately (run_writer) */
    atomic_uint_fast64_t next_gen;
    atomic_uint_fast64_t stale_below; /* connections with gen < this are suspect */
    rcl *cluster;                       /* redis+cluster: routing (cluster.c) */
    int wait_replicas, wait_timeout_ms; /* ?wait=N&wait_timeout=MS */
};

/* A pipeline command: arguments with lengths, plus room for a few numbers. */
typedef struct cmd {
    const char **argv;
    size_t *lens;
    size_t n, cap;
    char nums[8][24];
    int nnums;
    int failed;
} cmd;

static void cmd_add(cmd *c, const char *s, size_t len)
{
    if (c->failed)
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        const char **a = realloc(c->argv, cap * sizeof *a);
        if (a)
            c->argv = a;
        size_t *l = realloc(c->lens, cap * sizeof *l);
        if (l)
            c->lens = l;
        if (!a || !l) {
            c->failed = 1;
            return;
        }
        c->cap = cap;
    }
    c->argv[c->n] = s;
    c->lens[c->n++] = len;
}

static void cmd_str(cmd *c, const char *s)
{
    cmd_add(c, s, strlen(s));
}

/* The decimal digits of v at buf (no NUL); their count. Every call formats
 * a few numbers, and printf is a measurable part of a call. */
static size_t fmt_num(char *buf, long long v)
{
    char tmp[24];
    size_t n = 0, len = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        buf[len++] = '-';
    while (n)
        buf[len++] = tmp[--n];
    return len;
}

static void cmd_num(cmd *c, long long v)
{
    if (c->nnums == 8) {
        c->failed = 1;
        return;
    }
    char *buf = c->nums[c->nnums++];
    cmd_add(c, buf, fmt_num(buf, v));
}

static void cmd_free(cmd *c)
{
    free(c->argv);
    free(c->lens);
}

/* The keys of one thread, P:{tag}:SUFFIX, in the KEYS order of every script. */
enum key_kind { K_MSGS, K_IDEM, K_META, K_EXTRA, K_CP, K_CPIDX, K_BLOBS, K_WRITES, K_COUNT };
static const char *const key_suffix[K_COUNT] = {"msgs", "idem", "meta",  "extra",
                                                "cp",   "cpidx", "blobs", "writes"};

typedef struct thread_keys {
    char *buf;
    const char *k[K_COUNT];
    size_t len[K_COUNT];
} thread_keys;

/* Bytes that would break the hash tag, the key's structure or a SCAN glob are
 * percent-encoded; everything else (UTF-8 included) stays as it is. */
static int tag_plain(unsigned char c)
{
    return c > 0x20 && c != 0x7f && !strchr("%{}:*?[]\\", c);
}

static size_t encode_tag(char *out, const char *id)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
        if (tag_plain(*p)) {
            if (out)
                out[n] = (char)*p;
            n++;
        } else {
            if (out) {
                out[n] = '%';
                out[n + 1] = hex[*p >> 4];
                out[n + 2] = hex[*p & 15];
            }
            n += 3;
        }
    }
    return n;
}

/* Builds the keys with memcpy: this runs on every call. */
static int keys_make(const convo_backend *b, const char *id, thread_keys *tk)
{
    size_t plen = strlen(b->prefix), tlen = encode_tag(NULL, id);
    size_t each = plen + tlen + 16; /* "P:{" tag "}:" suffix NUL */
    if (!(tk->buf = malloc(each * K_COUNT)))
        return CONVO_ENOMEM;
    char *first = tk->buf;
    memcpy(first, b->prefix, plen);
    memcpy(first + plen, ":{", 2);
    encode_tag(first + plen + 2, id);
    memcpy(first + plen + 2 + tlen, "}:", 2);
    size_t head = plen + tlen + 4;
    for (int i = 0; i < K_COUNT; i++) {
        char *k = tk->buf + each * (size_t)i;
        size_t slen = strlen(key_suffix[i]);
        if (i > 0)
            memcpy(k, first, head);
        memcpy(k + head, key_suffix[i], slen + 1);
        tk->k[i] = k;
        tk->len[i] = head + slen;
    }
    return 0;
}

static int oom(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

static int is_timeout(const redisContext *c)
{
    /* hiredis put strerror(errno) of the failed read, write or connect there */
    return c->err == REDIS_ERR_IO && (strcmp(c->errstr, strerror(EAGAIN)) == 0 ||
                                      strcmp(c->errstr, strerror(ETIMEDOUT)) == 0);
}

/* The connection failed: name the cause, and when it went away rather than
 * timing out, mark every connection made so far as suspect (server restart). */
static int conn_error(convo_backend *b, const redisContext *c, convo_error *err)
{
    if (is_timeout(c))
        return convo__error(err, CONVO_ETIMEOUT, NULL, "redis: timed out (%s)", b->redacted);
    atomic_store(&b->stale_below, atomic_load(&b->next_gen));
    return convo__error(err, CONVO_EIO, NULL, "redis: %s (%s)",
                        c->errstr[0] ? c->errstr : "connection failed", b->redacted);
}

static int starts_with(const redisReply *r, const char *tag)
{
    size_t n = strlen(tag);
    return r->len >= n && memcmp(r->str, tag, n) == 0 && (r->len == n || r->str[n] == ' ');
}

/* An error reply: our scripts' tagged errors, else the server's (code = first word). */
static int reply_error(const redisReply *r, convo_error *err)
{
    static const struct {
        const char *tag;
        int code;
    } tags[] = {{"CONVO_CONFLICT", CONVO_ECONFLICT}, {"CONVO_NOTFOUND", CONVO_ENOTFOUND},
                {"CONVO_TOOLARGE", CONVO_ETOOLARGE}, {"CONVO_CORRUPT", CONVO_ECORRUPT},
                {"WRONGTYPE", CONVO_ECORRUPT}};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        if (!starts_with(r, tags[i].tag))
            continue;
        size_t skip = strlen(tags[i].tag) + (r->len > strlen(tags[i].tag));
        return convo__error(err, tags[i].code, NULL, "%.*s", (int)(r->len - skip), r->str + skip);
    }
    char code[16];
    size_t n = strcspn(r->str, " ");
    snprintf(code, sizeof code, "%.*s", (int)(n < 15 ? n : 15), r->str);
    return convo__error(err, CONVO_EIO, code, "redis: %.*s", (int)r->len, r->str);
}

/* A send error: the connection is broken; EAGAIN is the send timeout. */
static int send_error(convo_backend *b, rconn *rc, int errnum, convo_error *err)
{
    rc->broken = 1;
    if (errnum == EAGAIN || errnum == EWOULDBLOCK)
        return convo__error(err, CONVO_ETIMEOUT, NULL, "redis: timed out (%s)", b->redacted);
    atomic_store(&b->stale_below, atomic_load(&b->next_gen));
    return convo__error(err, CONVO_EIO, NULL, "redis: %s (%s)", strerror(errnum), b->redacted);
}

/* Writes the formatted commands with MSG_NOSIGNAL: hiredis would write(), and
 * a server that went away would kill the application with SIGPIPE. */
static int send_all(convo_backend *b, rconn *rc, struct iovec *iov, size_t n, convo_error *err)
{
    int e = convo__rcl_sendv(rc->c->fd, iov, n);
    return e ? send_error(b, rc, e, err) : 0;
}

/* The RESP form of a command ("*N\r\n" then "$LEN\r\nARG\r\n" each), in one
 * malloc'd buffer; NULL when out of memory. */
static char *format_command(const cmd *c, size_t *len)
{
    size_t total = 32;
    for (size_t i = 0; i < c->n; i++)
        total += c->lens[i] + 32;
    char *out = malloc(total), *p = out;
    if (!out)
        return NULL;
    *p++ = '*';
    p += fmt_num(p, (long long)c->n);
    for (size_t i = 0; i < c->n; i++) {
        memcpy(p, "\r\n$", 3);
        p += 3;
        p += fmt_num(p, (long long)c->lens[i]);
        memcpy(p, "\r\n", 2);
        p += 2;
        if (c->lens[i])
            memcpy(p, c->argv[i], c->lens[i]);
        p += c->lens[i];
    }
    memcpy(p, "\r\n", 2);
    *len = (size_t)(p + 2 - out);
    return out;
}

static int send_commands(convo_backend *b, rconn *rc, cmd *cmds, size_t n, convo_error *err)
{
    char **bufs = calloc(n, sizeof *bufs);
    struct iovec *iov = calloc(n, sizeof *iov);
    int code = bufs && iov ? 0 : oom(err);
    for (size_t i = 0; i < n && code == 0; i++) {
        size_t len = 0;
        if (cmds[i].failed || !(bufs[i] = format_command(&cmds[i], &len)))
            code = oom(err);
        else
            iov[i] = (struct iovec){bufs[i], len};
    }
    if (code == 0)
        code = send_all(b, rc, iov, n, err);
    for (size_t i = 0; bufs && i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(iov);
    return code;
}

/* Sends commands [0, n) in one round trip; replies[i] gets each reply. On a
 * connection error nothing is returned and the connection is broken. */
static int pipeline_plain(convo_backend *b, rconn *rc, cmd *cmds, size_t n, redisReply **replies,
                          convo_error *err)
{
    if (rc->broken)
        return convo__error(err, CONVO_EIO, NULL, "redis: connection lost (%s)", b->redacted);
    int code = send_commands(b, rc, cmds, n, err);
    if (code != 0)
        return code;
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(rc->c, &r) != REDIS_OK || !r) {
            while (i-- > 0) {
                freeReplyObject(replies[i]);
                replies[i] = NULL;
            }
            rc->broken = 1;
            return conn_error(b, rc->c, err);
        }
        replies[i] = r;
    }
    return 0;
}

static void replies_free(redisReply **replies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

/* cluster.c routes each command to the master of its key's slot. */
static int pipeline_cluster(convo_backend *b, rconn *rc, cmd *cmds, size_t n,
                            redisReply **replies, convo_error *err)
{
    rcl_cmd *rq = calloc(n ? n : 1, sizeof *rq);
    int code = rq ? 0 : oom(err);
    for (size_t i = 0; i < n && code == 0; i++) {
        char *buf = cmds[i].failed ? NULL : format_command(&cmds[i], &rq[i].len);
        if (!(rq[i].buf = buf))
            code = oom(err);
        else
            convo__rcl_classify(&rq[i], cmds[i].argv, cmds[i].lens, cmds[i].n);
    }
    if (code == 0)
        code = convo__rcl_run(b->cluster, rc->nodes, rq, n, replies, err);
    for (size_t i = 0; rq && i < n; i++)
        free((char *)rq[i].buf);
    free(rq);
    return code;
}

/* ?wait=N: a pipeline that may write ends with WAIT, whose answer decides. */
static int pipeline_wait(convo_backend *b, rconn *rc, cmd *cmds, size_t n, redisReply **replies,
                         convo_error *err)
{
    cmd *all = calloc(n + 1, sizeof *all);
    redisReply **got = calloc(n + 1, sizeof *got);
    int code = all && got ? 0 : oom(err);
    if (code == 0) {
        memcpy(all, cmds, n * sizeof *cmds);
        cmd_str(&all[n], "WAIT");
        cmd_num(&all[n], b->wait_replicas);
        cmd_num(&all[n], b->wait_timeout_ms);
        code = pipeline_plain(b, rc, all, n + 1, got, err);
        cmd_free(&all[n]);
    }
    if (code == 0 && (code = convo__rcl_wait_check(got[n], b->wait_replicas, b->redacted, err)))
        replies_free(got, n + 1);
    if (code == 0) {
        memcpy(replies, got, n * sizeof *got);
        freeReplyObject(got[n]);
    }
    free(all);
    free(got);
    return code;
}

static int may_write(const cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rcl_cmd c;
        convo__rcl_classify(&c, cmds[i].argv, cmds[i].lens, cmds[i].n);
        if (c.write)
            return 1;
    }
    return 0;
}

static int pipeline(convo_backend *b, rconn *rc, cmd *cmds, size_t n, redisReply **replies,
                    convo_error *err)
{
    if (rc->nodes)
        return pipeline_cluster(b, rc, cmds, n, replies, err);
    if (b->wait_replicas && may_write(cmds, n))
        return pipeline_wait(b, rc, cmds, n, replies, err);
    return pipeline_plain(b, rc, cmds, n, replies, err);
}

static int is_noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && starts_with(r, "NOSCRIPT");
}

/* Like pipeline(), where cmds[at] is "EVALSHA sha ...": when the server has
 * lost the script (restart, SCRIPT FLUSH) nothing ran, so the same pipeline
 * is sent again with EVAL, which also caches the script. */
static int pipeline_script(convo_backend *b, rconn *rc, cmd *cmds, size_t n, size_t at, int script,
                           redisReply **replies, convo_error *err)
{
    if (cmds[at].failed || cmds[at].n < 2)
        return oom(err);
    cmds[at].argv[0] = "EVALSHA";
    cmds[at].argv[1] = b->sha[script];
    cmds[at].lens[0] = 7;
    cmds[at].lens[1] = 40;
    int rc_ = pipeline(b, rc, cmds, n, replies, err);
    if (rc_ != 0 || !is_noscript(replies[at]))
        return rc_;
    replies_free(replies, n);
    cmds[at].argv[0] = "EVAL";
    cmds[at].lens[0] = 4;
    cmds[at].argv[1] = scripts[script];
    cmds[at].lens[1] = strlen(scripts[script]);
    return pipeline(b, rc, cmds, n, replies, err);
}

/* "EVALSHA <sha> n key..." with the first n keys of the thread. */
static void cmd_script_keys(cmd *c, const thread_keys *tk, size_t n)
{
    cmd_add(c, "EVALSHA", 7);
    cmd_add(c, "", 0); /* sha or script text, set by pipeline_script() */
    cmd_num(c, (long long)n);
    for (size_t i = 0; i < n; i++)
        cmd_add(c, tk->k[i], tk->len[i]);
}

/* The start of every script call but the append: all keys of the thread. */
static void cmd_script_head(cmd *c, const thread_keys *tk)
{
    cmd_script_keys(c, tk, K_COUNT);
}

/* The thread index key of id: one key, or in a cluster the one of id's slot. */
static void cmd_index_key(cmd *c, const convo_backend *b, const char *id)
{
    if (!b->cluster) {
        cmd_str(c, b->index_key);
        return;
    }
    char tag[3 * 512 + 1];
    size_t klen, n = encode_tag(NULL, id);
    if (n >= sizeof tag) {
        c->failed = 1; /* ids are validated to 512 bytes before they get here */
        return;
    }
    encode_tag(tag, id);
    const char *k = convo__rcl_index_key(b->cluster, convo__rcl_key_slot(tag, n), &klen);
    cmd_add(c, k, klen);
}

static void cmd_index(cmd *c, const convo_backend *b, const char *verb, const char *id)
{
    cmd_str(c, verb);
    cmd_index_key(c, b, id);
    if (verb[0] == 'Z' && verb[1] == 'A')
        cmd_add(c, "0", 1);
    cmd_str(c, id);
}

/* ---- writes that may create a thread ---- */

/* Which threads this store wrote lately, by a 64-bit hash of the id: a
 * direct-mapped table, lock-free. It only decides whether a write first
 * re-asserts the thread's index entry; a wrong answer costs a round trip,
 * never correctness (see run_writer). */
static uint64_t id_hash(const char *id)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 0x100000001b3u;
    return h | 1; /* 0 marks an empty slot */
}

static atomic_uint_fast64_t *recent_slot(convo_backend *b, uint64_t h)
{
    return &b->recent[(h >> 17) & (RECENT_SLOTS - 1)];
}

static int recent_has(convo_backend *b, uint64_t h)
{
    return atomic_load_explicit(recent_slot(b, h), memory_order_relaxed) == h;
}

static void recent_set(convo_backend *b, uint64_t h)
{
    atomic_store_explicit(recent_slot(b, h), h, memory_order_relaxed);
}

/* Forgets h (unless another thread took its slot meanwhile). */
static void recent_forget(convo_backend *b, uint64_t h)
{
    uint_fast64_t expect = h;
    atomic_compare_exchange_strong(recent_slot(b, h), &expect, 0);
}

static int is_create(const redisReply *r)
{
    return r->type == REDIS_REPLY_STATUS && r->len == 12 && memcmp(r->str, "CONVO_CREATE", 12) == 0;
}

/* Builds a script call, create = 1 allowing it to create the thread; returns
 * the script to run (its S_ number), or CONVO_ENOMEM. */
typedef int (*build_fn)(void *ctx, cmd *c, int create);

/* Runs a writing script that may create the thread; *reply gets its reply.
 * A thread this store wrote lately is indexed already, so its script runs
 * alone, without leave to create: it answers CONVO_CREATE, having written
 * nothing, when the thread is missing. Then, as for every other thread, the
 * index protocol runs: ZADD, the script allowed to create, ZADD, pipelined
 * (docs/redis.md, "The thread index"). So only a call inside the protocol
 * ever creates a thread. */
static int run_writer_as(convo_backend *b, rconn *c, const char *id, int known, build_fn build,
                         void *ctx, redisReply **reply, convo_error *err)
{
    uint64_t h = id_hash(id);
    int rc;
    if (known) {
        cmd one = {0};
        redisReply *r = NULL;
        int s = build(ctx, &one, 0);
        rc = s < 0 ? oom(err) : pipeline_script(b, c, &one, 1, 0, s, &r, err);
        cmd_free(&one);
        if (rc != 0 || !is_create(r)) {
            *reply = r;
            return rc;
        }
        freeReplyObject(r);
    }
    cmd cmds[3] = {{0}};
    redisReply *replies[3] = {NULL};
    cmd_index(&cmds[0], b, "ZADD", id);
    int s = build(ctx, &cmds[1], 1);
    rc = s < 0 ? oom(err) : 0;
    cmd_index(&cmds[2], b, "ZADD", id);
    if (rc == 0)
        rc = pipeline_script(b, c, cmds, 3, 1, s, replies, err);
    if (rc == 0 && replies[0]->type == REDIS_REPLY_INTEGER &&
        replies[1]->type != REDIS_REPLY_ERROR && replies[2]->type == REDIS_REPLY_INTEGER)
        recent_set(b, h);
    if (rc == 0) {
        *reply = replies[1];
        replies[1] = NULL;
    }
    replies_free(replies, 3);
    for (int i = 0; i < 3; i++)
        cmd_free(&cmds[i]);
    return rc;
}

static int run_writer(convo_backend *b, rconn *c, const char *id, build_fn build, void *ctx,
                      redisReply **reply, convo_error *err)
{
    return run_writer_as(b, c, id, recent_has(b, id_hash(id)), build, ctx, reply, err);
}

/* ---- connections ---- */

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static int connect_raw(convo_backend *b, redisContext **out, convo_error *err)
{
    struct timeval ct = ms_to_tv(b->connect_timeout_ms);
    redisContext *c;
    if (b->socket_path)
        c = b->connect_timeout_ms ? redisConnectUnixWithTimeout(b->socket_path, ct)
                                  : redisConnectUnix(b->socket_path);
    else
        c = b->connect_timeout_ms ? redisConnectWithTimeout(b->host, b->port, ct)
                                  : redisConnect(b->host, b->port);
    if (!c)
        return oom(err);
    if (c->err) {
        int rc = is_timeout(c)
                     ? convo__error(err, CONVO_ETIMEOUT, NULL, "redis: connect timed out (%s)",
                                    b->redacted)
                     : convo__error(err, CONVO_EIO, NULL, "redis: cannot connect: %s (%s)",
                                    c->errstr, b->redacted);
        redisFree(c);
        return rc;
    }
    if (b->timeout_ms && redisSetTimeout(c, ms_to_tv(b->timeout_ms)) != REDIS_OK) {
        int rc = conn_error(b, c, err);
        redisFree(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int setup_error(convo_backend *b, const redisReply *r, int code, convo_error *err)
{
    char word[16];
    size_t n = strcspn(r->str, " ");
    snprintf(word, sizeof word, "%.*s", (int)(n < 15 ? n : 15), r->str);
    return convo__error(err, code, word, "redis: %s (%s)", r->str, b->redacted);
}

/* AUTH, SELECT and SCRIPT LOAD of every script in one round trip: a restarted
 * server has an empty script cache, and a new connection is the moment to refill it. */
static int connection_setup(convo_backend *b, rconn *rc, convo_error *err)
{
    cmd cmds[2 + S_COUNT] = {{0}};
    int codes[2 + S_COUNT];
    size_t n = 0;
    if (b->password) {
        cmd_str(&cmds[n], "AUTH");
        if (b->user)
            cmd_str(&cmds[n], b->user);
        cmd_str(&cmds[n], b->password);
        codes[n++] = CONVO_EIO;
    }
    if (b->db != 0) {
        cmd_str(&cmds[n], "SELECT");
        cmd_num(&cmds[n], b->db);
        codes[n++] = CONVO_EINVAL;
    }
    size_t first_script = n;
    for (int i = 0; i < S_COUNT; i++) {
        cmd_str(&cmds[n], "SCRIPT");
        cmd_str(&cmds[n], "LOAD");
        cmd_str(&cmds[n], scripts[i]);
        codes[n++] = CONVO_EIO;
    }
    redisReply *replies[2 + S_COUNT] = {NULL};
    int code = pipeline(b, rc, cmds, n, replies, err);
    for (size_t i = 0; i < n && code == 0; i++) {
        const redisReply *r = replies[i];
        if (r->type == REDIS_REPLY_ERROR)
            code = setup_error(b, r, codes[i], err);
        else if (i >= first_script && (r->type != REDIS_REPLY_STRING || r->len != 40))
            code = convo__error(err, CONVO_EIO, NULL, "redis: unexpected SCRIPT LOAD reply");
        else if (i >= first_script && b->sha[i - first_script][0] == '\0')
            memcpy(b->sha[i - first_script], r->str, 41); /* set once, while open() is alone */
    }
    replies_free(replies, n);
    for (size_t i = 0; i < n; i++)
        cmd_free(&cmds[i]);
    return code;
}

/* rcl_setup_fn: a new connection to a cluster node. */
static int node_setup(void *ctx, redisContext *c, convo_error *err)
{
    rconn one = {.c = c};
    return connection_setup(ctx, &one, err);
}

static int pool_connect(void *ctx, void **conn, convo_error *err)
{
    convo_backend *b = ctx;
    rconn *rc = calloc(1, sizeof *rc);
    if (!rc)
        return oom(err);
    if (b->cluster) {
        if (!(rc->nodes = convo__rcl_conns_new())) {
            free(rc);
            return oom(err);
        }
        rc->gen = atomic_fetch_add(&b->next_gen, 1);
        *conn = rc;
        return 0;
    }
    int code = connect_raw(b, &rc->c, err);
    if (code == 0 && (code = connection_setup(b, rc, err)) != 0)
        redisFree(rc->c);
    if (code != 0) {
        free(rc);
        return code;
    }
    rc->gen = atomic_fetch_add(&b->next_gen, 1);
    *conn = rc;
    return 0;
}

static void pool_disconnect(void *ctx, void *conn)
{
    rconn *rc = conn;
    redisFree(rc->c);
    convo__rcl_conns_free(rc->nodes);
    free(rc);
}

static const convo_pool_ops pool_ops = {pool_connect, pool_disconnect};

/* A connection that is not older than the last failure seen: after a server
 * restart every idle connection is dead, and the next call must not pay for it. */
static int acquire(convo_backend *b, rconn **out, convo_error *err)
{
    for (;;) {
        void *p;
        int rc = convo__pool_acquire(b->pool, &p, err);
        if (rc != 0)
            return rc;
        rconn *c = p;
        if (c->gen >= atomic_load(&b->stale_below)) {
            *out = c;
            return 0;
        }
        convo__pool_release(b->pool, c, true);
    }
}

static void release(convo_backend *b, rconn *c)
{
    convo__pool_release(b->pool, c, (c->c && c->c->err != 0) || c->broken);
}

/* ---- open / close ---- */

static int parse_int(const char *name, const char *v, long long lo, long long hi, long long *out,
                     convo_error *err)
{
    char *end;
    errno = 0;
    long long x = v && *v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || errno || *end || x < lo || x > hi)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "redis URL: %s must be an integer in %lld..%lld", name, lo, hi);
    *out = x;
    return 0;
}

static int check_prefix(const char *p, convo_error *err)
{
    size_t n = strlen(p);
    if (n == 0 || n > MAX_PREFIX_BYTES)
        return convo__error(err, CONVO_EINVAL, NULL, "redis URL: prefix must be 1..%d bytes",
                            MAX_PREFIX_BYTES);
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c < 0x20 || *c == 0x7f || *c == '{' || *c == '}')
            return convo__error(err, CONVO_EINVAL, NULL, "redis URL: prefix must not contain "
                                "'{', '}' or control characters");
    return 0;
}

/* Host, port, socket path and database from the URL's authority and path. */
static int parse_location(convo_backend *b, convo_url *url, long long *db, convo_error *err)
{
    if (strncmp(url->rest, "//", 2) != 0)
        return convo__error(err, CONVO_EINVAL, NULL, "redis URL: expected %s://...", url->scheme);
    if (url->user && !url->password)
        return convo__error(err, CONVO_EINVAL, NULL, "redis URL: a user needs a password");
    if (url->password && !(b->password = strdup(url->password)))
        return oom(err);
    if (url->user && *url->user && !(b->user = strdup(url->user)))
        return oom(err);
    if (strcmp(url->scheme, "redis+unix") == 0) {
        if ((url->host && *url->host) || url->port || !url->path || !*url->path)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "redis URL: expected redis+unix:///path/to/socket");
        if (!(b->socket_path = malloc(strlen(url->path) + 2)))
            return oom(err);
        sprintf(b->socket_path, "/%s", url->path);
        return 0;
    }
    b->port = url->port ? url->port : 6379;
    if (strcmp(url->scheme, "redis+cluster") == 0) {
        /* the seed list; "h:p,h:p" stays whole in url->host */
        const char *h = url->host && *url->host ? url->host : "127.0.0.1";
        if (!(b->host = malloc(strlen(h) + 8)))
            return oom(err);
        if (url->port)
            sprintf(b->host, "%s:%d", h, url->port);
        else
            strcpy(b->host, h);
        if (url->path && *url->path && strcmp(url->path, "0") != 0)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "redis+cluster URL: a cluster has only database 0");
        return 0;
    }
    if (!(b->host = strdup(url->host && *url->host ? url->host : "127.0.0.1")))
        return oom(err);
    if (url->path && *url->path)
        return parse_int("the database (path)", url->path, 0, INT_MAX, db, err);
    return 0;
}

static int parse_params(convo_backend *b, convo_url *url, convo_error *err, long long *pool)
{
    long long db = -1, qdb = -1, ct = DEFAULT_TIMEOUT_MS, t = DEFAULT_TIMEOUT_MS;
    int64_t ttl = 0;
    int rc = parse_location(b, url, &db, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "db", 0, INT_MAX, &qdb, err);
    if (rc == 0 && db >= 0 && qdb >= 0)
        rc = convo__error(err, CONVO_EINVAL, NULL, "redis URL: database given twice");
    if (rc == 0)
        rc = convo__url_take_ttl(url, &ttl, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "connect_timeout", 0, INT_MAX, &ct, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "timeout", 0, INT_MAX, &t, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "pool", 1, 1024, pool, err);
    long long wait = 0, wait_t = 1000;
    if (rc == 0)
        rc = convo__url_take_int(url, "wait", 0, 64, &wait, err);
    if (rc == 0)
        rc = convo__url_take_int(url, "wait_timeout", 1, INT_MAX, &wait_t, err);
    if (rc == 0 && wait > 0 && t > 0 && wait_t >= t)
        rc = convo__error(err, CONVO_EINVAL, NULL,
                          "redis URL: wait_timeout must be shorter than timeout");
    if (rc == 0 && qdb > 0 && strcmp(url->scheme, "redis+cluster") == 0)
        rc = convo__error(err, CONVO_EINVAL, NULL,
                          "redis+cluster URL: a cluster has only database 0");
    b->wait_replicas = (int)wait;
    b->wait_timeout_ms = (int)wait_t;
    if (rc != 0)
        return rc;
    char *prefix = convo__url_take(url, "prefix");
    b->prefix = prefix ? prefix : strdup(DEFAULT_PREFIX);
    if (!b->prefix)
        return oom(err);
    if ((rc = check_prefix(b->prefix, err)) != 0 || (rc = convo__url_reject_rest(url, err)) != 0)
        return rc;
    b->db = (int)(db >= 0 ? db : qdb >= 0 ? qdb : 0);
    b->ttl_ms = ttl * 1000;
    b->connect_timeout_ms = (int)ct;
    b->timeout_ms = (int)t;
    if (!(b->index_key = malloc(strlen(b->prefix) + 16)) ||
        !(b->store_key = malloc(strlen(b->prefix) + 16)))
        return oom(err);
    sprintf(b->index_key, "%s:threads", b->prefix);
    sprintf(b->store_key, "%s:store", b->prefix);
    return 0;
}

static int cluster_open(convo_backend *b, convo_error *err)
{
    rcl_config cfg = {b->host,      b->prefix,          b->redacted,        b->connect_timeout_ms,
                      b->timeout_ms, b->wait_replicas, b->wait_timeout_ms, node_setup,
                      b};
    return convo__rcl_new(&b->cluster, &cfg, err);
}

static int cluster_ping(convo_backend *b, rconn *c, convo_error *err)
{
    cmd ping = {0};
    redisReply *r = NULL;
    cmd_str(&ping, "PING");
    int rc = pipeline(b, c, &ping, 1, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = reply_error(r, err);
    freeReplyObject(r);
    cmd_free(&ping);
    return rc;
}

static void rd_close(convo_backend *b)
{
    if (!b)
        return;
    convo__pool_free(b->pool);
    convo__rcl_free(b->cluster);
    free(b->host);
    free(b->socket_path);
    free(b->user);
    free(b->password);
    free(b->redacted);
    free(b->prefix);
    free(b->index_key);
    free(b->store_key);
    free(b);
}

static int layout_migrate(convo_backend *b, rconn *c, convo_error *err);

static int rd_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                   convo_error *err)
{
    if (strcmp(url->scheme, "rediss") == 0)
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "rediss: (TLS) is not supported: this build's hiredis has no TLS "
                            "support; use redis:// through a TLS tunnel");
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return oom(err);
    b->limits = *limits;
    atomic_init(&b->next_gen, 1);
    for (size_t i = 0; i < RECENT_SLOTS; i++)
        atomic_init(&b->recent[i], 0);
    atomic_init(&b->stale_below, 0);
    atomic_init(&b->order_hint, 0);
    long long pool = DEFAULT_POOL;
    int rc = (b->redacted = strdup(url->redacted)) ? parse_params(b, url, err, &pool) : oom(err);
    if (rc == 0 && strcmp(url->scheme, "redis+cluster") == 0)
        rc = cluster_open(b, err);
    if (rc == 0 && convo__pool_new(&b->pool, (size_t)pool, &pool_ops, b) != 0)
        rc = oom(err);
    /* connect now: a wrong host or password is reported by open, and the SHAs are set */
    rconn *c;
    if (rc == 0 && (rc = acquire(b, &c, err)) == 0) {
        if (b->cluster) /* a first node connection: the map, the SHAs */
            rc = cluster_ping(b, c, err);
        if (rc == 0)
            rc = layout_migrate(b, c, err);
        release(b, c);
    }
    if (rc != 0) {
        rd_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

/* ---- append ---- */

/* A growable msgpack output buffer; marks[] remember where parts start. */
typedef struct packbuf {
    char *data;
    size_t len, cap;
    size_t *marks;
    size_t nmarks, mcap;
    int failed;
} packbuf;

static int packbuf_write(void *data, const char *buf, size_t len)
{
    packbuf *p = data;
    if (len == 0)
        return 0; /* buf may be NULL (an empty value) */
    if (p->len + len > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->len + len)
            cap *= 2;
        char *d = realloc(p->data, cap);
        if (!d) {
            p->failed = 1;
            return -1;
        }
        p->data = d;
        p->cap = cap;
    }
    memcpy(p->data + p->len, buf, len);
    p->len += len;
    return 0;
}

/* Ends the current part: part i is [marks[i], marks[i + 1]). */
static void packbuf_mark(packbuf *p)
{
    if (p->nmarks == p->mcap) {
        size_t cap = p->mcap ? p->mcap * 2 : 16;
        size_t *m = realloc(p->marks, cap * sizeof *m);
        if (!m) {
            p->failed = 1;
            return;
        }
        p->marks = m;
        p->mcap = cap;
    }
    p->marks[p->nmarks++] = p->len;
}

static void packbuf_free(packbuf *p)
{
    free(p->data);
    free(p->marks);
}

/* Adds part i of p to a command. */
static void cmd_part(cmd *c, const packbuf *p, size_t i)
{
    cmd_add(c, p->data + p->marks[i], p->marks[i + 1] - p->marks[i]);
}

/* Packs each message as its whole record [created_at, role, bytes]: with
 * created_at[i] when given (a dump), else `now` for the whole batch. Part i
 * is message i. */
static int pack_records(const convo_message_in *msgs, size_t n, const int64_t *created_at,
                        int64_t now, packbuf *pb)
{
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += msgs[i].len + strlen(msgs[i].role) + 24;
    if (!(pb->data = malloc(cap ? cap : 1)))
        return CONVO_ENOMEM;
    pb->cap = cap;
    msgpack_packer pk;
    msgpack_packer_init(&pk, pb, packbuf_write);
    packbuf_mark(pb);
    for (size_t i = 0; i < n; i++) {
        size_t rlen = strlen(msgs[i].role);
        if (msgpack_pack_array(&pk, 3) ||
            msgpack_pack_int64(&pk, created_at ? created_at[i] : now) ||
            msgpack_pack_str(&pk, rlen) || msgpack_pack_str_body(&pk, msgs[i].role, rlen) ||
            msgpack_pack_bin(&pk, msgs[i].len) ||
            msgpack_pack_bin_body(&pk, msgs[i].bytes, msgs[i].len))
            return CONVO_ERROR;
        packbuf_mark(pb);
    }
    return pb->failed ? CONVO_ENOMEM : 0;
}

/* The script's answer: first_seq, or {first_seq, count} for a replay. */
static int append_result(const redisReply *r, size_t n, convo_append_result *res,
                         convo_error *err)
{
    if (r->type == REDIS_REPLY_ERROR)
        return reply_error(r, err);
    if (r->type == REDIS_REPLY_INTEGER) {
        *res = (convo_append_result){r->integer, n, 0};
        return 0;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER)
        return convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to the append script");
    *res = (convo_append_result){r->element[0]->integer, (size_t)r->element[1]->integer, 1};
    return 0;
}

typedef struct append_call {
    const convo_backend *b;
    const thread_keys *tk;
    const convo_append_opts *opts;
    const packbuf *pb;
    size_t n;
} append_call;

/* Each key and argument costs the server time, so a script gets only what it
 * uses: without leave to create and without ttl it touches the list and the
 * idempotency hash only. */
static int append_build(void *ctx, cmd *c, int create)
{
    const append_call *a = ctx;
    const convo_append_opts *o = a->opts;
    cmd_script_keys(c, a->tk, create || a->b->ttl_ms > 0 ? K_COUNT : o->idempotency_key ? 2 : 1);
    cmd_add(c, create ? "1" : "0", 1);
    cmd_str(c, o->idempotency_key ? o->idempotency_key : "");
    cmd_num(c, o->expected_length);
    cmd_num(c, a->b->ttl_ms);
    for (size_t i = 0; i < a->n; i++)
        cmd_part(c, a->pb, i);
    return c->failed ? CONVO_ENOMEM : S_APPEND;
}

/* A deadline found on the list by append_plain(): make every key permanent
 * again. The list gone meanwhile means the thread expired or was deleted
 * after the push, which then counts as made before that. */
static int append_persist(convo_backend *b, rconn *c, const thread_keys *tk, convo_error *err)
{
    cmd call = {0};
    redisReply *r = NULL;
    cmd_script_head(&call, tk);
    int rc = pipeline_script(b, c, &call, 1, 0, S_PERSIST, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = reply_error(r, err);
    freeReplyObject(r);
    cmd_free(&call);
    return rc;
}

/* The common append (no idempotency key, no expected length, no ttl, a thread
 * this store wrote lately) without a script, which costs the server several
 * times a bare push: RPUSHX, which writes nothing when the list is missing,
 * and the list's PTTL, pipelined. Returns 1 when done, 0 when nothing was
 * written (no list: a new thread, or one without messages), or an error.
 * Once RPUSHX stored the batch the append has succeeded, whatever follows:
 * an error would make the caller, who has no idempotency key, store it
 * again. A deadline that append_persist() could not remove then is removed
 * by this store's next write to the thread, as it is forgotten (h) and so
 * takes the script, which makes the keys of a store without ttl permanent. */
static int append_plain(convo_backend *b, rconn *c, const thread_keys *tk, uint64_t h,
                        const packbuf *pb, size_t n, convo_append_result *res, convo_error *err)
{
    cmd cmds[2] = {{0}};
    redisReply *r[2] = {NULL};
    cmd_add(&cmds[0], "RPUSHX", 6);
    cmd_add(&cmds[0], tk->k[K_MSGS], tk->len[K_MSGS]);
    for (size_t i = 0; i < n; i++)
        cmd_part(&cmds[0], pb, i);
    cmd_add(&cmds[1], "PTTL", 4);
    cmd_add(&cmds[1], tk->k[K_MSGS], tk->len[K_MSGS]);
    int rc = cmds[0].failed || cmds[1].failed ? oom(err) : pipeline(b, c, cmds, 2, r, err);
    if (rc == 0 && r[0]->type == REDIS_REPLY_ERROR)
        rc = reply_error(r[0], err);
    else if (rc == 0 && (r[0]->type != REDIS_REPLY_INTEGER || r[1]->type != REDIS_REPLY_INTEGER))
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to RPUSHX");
    else if (rc == 0 && r[0]->integer > 0) {
        *res = (convo_append_result){r[0]->integer - (long long)n, n, 0};
        if (r[1]->integer >= 0 && append_persist(b, c, tk, err) != 0) { /* -2: gone since */
            recent_forget(b, h);
            convo__error_clear(err);
        }
        rc = 1;
    }
    replies_free(r, 2);
    cmd_free(&cmds[0]);
    cmd_free(&cmds[1]);
    return rc;
}

static int rd_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                     size_t n, const convo_append_opts *opts, convo_append_result *res,
                     convo_error *err)
{
    thread_keys tk;
    packbuf pb = {0};
    if (keys_make(b, thread_id, &tk) != 0)
        return oom(err);
    int rc = pack_records(msgs, n, NULL, convo__now_micros(), &pb);
    if (rc != 0)
        rc = rc == CONVO_ENOMEM ? oom(err) : convo__error(err, CONVO_ERROR, NULL, "msgpack failed");
    append_call a = {b, &tk, opts, &pb, n};
    uint64_t h = id_hash(thread_id);
    int known = recent_has(b, h);
    int plain = known && b->ttl_ms == 0 && !opts->idempotency_key && opts->expected_length < 0;
    rconn *c;
    redisReply *r = NULL;
    if (rc == 0 && (rc = acquire(b, &c, err)) == 0) {
        rc = plain ? append_plain(b, c, &tk, h, &pb, n, res, err) : 0;
        if (rc == 0) /* not plain, or nothing written: a script (may create) */
            rc = run_writer_as(b, c, thread_id, known && !plain, append_build, &a, &r, err);
        else if (rc == 1)
            rc = 0;
        release(b, c);
    }
    if (rc == 0 && r)
        rc = append_result(r, n, res, err);
    freeReplyObject(r);
    packbuf_free(&pb);
    free(tk.buf);
    return rc;
}

/* ---- load ---- */

/* One stored message: msgpack [created_at, role, bytes]. */
static int decode_record(const redisReply *e, msgpack_unpacked *u, convo_history *h, int64_t seq)
{
    size_t off = 0;
    if (e->type != REDIS_REPLY_STRING ||
        msgpack_unpack_next(u, e->str, e->len, &off) != MSGPACK_UNPACK_SUCCESS || off != e->len)
        return CONVO_ECORRUPT;
    msgpack_object o = u->data;
    if (o.type != MSGPACK_OBJECT_ARRAY || o.via.array.size != 3)
        return CONVO_ECORRUPT;
    msgpack_object *f = o.via.array.ptr;
    int64_t at;
    if (f[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && f[0].via.u64 <= INT64_MAX)
        at = (int64_t)f[0].via.u64;
    else if (f[0].type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        at = f[0].via.i64;
    else
        return CONVO_ECORRUPT;
    if (f[1].type != MSGPACK_OBJECT_STR || f[1].via.str.size == 0 ||
        f[1].via.str.size > CONVO_MAX_ROLE_BYTES ||
        memchr(f[1].via.str.ptr, '\0', f[1].via.str.size))
        return CONVO_ECORRUPT;
    const char *bytes;
    size_t len;
    if (f[2].type == MSGPACK_OBJECT_BIN) {
        bytes = f[2].via.bin.ptr;
        len = f[2].via.bin.size;
    } else if (f[2].type == MSGPACK_OBJECT_STR) {
        bytes = f[2].via.str.ptr;
        len = f[2].via.str.size;
    } else {
        return CONVO_ECORRUPT;
    }
    char role[CONVO_MAX_ROLE_BYTES + 1];
    memcpy(role, f[1].via.str.ptr, f[1].via.str.size);
    role[f[1].via.str.size] = '\0';
    return convo__history_add(h, bytes, len, role, seq, at) ? CONVO_ENOMEM : 0;
}

/* Adds the elements of an LRANGE reply whose seq (first_seq + i) is in [from, to). */
static int add_records(const redisReply *list, int64_t first_seq, int64_t from, int64_t to,
                       convo_history *h, convo_error *err)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int rc = 0;
    int64_t lo = from > first_seq ? from - first_seq : 0;
    int64_t hi = (int64_t)list->elements;
    if (to - first_seq < hi)
        hi = to - first_seq;
    if (hi > lo && convo__history_reserve(h, (size_t)(hi - lo)) != 0)
        rc = CONVO_ENOMEM;
    for (int64_t i = lo; i < hi && rc == 0; i++)
        rc = decode_record(list->element[i], &u, h, first_seq + i);
    msgpack_unpacked_destroy(&u);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "redis: a stored message could not be decoded");
    return rc ? oom(err) : 0;
}

typedef struct extra_field {
    long long ord;
    const redisReply *key, *value;
    size_t json_at;
} extra_field;

static int by_ord(const void *a, const void *b)
{
    long long x = ((const extra_field *)a)->ord, y = ((const extra_field *)b)->ord;
    return (x > y) - (x < y);
}

/* Sets fields[0..n) into obj in insertion order; CONVO_ECORRUPT on bad text. */
static int extra_fill(json_t *obj, extra_field *f, size_t n)
{
    qsort(f, n, sizeof *f, by_ord);
    for (size_t i = 0; i < n; i++) {
        json_error_t je;
        json_t *k = json_loadb(f[i].key->str, f[i].key->len, JSON_DECODE_ANY, &je);
        json_t *v = json_loadb(f[i].value->str + f[i].json_at, f[i].value->len - f[i].json_at,
                               JSON_DECODE_ANY, &je);
        int ok = k && v && json_is_string(k) &&
                 json_object_set_new(obj, json_string_value(k), v) == 0;
        json_decref(k);
        if (!ok) {
            if (!(k && json_is_string(k)))
                json_decref(v);
            return CONVO_ECORRUPT;
        }
    }
    return 0;
}

/* Rebuilds the extra object from the HGETALL reply of the extra hash. */
static int extra_rebuild(const redisReply *all, convo_history *h, convo_error *err)
{
    if (all->type != REDIS_REPLY_ARRAY || all->elements % 2)
        return convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad extra hash");
    size_t n = all->elements / 2;
    if (n == 0)
        return 0;
    extra_field *f = calloc(n, sizeof *f);
    json_t *obj = json_object();
    int rc = f && obj ? 0 : CONVO_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        f[i].key = all->element[2 * i];
        f[i].value = all->element[2 * i + 1];
        char *end;
        const redisReply *v = f[i].value;
        f[i].ord = v->type == REDIS_REPLY_STRING ? strtoll(v->str, &end, 10) : 0;
        if (v->type != REDIS_REPLY_STRING || end == v->str || *end != ' ')
            rc = CONVO_ECORRUPT;
        else
            f[i].json_at = (size_t)(end - v->str) + 1;
    }
    if (rc == 0)
        rc = extra_fill(obj, f, n);
    char *text = rc == 0 ? json_dumps(obj, JSON_COMPACT) : NULL;
    if (rc == 0 && (!text || convo__history_set_extra(h, text, strlen(text)) != 0))
        rc = CONVO_ENOMEM;
    free(text);
    json_decref(obj);
    free(f);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "redis: the stored extra object could not be decoded");
    return rc ? oom(err) : 0;
}

/* The meta hash's "v" field: nil = no such thread; "2" = this layout, "1"
 * the one before (messages and extra are the same; only checkpoint orders,
 * which checkpoint writes migrate, differ). */
static int check_layout(const redisReply *v, const char *missing, convo_error *err)
{
    if (v->type == REDIS_REPLY_NIL)
        return convo__error(err, CONVO_ENOTFOUND, NULL, "%s", missing);
    if (v->type == REDIS_REPLY_STRING && v->len == 1 && (v->str[0] == '1' || v->str[0] == '2'))
        return 0;
    return convo__error(err, CONVO_ENOTSUP, NULL,
                        "redis: thread stored in an unknown layout (a newer convo?)");
}

/* MULTI HGET(v) LLEN LRANGE [HGETALL] EXEC: one round trip, one snapshot. A
 * tail is read as the last `tail` elements and trimmed here against LLEN. */
static int load_send(convo_backend *b, rconn *c, const thread_keys *tk, const convo_load_opts *o,
                     convo_history *h, convo_error *err)
{
    cmd cmds[6] = {{0}};
    size_t n = 0;
    cmd_str(&cmds[n++], "MULTI");
    cmd_str(&cmds[n], "HGET");
    cmd_add(&cmds[n], tk->k[K_META], tk->len[K_META]);
    cmd_add(&cmds[n++], "v", 1);
    cmd_str(&cmds[n], "LLEN");
    cmd_add(&cmds[n++], tk->k[K_MSGS], tk->len[K_MSGS]);
    cmd_str(&cmds[n], "LRANGE");
    cmd_add(&cmds[n], tk->k[K_MSGS], tk->len[K_MSGS]);
    int64_t limit_end = o->limit > 0 && o->from_seq <= INT64_MAX - o->limit
                            ? o->from_seq + o->limit - 1 : -1;
    cmd_num(&cmds[n], o->tail > 0 ? -o->tail : o->from_seq);
    cmd_num(&cmds[n++], o->tail > 0 ? -1 : limit_end);
    if (o->with_extra) {
        cmd_str(&cmds[n], "HGETALL");
        cmd_add(&cmds[n++], tk->k[K_EXTRA], tk->len[K_EXTRA]);
    }
    cmd_str(&cmds[n++], "EXEC");
    redisReply *replies[6] = {NULL};
    int rc = pipeline(b, c, cmds, n, replies, err);
    for (size_t i = 0; i < n; i++)
        cmd_free(&cmds[i]);
    if (rc != 0)
        return rc;
    const redisReply *x = replies[n - 1];
    if (x->type == REDIS_REPLY_ERROR)
        rc = reply_error(x, err);
    else if (x->type != REDIS_REPLY_ARRAY || x->elements != n - 2)
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a load");
    for (size_t i = 0; rc == 0 && i < x->elements; i++)
        if (x->element[i]->type == REDIS_REPLY_ERROR)
            rc = reply_error(x->element[i], err);
    if (rc == 0)
        rc = check_layout(x->element[0], "thread not found", err);
    if (rc == 0) {
        int64_t len = x->element[1]->integer, from, to;
        const redisReply *list = x->element[2];
        convo__load_range(o, len, &from, &to);
        convo__history_set_length(h, len);
        int64_t first = o->tail > 0 ? len - (int64_t)list->elements : o->from_seq;
        rc = add_records(list, first, from, to, h, err);
    }
    if (rc == 0 && o->with_extra)
        rc = extra_rebuild(x->element[3], h, err);
    replies_free(replies, n);
    return rc;
}

static int rd_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                   convo_history **out, convo_error *err)
{
    thread_keys tk;
    convo_history *h = convo__history_new();
    if (!h || keys_make(b, thread_id, &tk) != 0) {
        convo_history_free(h);
        return oom(err);
    }
    rconn *c;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = load_send(b, c, &tk, opts, h, err);
        release(b, c);
    }
    free(tk.buf);
    if (rc != 0) {
        convo_history_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

/* ---- save_extra ---- */

/* Field/value texts of the patch: each key as JSON text, each value as compact JSON. */
static int extra_texts(json_t *patch, char ***texts, size_t *ntexts)
{
    size_t n = json_object_size(patch), k = 0;
    char **t = calloc(2 * n + 1, sizeof *t);
    *texts = t;
    *ntexts = 0;
    if (!t)
        return CONVO_ENOMEM;
    const char *key;
    json_t *value;
    json_object_foreach(patch, key, value) {
        json_t *ks = json_string(key);
        t[k] = ks ? json_dumps(ks, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        json_decref(ks);
        t[k + 1] = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
        *ntexts = k + 2;
        if (!t[k] || !t[k + 1])
            return CONVO_ENOMEM;
        k += 2;
    }
    return 0;
}

typedef struct extra_call {
    const convo_backend *b;
    const thread_keys *tk;
    char **texts;
    size_t ntexts;
} extra_call;

static int extra_build(void *ctx, cmd *c, int create)
{
    const extra_call *x = ctx;
    cmd_script_head(c, x->tk);
    cmd_add(c, create ? "1" : "0", 1);
    cmd_num(c, (long long)x->b->limits.max_extra_bytes);
    cmd_num(c, x->b->ttl_ms);
    for (size_t i = 0; i < x->ntexts; i++)
        cmd_str(c, x->texts[i]);
    return c->failed ? CONVO_ENOMEM : S_EXTRA;
}

static int rd_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                         void *patch_obj, convo_error *err)
{
    (void)patch;
    thread_keys tk;
    if (keys_make(b, thread_id, &tk) != 0)
        return oom(err);
    extra_call x = {b, &tk, NULL, 0};
    int rc = extra_texts(patch_obj, &x.texts, &x.ntexts) ? oom(err) : 0;
    rconn *c;
    redisReply *r = NULL;
    if (rc == 0 && (rc = acquire(b, &c, err)) == 0) {
        rc = run_writer(b, c, thread_id, extra_build, &x, &r, err);
        release(b, c);
    }
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = reply_error(r, err);
    freeReplyObject(r);
    for (size_t i = 0; i < x.ntexts; i++)
        free(x.texts[i]);
    free(x.texts);
    free(tk.buf);
    return rc;
}

/* ---- scanning the keyspace (maintenance only, never on a call's path) ---- */

/* "P" with the glob characters escaped, then tail: a SCAN pattern. */
static char *scan_pattern(const char *prefix, const char *tail)
{
    char *p = malloc(2 * strlen(prefix) + strlen(tail) + 1), *o = p;
    if (!p)
        return NULL;
    for (; *prefix; prefix++) {
        if (strchr("*?[]\\", *prefix))
            *o++ = '\\';
        *o++ = *prefix;
    }
    strcpy(o, tail);
    return p;
}

/* Runs fn on each batch of keys SCAN finds for the pattern prefix + tail. */
typedef int (*scan_fn)(convo_backend *b, rconn *c, const redisReply *keys, void *ctx,
                       convo_error *err);

static int scan_node(convo_backend *b, rconn *c, const char *tail, scan_fn fn, void *ctx,
                     convo_error *err)
{
    char *pattern = scan_pattern(b->prefix, tail);
    char cursor[32] = "0";
    if (!pattern) /* cmd_str() below would strlen() it */
        return oom(err);
    int rc;
    do {
        cmd scan = {0};
        redisReply *r = NULL;
        const char *words[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        for (int i = 0; i < 6; i++)
            cmd_str(&scan, words[i]);
        rc = pipeline(b, c, &scan, 1, &r, err);
        cmd_free(&scan);
        if (rc != 0)
            break;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY)
            rc = r->type == REDIS_REPLY_ERROR
                     ? reply_error(r, err)
                     : convo__error(err, CONVO_EIO, NULL, "redis: bad SCAN reply");
        else {
            snprintf(cursor, sizeof cursor, "%.*s", (int)r->element[0]->len, r->element[0]->str);
            rc = r->element[1]->elements ? fn(b, c, r->element[1], ctx, err) : 0;
        }
        freeReplyObject(r);
    } while (rc == 0 && strcmp(cursor, "0") != 0);
    free(pattern);
    return rc;
}

/* In a cluster, SCAN runs on each master in turn (keys move with resharding:
 * what uses it must bear a key seen twice or not at all). */
static int scan_each(convo_backend *b, rconn *c, const char *tail, scan_fn fn, void *ctx,
                     convo_error *err)
{
    if (!b->cluster)
        return scan_node(b, c, tail, fn, ctx, err);
    int nodes[64], rc = 0, n = convo__rcl_masters(b->cluster, nodes, 64);
    for (int i = 0; i < n && rc == 0; i++) {
        convo__rcl_pin(c->nodes, nodes[i]);
        rc = scan_node(b, c, tail, fn, ctx, err);
    }
    convo__rcl_pin(c->nodes, -1);
    return rc;
}

/* ---- the thread index ---- */

/* After removing index entries, put back those whose thread exists after all:
 * a writer may have created it between our check and our ZREM. */
static int index_remove(convo_backend *b, rconn *c, const char *const *ids, size_t n,
                        size_t *readded, convo_error *err)
{
    if (n == 0)
        return 0;
    cmd *cmds = calloc(2 * n, sizeof *cmds);
    redisReply **replies = calloc(2 * n, sizeof *replies);
    thread_keys *tk = calloc(n, sizeof *tk);
    int rc = cmds && replies && tk ? 0 : oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (keys_make(b, ids[i], &tk[i]) != 0) {
            rc = oom(err);
            break;
        }
        cmd_index(&cmds[2 * i], b, "ZREM", ids[i]);
        cmd_str(&cmds[2 * i + 1], "EXISTS");
        cmd_add(&cmds[2 * i + 1], tk[i].k[K_META], tk[i].len[K_META]);
    }
    if (rc == 0)
        rc = pipeline(b, c, cmds, 2 * n, replies, err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const redisReply *e = replies[2 * i + 1];
        if (e->type == REDIS_REPLY_INTEGER && e->integer == 1) {
            if (readded)
                (*readded)++;
            cmd again = {0};
            redisReply *r = NULL;
            cmd_index(&again, b, "ZADD", ids[i]);
            rc = pipeline(b, c, &again, 1, &r, err);
            freeReplyObject(r);
            cmd_free(&again);
        }
    }
    for (size_t i = 0; cmds && i < 2 * n; i++)
        cmd_free(&cmds[i]);
    if (replies)
        replies_free(replies, 2 * n);
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    free(cmds);
    free(replies);
    free(tk);
    return rc;
}

/* EXISTS of each candidate's meta key, in one round trip; exists[i] set to 0/1. */
static int check_exist(convo_backend *b, rconn *c, const redisReply *ids, char *exists,
                       convo_error *err)
{
    size_t n = ids->elements;
    for (size_t i = 0; i < n; i++)
        if (ids->element[i]->type != REDIS_REPLY_STRING ||
            memchr(ids->element[i]->str, '\0', ids->element[i]->len))
            return convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread index entry");
    if (n == 0)
        return 0;
    cmd *cmds = calloc(n, sizeof *cmds);
    redisReply **replies = calloc(n, sizeof *replies);
    thread_keys *tk = calloc(n, sizeof *tk);
    int rc = cmds && replies && tk ? 0 : oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (keys_make(b, ids->element[i]->str, &tk[i]) != 0)
            rc = oom(err);
        cmd_str(&cmds[i], "EXISTS");
        cmd_add(&cmds[i], tk[i].k[K_META], tk[i].len[K_META]);
    }
    if (rc == 0)
        rc = pipeline(b, c, cmds, n, replies, err);
    for (size_t i = 0; i < n && rc == 0; i++)
        exists[i] = replies[i]->type == REDIS_REPLY_INTEGER && replies[i]->integer == 1;
    for (size_t i = 0; cmds && i < n; i++)
        cmd_free(&cmds[i]);
    if (replies)
        replies_free(replies, n);
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    free(cmds);
    free(replies);
    free(tk);
    return rc;
}

/* ZRANGEBYLEX index "(cursor" + LIMIT 0 count: the next candidates after cursor. */
static int index_range(convo_backend *b, rconn *c, const char *cursor, size_t count,
                       redisReply **out, convo_error *err)
{
    cmd q = {0};
    char *from = NULL;
    if (cursor && (from = malloc(strlen(cursor) + 2)))
        sprintf(from, "(%s", cursor);
    if (cursor && !from)
        return oom(err);
    if (b->cluster) {
        int code = convo__rcl_index_range(b->cluster, c->nodes, from ? from : "-", count, out, err);
        free(from);
        return code;
    }
    cmd_str(&q, "ZRANGEBYLEX");
    cmd_str(&q, b->index_key);
    cmd_str(&q, from ? from : "-");
    cmd_add(&q, "+", 1);
    cmd_str(&q, "LIMIT");
    cmd_num(&q, 0);
    cmd_num(&q, (long long)count);
    int rc = pipeline(b, c, &q, 1, out, err);
    cmd_free(&q);
    free(from);
    if (rc == 0 && (*out)->type != REDIS_REPLY_ARRAY) {
        rc = (*out)->type == REDIS_REPLY_ERROR
                 ? reply_error(*out, err)
                 : convo__error(err, CONVO_EIO, NULL, "redis: unexpected ZRANGEBYLEX reply");
        freeReplyObject(*out);
    }
    return rc;
}

typedef struct id_list {
    char **ids;
    size_t n, cap;
} id_list;

static int id_push(id_list *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char **g = realloc(l->ids, cap * sizeof *g);
        if (!g)
            return CONVO_ENOMEM;
        l->ids = g;
        l->cap = cap;
    }
    if (!(l->ids[l->n] = malloc(len + 1)))
        return CONVO_ENOMEM;
    memcpy(l->ids[l->n], s, len);
    l->ids[l->n++][len] = '\0';
    return 0;
}

static void id_list_free(id_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ids[i]);
    free(l->ids);
}

/* Sorts one batch of index candidates into live (up to want) and stale ids;
 * *looked = how many were sorted (the last of them is the next cursor). */
static int classify(const redisReply *r, const char *exists, size_t want, id_list *live,
                    id_list *stale, size_t *looked)
{
    size_t i = 0;
    for (; i < r->elements && live->n < want; i++) {
        const redisReply *e = r->element[i];
        if (id_push(exists[i] ? live : stale, e->str, e->len) != 0)
            return CONVO_ENOMEM;
    }
    *looked = i;
    return 0;
}

/* Collects up to `want` ids of existing threads after `after`, pruning index
 * entries of threads that are gone (deleted mid-way, expired, or a crash). */
static int list_collect(convo_backend *b, rconn *c, const char *after, size_t want, id_list *live,
                        convo_error *err)
{
    char *cursor = after ? strdup(after) : NULL;
    int rc = after && !cursor ? oom(err) : 0;
    while (rc == 0 && live->n < want) {
        size_t ask = want - live->n < 16 ? 16 : want - live->n;
        redisReply *r;
        if ((rc = index_range(b, c, cursor, ask, &r, err)) != 0)
            break;
        char *exists = calloc(r->elements + 1, 1);
        id_list stale = {0};
        size_t looked = 0;
        rc = exists ? check_exist(b, c, r, exists, err) : oom(err);
        if (rc == 0 && classify(r, exists, want, live, &stale, &looked) != 0)
            rc = oom(err);
        if (rc == 0)
            rc = index_remove(b, c, (const char *const *)stale.ids, stale.n, NULL, err);
        int done = r->elements < ask;
        if (rc == 0 && looked > 0) {
            free(cursor);
            const redisReply *last = r->element[looked - 1];
            if ((cursor = malloc(last->len + 1))) {
                memcpy(cursor, last->str, last->len);
                cursor[last->len] = '\0';
            } else {
                rc = oom(err);
            }
        }
        id_list_free(&stale);
        free(exists);
        freeReplyObject(r);
        if (done)
            break;
    }
    free(cursor);
    return rc;
}

static int rd_thread_list(convo_backend *b, const char *after, size_t limit,
                          convo_thread_page **out, convo_error *err)
{
    convo_thread_page *p = convo__thread_page_new();
    if (!p)
        return oom(err);
    id_list live = {0};
    rconn *c;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        /* one more than asked for tells whether a next page exists */
        rc = list_collect(b, c, after, limit + 1, &live, err);
        release(b, c);
    }
    for (size_t i = 0; rc == 0 && i < live.n && i < limit; i++)
        if (convo__thread_page_add(p, live.ids[i], strlen(live.ids[i])) != 0)
            rc = oom(err);
    if (rc == 0 && live.n > limit && convo__thread_page_set_next(p, live.ids[limit - 1]) != 0)
        rc = oom(err);
    id_list_free(&live);
    if (rc != 0) {
        convo_thread_page_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* Goes through the whole index and removes the entries of threads that are
 * gone (expired with ttl, or left by a crash); *removed counts them. */
static int sweep_run(convo_backend *b, rconn *c, uint64_t *removed, convo_error *err)
{
    char *cursor = NULL;
    int rc = 0, done = 0;
    while (rc == 0 && !done) {
        redisReply *r;
        if ((rc = index_range(b, c, cursor, 500, &r, err)) != 0)
            break;
        char *exists = calloc(r->elements + 1, 1);
        id_list live = {0}, stale = {0};
        size_t looked = 0, readded = 0;
        rc = exists ? check_exist(b, c, r, exists, err) : oom(err);
        if (rc == 0 && classify(r, exists, SIZE_MAX, &live, &stale, &looked) != 0)
            rc = oom(err);
        if (rc == 0)
            rc = index_remove(b, c, (const char *const *)stale.ids, stale.n, &readded, err);
        *removed += stale.n - readded;
        done = r->elements < 500;
        if (rc == 0 && !done) {
            free(cursor);
            const redisReply *last = r->element[r->elements - 1];
            if ((cursor = malloc(last->len + 1))) {
                memcpy(cursor, last->str, last->len);
                cursor[last->len] = '\0';
            } else {
                rc = oom(err);
            }
        }
        id_list_free(&live);
        id_list_free(&stale);
        free(exists);
        freeReplyObject(r);
    }
    free(cursor);
    return rc;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The thread id of "P:{TAG}:meta" (the tag percent-decoded), or NULL. */
static char *id_of_meta_key(const convo_backend *b, const redisReply *k)
{
    size_t plen = strlen(b->prefix);
    if (k->type != REDIS_REPLY_STRING || k->len < plen + 9 || memcmp(k->str, b->prefix, plen) ||
        memcmp(k->str + plen, ":{", 2) || memcmp(k->str + k->len - 6, "}:meta", 6))
        return NULL;
    const char *tag = k->str + plen + 2;
    size_t tlen = k->len - plen - 8, n = 0;
    char *id = malloc(tlen + 1);
    for (size_t i = 0; id && i < tlen; i++) {
        int hi = i + 2 < tlen ? hex_digit(tag[i + 1]) : -1;
        int lo = i + 2 < tlen ? hex_digit(tag[i + 2]) : -1;
        if (tag[i] != '%') {
            id[n++] = tag[i];
        } else if (hi >= 0 && lo >= 0 && (hi || lo)) {
            id[n++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            free(id);
            return NULL;
        }
    }
    if (id)
        id[n] = '\0';
    return id;
}

/* ZADD NX of the thread of each meta key of a SCAN batch: puts back index
 * entries that a client lost by dying between a removal and its re-add. */
static int repair_batch(convo_backend *b, rconn *c, const redisReply *keys, void *ctx,
                        convo_error *err)
{
    (void)ctx;
    size_t n = keys->elements, m = 0;
    cmd *cmds = calloc(n, sizeof *cmds);
    char **ids = calloc(n, sizeof *ids);
    redisReply **replies = calloc(n, sizeof *replies);
    int rc = cmds && ids && replies ? 0 : oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!(ids[m] = id_of_meta_key(b, keys->element[i])))
            continue;
        cmd_str(&cmds[m], "ZADD");
        cmd_index_key(&cmds[m], b, ids[m]);
        cmd_str(&cmds[m], "NX");
        cmd_str(&cmds[m], "0");
        cmd_str(&cmds[m], ids[m]);
        m++;
    }
    if (rc == 0 && m > 0)
        rc = pipeline(b, c, cmds, m, replies, err);
    for (size_t i = 0; cmds && ids && i < m; i++) {
        cmd_free(&cmds[i]);
        free(ids[i]);
    }
    if (replies && rc == 0)
        replies_free(replies, m);
    free(cmds);
    free(ids);
    free(replies);
    return rc;
}

static int rd_sweep(convo_backend *b, uint64_t *removed, convo_error *err)
{
    rconn *c;
    *removed = 0;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = sweep_run(b, c, removed, err);
        if (rc == 0)
            rc = scan_each(b, c, ":{*}:meta", repair_batch, NULL, err);
        release(b, c);
    }
    return rc;
}

/* ---- delete ---- */

/* The script, then ZREM from the index and EXISTS, in one round trip; the
 * entry goes back when a writer re-created the thread in between. */
static int delete_send(convo_backend *b, rconn *c, const char *id, const thread_keys *tk,
                       convo_error *err)
{
    cmd cmds[3] = {{0}};
    cmd_script_head(&cmds[0], tk);
    cmd_index(&cmds[1], b, "ZREM", id);
    cmd_str(&cmds[2], "EXISTS");
    cmd_add(&cmds[2], tk->k[K_META], tk->len[K_META]);
    redisReply *replies[3] = {NULL};
    int rc = pipeline_script(b, c, cmds, 3, 0, S_DELETE, replies, err);
    for (int i = 0; i < 3; i++)
        cmd_free(&cmds[i]);
    if (rc != 0)
        return rc;
    if (replies[0]->type == REDIS_REPLY_ERROR)
        rc = reply_error(replies[0], err);
    int recreated = replies[2]->type == REDIS_REPLY_INTEGER && replies[2]->integer == 1;
    replies_free(replies, 3);
    if (recreated) {
        cmd again = {0};
        redisReply *r = NULL;
        cmd_index(&again, b, "ZADD", id);
        int rc2 = pipeline(b, c, &again, 1, &r, err);
        freeReplyObject(r);
        cmd_free(&again);
        if (rc == 0)
            rc = rc2;
    }
    return rc;
}

static int rd_thread_delete(convo_backend *b, const char *thread_id, convo_error *err)
{
    thread_keys tk;
    if (keys_make(b, thread_id, &tk) != 0)
        return oom(err);
    /* our next write of this id goes straight to the index protocol */
    uint_fast64_t h = id_hash(thread_id);
    atomic_compare_exchange_strong(recent_slot(b, h), &h, 0);
    rconn *c;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = delete_send(b, c, thread_id, &tk, err);
        release(b, c);
    }
    free(tk.buf);
    return rc;
}

/* ---- fork ---- */

/* Reads the source in one MULTI/EXEC (a consistent snapshot) and checks the
 * destination in the same round trip. On success *snap is the EXEC reply:
 * HGET meta v, LLEN, LRANGE, HGETALL extra, HMGET meta xb xc xn. */
static int fork_read(convo_backend *b, rconn *c, const thread_keys *src, const thread_keys *dst,
                     int64_t upto, redisReply **snap, convo_error *err)
{
    cmd cmds[8] = {{0}};
    redisReply *replies[8] = {NULL};
    cmd_str(&cmds[0], "MULTI");
    cmd_str(&cmds[1], "HGET");
    cmd_add(&cmds[1], src->k[K_META], src->len[K_META]);
    cmd_add(&cmds[1], "v", 1);
    cmd_str(&cmds[2], "LLEN");
    cmd_add(&cmds[2], src->k[K_MSGS], src->len[K_MSGS]);
    cmd_str(&cmds[3], "LRANGE");
    cmd_add(&cmds[3], src->k[K_MSGS], src->len[K_MSGS]);
    /* LRANGE 1 0 is empty, where 0 -1 would be everything */
    cmd_num(&cmds[3], upto == 0 ? 1 : 0);
    cmd_num(&cmds[3], upto < 0 ? -1 : upto == 0 ? 0 : upto - 1);
    cmd_str(&cmds[4], "HGETALL");
    cmd_add(&cmds[4], src->k[K_EXTRA], src->len[K_EXTRA]);
    const char *fields[] = {"HMGET", src->k[K_META], "xb", "xc", "xn"};
    for (int i = 0; i < 5; i++)
        cmd_add(&cmds[5], fields[i], i == 1 ? src->len[K_META] : strlen(fields[i]));
    cmd_str(&cmds[6], "EXEC");
    cmd_str(&cmds[7], "EXISTS");
    cmd_add(&cmds[7], dst->k[K_META], dst->len[K_META]);
    int rc = pipeline(b, c, cmds, 8, replies, err);
    for (int i = 0; i < 8; i++)
        cmd_free(&cmds[i]);
    if (rc != 0)
        return rc;
    redisReply *x = replies[6];
    if (x->type == REDIS_REPLY_ERROR)
        rc = reply_error(x, err);
    else if (x->type != REDIS_REPLY_ARRAY || x->elements != 5)
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply reading a fork source");
    for (size_t i = 0; rc == 0 && i < 5; i++)
        if (x->element[i]->type == REDIS_REPLY_ERROR)
            rc = reply_error(x->element[i], err);
    if (rc == 0)
        rc = check_layout(x->element[0], "source thread not found", err);
    if (rc == 0 && replies[7]->type == REDIS_REPLY_INTEGER && replies[7]->integer == 1)
        rc = convo__error(err, CONVO_ECONFLICT, NULL, "destination thread already exists");
    else if (rc == 0 && upto > x->element[1]->integer)
        rc = convo__error(err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%lld)",
                          (long long)upto, x->element[1]->integer);
    if (rc == 0) {
        *snap = x;
        replies[6] = NULL;
    }
    replies_free(replies, 8);
    return rc;
}

static void cmd_reply_str(cmd *c, const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING)
        cmd_add(c, r->str, r->len);
    else
        cmd_add(c, "0", 1); /* HMGET of a missing field */
}

/* ZADD, the fork script on the destination, ZADD: records and extra fields
 * are copied verbatim, created_at included. */
static int fork_write(convo_backend *b, rconn *c, const char *dst, const thread_keys *tk,
                      const redisReply *snap, convo_error *err)
{
    const redisReply *list = snap->element[2], *extra = snap->element[3], *m = snap->element[4];
    cmd cmds[3] = {{0}};
    cmd_index(&cmds[0], b, "ZADD", dst);
    cmd_script_head(&cmds[1], tk);
    cmd_num(&cmds[1], b->ttl_ms);
    cmd_num(&cmds[1], (long long)list->elements);
    for (size_t i = 0; i < 3; i++)
        cmd_reply_str(&cmds[1], m->type == REDIS_REPLY_ARRAY && m->elements == 3 ? m->element[i]
                                                                                  : m);
    for (size_t i = 0; i < list->elements; i++)
        cmd_reply_str(&cmds[1], list->element[i]);
    for (size_t i = 0; extra->type == REDIS_REPLY_ARRAY && i < extra->elements; i++)
        cmd_reply_str(&cmds[1], extra->element[i]);
    cmd_index(&cmds[2], b, "ZADD", dst);
    redisReply *replies[3] = {NULL};
    int rc = pipeline_script(b, c, cmds, 3, 1, S_FORK, replies, err);
    if (rc == 0 && replies[1]->type == REDIS_REPLY_ERROR)
        rc = reply_error(replies[1], err);
    replies_free(replies, 3);
    for (int i = 0; i < 3; i++)
        cmd_free(&cmds[i]);
    return rc;
}

static int fork_run(convo_backend *b, rconn *c, const char *src, const char *dst, int64_t upto,
                    convo_error *err)
{
    thread_keys ks = {0}, kd = {0};
    if (keys_make(b, src, &ks) != 0 || keys_make(b, dst, &kd) != 0) {
        free(ks.buf);
        return oom(err);
    }
    redisReply *snap = NULL;
    int rc = fork_read(b, c, &ks, &kd, upto, &snap, err);
    if (rc == 0) {
        const redisReply *list = snap->element[2];
        for (size_t i = 0; i < list->elements && rc == 0; i++)
            if (list->element[i]->type != REDIS_REPLY_STRING)
                rc = convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad message record");
        if (rc == 0)
            rc = fork_write(b, c, dst, &kd, snap, err);
    }
    freeReplyObject(snap);
    free(ks.buf);
    free(kd.buf);
    return rc;
}

static int rd_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          convo_error *err)
{
    rconn *c;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = fork_run(b, c, src, dst, upto, err);
        release(b, c);
    }
    return rc;
}

/* ---- restoring a dump ---- */

static int import_send(convo_backend *b, rconn *c, const char *id, const thread_keys *tk,
                       int64_t first, const convo_message_in *msgs, const int64_t *created_at,
                       size_t n, int *skipped, convo_error *err)
{
    packbuf pb = {0};
    cmd cmds[3] = {{0}};
    int rc = pack_records(msgs, n, created_at, 0, &pb);
    if (rc != 0) {
        rc = rc == CONVO_ENOMEM ? oom(err) : convo__error(err, CONVO_ERROR, NULL, "msgpack failed");
        goto done;
    }
    cmd_index(&cmds[0], b, "ZADD", id);
    cmd_script_head(&cmds[1], tk);
    cmd_num(&cmds[1], b->ttl_ms);
    cmd_num(&cmds[1], first);
    for (size_t i = 0; i < n; i++)
        cmd_part(&cmds[1], &pb, i);
    cmd_index(&cmds[2], b, "ZADD", id);
    redisReply *replies[3] = {NULL};
    if ((rc = pipeline_script(b, c, cmds, 3, 1, S_IMPORT, replies, err)) == 0) {
        if (replies[1]->type == REDIS_REPLY_ERROR)
            rc = reply_error(replies[1], err);
        else if (replies[1]->type != REDIS_REPLY_INTEGER)
            rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to an import");
        else
            *skipped = replies[1]->integer == 1;
    }
    replies_free(replies, 3);
done:
    for (int i = 0; i < 3; i++)
        cmd_free(&cmds[i]);
    packbuf_free(&pb);
    return rc;
}

static int rd_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int *skipped, convo_error *err)
{
    thread_keys tk;
    *skipped = 0;
    if (keys_make(b, thread_id, &tk) != 0)
        return oom(err);
    rconn *c;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = import_send(b, c, thread_id, &tk, first_seq, msgs, created_at, n, skipped, err);
        release(b, c);
    }
    free(tk.buf);
    return rc;
}

/* ---- checkpoints ---- */

/* A string part and a NUL separator (namespace, ids, versions hold none). */
static void pack_raw0(packbuf *pb, const char *s, int last)
{
    packbuf_write(pb, s, strlen(s));
    if (!last)
        packbuf_write(pb, "", 1);
}

/* A C string as msgpack str, NULL as nil. */
static void pack_cstr(msgpack_packer *pk, const char *s)
{
    if (!s) {
        msgpack_pack_nil(pk);
        return;
    }
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void pack_blob(msgpack_packer *pk, const void *bytes, size_t len)
{
    msgpack_pack_bin(pk, len);
    msgpack_pack_bin_body(pk, bytes, len);
}

/* Parts: the channel list [ch, version, ...]; the record's tail [parent,
 * metadata, body type, body, log_length]; then "NS\0CH\0VERSION" and
 * [type, bytes] of each value the snapshot brings. */
static int pack_checkpoint(const convo_checkpoint_in *cp, packbuf *pb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, pb, packbuf_write);
    packbuf_mark(pb);
    msgpack_pack_array(&pk, 2 * cp->nchannels);
    for (size_t i = 0; i < cp->nchannels; i++) {
        pack_cstr(&pk, cp->channels[i].channel);
        pack_cstr(&pk, cp->channels[i].version);
    }
    packbuf_mark(pb);
    msgpack_pack_array(&pk, 5);
    pack_cstr(&pk, cp->parent_id);
    pack_cstr(&pk, cp->metadata_json);
    pack_cstr(&pk, cp->body.type);
    if (cp->body.type)
        pack_blob(&pk, cp->body.bytes, cp->body.len);
    else
        msgpack_pack_nil(&pk);
    msgpack_pack_int64(&pk, cp->log_length);
    packbuf_mark(pb);
    for (size_t i = 0; i < cp->nchannels; i++) {
        const convo_channel_in *ch = &cp->channels[i];
        if (!ch->value)
            continue;
        pack_raw0(pb, cp->checkpoint_ns, 0);
        pack_raw0(pb, ch->channel, 0);
        pack_raw0(pb, ch->version, 1);
        packbuf_mark(pb);
        msgpack_pack_array(&pk, 2);
        pack_cstr(&pk, ch->value->type);
        pack_blob(&pk, ch->value->bytes, ch->value->len);
        packbuf_mark(pb);
    }
    return pb->failed ? CONVO_ENOMEM : 0;
}

/* The start of a script that may give a checkpoint its order: the thread's
 * keys, and on one server P:store, the store's last order (checkpoint.lua). */
static void cmd_cp_head(cmd *c, const convo_backend *b, const thread_keys *tk)
{
    if (b->cluster) {
        cmd_script_head(c, tk);
        return;
    }
    cmd_add(c, "EVALSHA", 7);
    cmd_add(c, "", 0);
    cmd_num(c, K_COUNT + 1);
    for (size_t i = 0; i < K_COUNT; i++)
        cmd_add(c, tk->k[i], tk->len[i]);
    cmd_str(c, b->store_key);
}

/* Puts this store makes or sees come after every order it saw before, even
 * on another master of a cluster with a slower clock. */
static void order_seen(convo_backend *b, long long order)
{
    int_fast64_t cur = atomic_load_explicit(&b->order_hint, memory_order_relaxed);
    while (cur < order && !atomic_compare_exchange_weak_explicit(
                              &b->order_hint, &cur, order, memory_order_relaxed,
                              memory_order_relaxed))
        ;
}

typedef struct put_call {
    convo_backend *b;
    const thread_keys *tk;
    const convo_checkpoint_in *cp;
    const packbuf *pb;     /* pack_checkpoint()'s parts */
    const packbuf *msgs;   /* pack_records()'s parts (put with messages), else NULL */
    int64_t created_at;
} put_call;

/* The checkpoint's parts after the fixed arguments: channel list, tail, then
 * (msgs) the message records, then the value pairs. */
static void put_parts(cmd *c, const put_call *p)
{
    cmd_part(c, p->pb, 0);
    cmd_part(c, p->pb, 1);
    for (size_t i = 0; p->msgs && i < p->cp->nmessages; i++)
        cmd_part(c, p->msgs, i);
    for (size_t i = 2; i + 1 < p->pb->nmarks; i++)
        cmd_part(c, p->pb, i);
}

static int put_build(void *ctx, cmd *c, int create)
{
    const put_call *p = ctx;
    cmd_cp_head(c, p->b, p->tk);
    cmd_add(c, create ? "1" : "0", 1);
    cmd_num(c, p->b->ttl_ms);
    cmd_str(c, p->cp->checkpoint_ns);
    cmd_str(c, p->cp->checkpoint_id);
    cmd_num(c, p->created_at);
    cmd_num(c, atomic_load_explicit(&p->b->order_hint, memory_order_relaxed));
    put_parts(c, p);
    return c->failed ? CONVO_ENOMEM : S_CP_PUT;
}

static int put_log_build(void *ctx, cmd *c, int create)
{
    const put_call *p = ctx;
    cmd_cp_head(c, p->b, p->tk);
    cmd_add(c, create ? "1" : "0", 1);
    cmd_num(c, p->b->ttl_ms);
    cmd_num(c, p->cp->expected_length);
    cmd_num(c, (long long)p->cp->nmessages);
    cmd_str(c, p->cp->checkpoint_ns);
    cmd_str(c, p->cp->checkpoint_id);
    cmd_num(c, p->created_at);
    cmd_num(c, atomic_load_explicit(&p->b->order_hint, memory_order_relaxed));
    put_parts(c, p);
    return c->failed ? CONVO_ENOMEM : S_CP_PUT_LOG;
}

/* Runs a put (with messages when msgs). With an expected length > 0 the
 * script runs alone first, without leave to create: a thread with messages
 * exists, and a missing one conflicts before anything (index entry included)
 * is written. */
static int put_run(convo_backend *b, const convo_checkpoint_in *cp, const convo_message_in *msgs,
                   convo_error *err)
{
    thread_keys tk;
    packbuf pb = {0}, mb = {0};
    if (keys_make(b, cp->thread_id, &tk) != 0)
        return oom(err);
    int64_t now = convo__now_micros();
    int rc = pack_checkpoint(cp, &pb) ? oom(err) : 0;
    if (rc == 0 && msgs && (rc = pack_records(msgs, cp->nmessages, NULL, now, &mb)) != 0)
        rc = rc == CONVO_ENOMEM ? oom(err) : convo__error(err, CONVO_ERROR, NULL, "msgpack failed");
    put_call p = {b, &tk, cp, &pb, msgs ? &mb : NULL, now};
    build_fn build = msgs ? put_log_build : put_build;
    int known = recent_has(b, id_hash(cp->thread_id)) || (msgs && cp->expected_length > 0);
    rconn *c;
    redisReply *r = NULL;
    if (rc == 0 && (rc = acquire(b, &c, err)) == 0) {
        rc = run_writer_as(b, c, cp->thread_id, known, build, &p, &r, err);
        release(b, c);
    }
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = reply_error(r, err);
    else if (rc == 0 && r->type != REDIS_REPLY_INTEGER)
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a checkpoint put");
    if (rc == 0)
        order_seen(b, r->integer);
    freeReplyObject(r);
    packbuf_free(&pb);
    packbuf_free(&mb);
    free(tk.buf);
    return rc;
}

static int rd_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    return put_run(b, cp, NULL, err);
}

static int rd_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                 const convo_message_in *msgs, convo_error *err)
{
    return put_run(b, cp, msgs, err);
}

/* Parts: "NS\0ID", then per write "NS\0ID\0TASK\0IDX" and [task_id,
 * task_path, idx, channel, type, bytes]. */
static int pack_writes(const char *ns, const char *id, const char *task, const char *path,
                       const convo_write_in *w, size_t n, packbuf *pb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, pb, packbuf_write);
    packbuf_mark(pb);
    pack_raw0(pb, ns, 0);
    pack_raw0(pb, id, 1);
    packbuf_mark(pb);
    for (size_t i = 0; i < n; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "%lld", (long long)w[i].idx);
        pack_raw0(pb, ns, 0);
        pack_raw0(pb, id, 0);
        pack_raw0(pb, task, 0);
        pack_raw0(pb, idx, 1);
        packbuf_mark(pb);
        msgpack_pack_array(&pk, 6);
        pack_cstr(&pk, task);
        pack_cstr(&pk, path);
        msgpack_pack_int64(&pk, w[i].idx);
        pack_cstr(&pk, w[i].channel);
        pack_cstr(&pk, w[i].value.type);
        pack_blob(&pk, w[i].value.bytes, w[i].value.len);
        packbuf_mark(pb);
    }
    return pb->failed ? CONVO_ENOMEM : 0;
}

static int writes_send(convo_backend *b, rconn *c, const thread_keys *tk,
                       const convo_write_in *w, size_t n, const packbuf *pb, convo_error *err)
{
    cmd call = {0};
    cmd_script_head(&call, tk);
    cmd_num(&call, b->ttl_ms);
    cmd_part(&call, pb, 0);
    for (size_t i = 0; i < n; i++) {
        cmd_add(&call, w[i].idx < 0 ? "r" : "k", 1);
        cmd_part(&call, pb, 1 + 2 * i);
        cmd_part(&call, pb, 2 + 2 * i);
    }
    redisReply *r = NULL;
    int rc = pipeline_script(b, c, &call, 1, 0, S_CP_WRITES, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = reply_error(r, err);
    freeReplyObject(r);
    cmd_free(&call);
    return rc;
}

/* The checkpoint must exist when the script runs (never a resurrection), so
 * this never creates a thread and needs no index protocol. */
static int rd_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                                    const char *checkpoint_id, const char *task_id,
                                    const char *task_path, const convo_write_in *writes,
                                    size_t n, convo_error *err)
{
    thread_keys tk;
    packbuf pb = {0};
    if (keys_make(b, thread_id, &tk) != 0)
        return oom(err);
    int rc = pack_writes(ns, checkpoint_id, task_id, task_path, writes, n, &pb) ? oom(err) : 0;
    rconn *c;
    if (rc == 0 && (rc = acquire(b, &c, err)) == 0) {
        rc = writes_send(b, c, &tk, writes, n, &pb, err);
        release(b, c);
    }
    packbuf_free(&pb);
    free(tk.buf);
    return rc;
}

/* A NUL-terminated copy of a msgpack str (NULL for nil); *bad on anything else. */
static char *obj_str(const msgpack_object *o, int *bad)
{
    if (o->type == MSGPACK_OBJECT_NIL)
        return NULL;
    if (o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, '\0', o->via.str.size)) {
        *bad = 1;
        return NULL;
    }
    char *s = malloc(o->via.str.size + 1);
    if (!s) {
        *bad = 1;
        return NULL;
    }
    memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = '\0';
    return s;
}

static int obj_int(const msgpack_object *o, int64_t *v)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
        *v = (int64_t)o->via.u64;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *v = o->via.i64;
    else
        return -1;
    return 0;
}

static int obj_bytes(const msgpack_object *o, const char **p, size_t *len)
{
    if (o->type == MSGPACK_OBJECT_BIN) {
        *p = o->via.bin.ptr;
        *len = o->via.bin.size;
    } else if (o->type == MSGPACK_OBJECT_STR) {
        *p = o->via.str.ptr;
        *len = o->via.str.size;
    } else {
        return -1;
    }
    return 0;
}

/* Decodes one whole msgpack object filling s (a redis string). */
static int unpack_whole(msgpack_unpacked *u, const redisReply *s, msgpack_object_type type,
                        size_t size)
{
    size_t off = 0;
    if (s->type != REDIS_REPLY_STRING ||
        msgpack_unpack_next(u, s->str, s->len, &off) != MSGPACK_UNPACK_SUCCESS || off != s->len)
        return -1;
    const msgpack_object *o = &u->data;
    return o->type == type && o->via.array.size == size ? 0 : -1;
}

/* Adds channel i (name, version from the record) and its stored value. */
static int add_channel(convo_checkpoint *cp, const msgpack_object *names, size_t i,
                       const redisReply *value)
{
    int bad = 0, rc = 0;
    char *ch = obj_str(&names[2 * i], &bad), *ver = obj_str(&names[2 * i + 1], &bad);
    if (bad || !ch || !ver) {
        rc = CONVO_ECORRUPT;
    } else if (value->type == REDIS_REPLY_NIL) {
        rc = convo__checkpoint_add_channel(cp, ch, ver, NULL, NULL, 0);
    } else {
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        const char *bytes;
        size_t len;
        char *type = NULL;
        if (unpack_whole(&u, value, MSGPACK_OBJECT_ARRAY, 2) != 0 ||
            !(type = obj_str(&u.data.via.array.ptr[0], &bad)) || bad ||
            obj_bytes(&u.data.via.array.ptr[1], &bytes, &len) != 0)
            rc = CONVO_ECORRUPT;
        else
            rc = convo__checkpoint_add_channel(cp, ch, ver, type, bytes, len);
        free(type);
        msgpack_unpacked_destroy(&u);
    }
    free(ch);
    free(ver);
    return rc;
}

/* One pending write: [task_id, task_path, idx, channel, type, bytes]. */
static int add_write(convo_checkpoint *cp, const redisReply *value)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int bad = 0, rc = CONVO_ECORRUPT;
    char *s[5] = {NULL};
    int64_t idx;
    const char *bytes;
    size_t len;
    if (unpack_whole(&u, value, MSGPACK_OBJECT_ARRAY, 6) == 0) {
        const msgpack_object *a = u.data.via.array.ptr;
        s[0] = obj_str(&a[0], &bad);
        s[1] = obj_str(&a[1], &bad);
        s[2] = obj_str(&a[3], &bad);
        s[3] = obj_str(&a[4], &bad);
        if (!bad && s[0] && s[1] && s[2] && s[3] && obj_int(&a[2], &idx) == 0 &&
            obj_bytes(&a[5], &bytes, &len) == 0)
            rc = convo__checkpoint_add_write(cp, s[0], s[1], idx, s[2], s[3], bytes, len);
    }
    for (int i = 0; i < 4; i++)
        free(s[i]);
    msgpack_unpacked_destroy(&u);
    return rc;
}

/* The record's tail [parent, metadata, body type, body, log_length] and
 * created_at make the checkpoint; values and writes are added after. */
static convo_checkpoint *cp_from_tail(const char *thread_id, const char *ns, const char *id,
                                      const msgpack_object *t, int64_t created_at)
{
    int bad = 0;
    int64_t log_length;
    const char *body = NULL;
    size_t body_len = 0;
    char *parent = obj_str(&t[0], &bad), *meta = obj_str(&t[1], &bad);
    char *type = obj_str(&t[2], &bad);
    if (type && obj_bytes(&t[3], &body, &body_len) != 0)
        bad = 1;
    convo_checkpoint *cp = NULL;
    if (!bad && meta && obj_int(&t[4], &log_length) == 0)
        cp = convo__checkpoint_new(thread_id, ns, id, parent, meta, type, body, body_len,
                                   log_length, created_at);
    free(parent);
    free(meta);
    free(type);
    return cp;
}

/* A record: order, created_at, channel list, tail; all four must be there. */
static int record_unpack(const redisReply *rec, msgpack_unpacked *u, int64_t *created_at)
{
    size_t off = 0;
    int64_t order;
    if (rec->type != REDIS_REPLY_STRING)
        return -1;
    for (int i = 0; i < 4; i++)
        if (msgpack_unpack_next(&u[i], rec->str, rec->len, &off) != MSGPACK_UNPACK_SUCCESS)
            return -1;
    if (off != rec->len || obj_int(&u[0].data, &order) || obj_int(&u[1].data, created_at) ||
        u[2].data.type != MSGPACK_OBJECT_ARRAY || u[2].data.via.array.size % 2 ||
        u[3].data.type != MSGPACK_OBJECT_ARRAY || u[3].data.via.array.size != 5)
        return -1;
    return 0;
}

/* Builds the checkpoint from fetch()'s {field, record, values, writes}. */
static int cp_build(const char *thread_id, const redisReply *r, char *field,
                    convo_checkpoint **out)
{
    const redisReply *values = r->element[2], *writes = r->element[3];
    msgpack_unpacked u[4];
    for (int i = 0; i < 4; i++)
        msgpack_unpacked_init(&u[i]);
    int64_t created_at;
    convo_checkpoint *cp = NULL;
    int rc = record_unpack(r->element[1], u, &created_at) ? CONVO_ECORRUPT : 0;
    size_t nch = rc == 0 ? u[2].data.via.array.size / 2 : 0;
    if (rc == 0 && (values->type != REDIS_REPLY_ARRAY || values->elements != nch ||
                    writes->type != REDIS_REPLY_ARRAY))
        rc = CONVO_ECORRUPT;
    if (rc == 0 && !(cp = cp_from_tail(thread_id, field, field + strlen(field) + 1,
                                       u[3].data.via.array.ptr, created_at)))
        rc = CONVO_ECORRUPT;
    for (size_t i = 0; rc == 0 && i < nch; i++)
        rc = add_channel(cp, u[2].data.via.array.ptr, i, values->element[i]);
    for (size_t i = 0; rc == 0 && i < writes->elements; i++)
        if (writes->element[i]->type != REDIS_REPLY_NIL)
            rc = add_write(cp, writes->element[i]);
    for (int i = 0; i < 4; i++)
        msgpack_unpacked_destroy(&u[i]);
    if (rc != 0) {
        convo_checkpoint_free(cp);
        return rc;
    }
    convo__checkpoint_finish(cp);
    *out = cp;
    return 0;
}

static int cp_decode(const char *thread_id, const redisReply *r, convo_checkpoint **out,
                     convo_error *err)
{
    *out = NULL;
    const redisReply *f = r->type == REDIS_REPLY_ARRAY && r->elements == 4 ? r->element[0] : NULL;
    char *field = NULL;
    int rc = CONVO_ECORRUPT;
    /* "NS\0ID" as two C strings */
    if (f && f->type == REDIS_REPLY_STRING && memchr(f->str, '\0', f->len) &&
        (field = malloc(f->len + 1))) {
        memcpy(field, f->str, f->len);
        field[f->len] = '\0';
        rc = cp_build(thread_id, r, field, out);
    } else if (f && f->type == REDIS_REPLY_STRING) {
        rc = memchr(f->str, '\0', f->len) ? CONVO_ENOMEM : CONVO_ECORRUPT;
    }
    free(field);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "redis: a stored checkpoint could not be decoded");
    return rc ? oom(err) : 0;
}

static int cp_get_send(convo_backend *b, rconn *c, const thread_keys *tk, const char *thread_id,
                       const char *ns, const char *id, convo_checkpoint **out, convo_error *err)
{
    cmd call = {0};
    cmd_script_head(&call, tk);
    cmd_str(&call, ns);
    cmd_str(&call, id ? id : "");
    redisReply *r = NULL;
    int rc = pipeline_script(b, c, &call, 1, 0, S_CP_GET, &r, err);
    if (rc == 0)
        rc = r->type == REDIS_REPLY_ERROR ? reply_error(r, err) : cp_decode(thread_id, r, out, err);
    freeReplyObject(r);
    cmd_free(&call);
    return rc;
}

static int rd_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    thread_keys tk;
    if (keys_make(b, thread_id, &tk) != 0)
        return oom(err);
    rconn *c;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = cp_get_send(b, c, &tk, thread_id, ns, checkpoint_id, out, err);
        release(b, c);
    }
    free(tk.buf);
    return rc;
}

/* Adds the matching checkpoints of one list page; *full once limit is reached. */
static int list_take(const char *thread_id, const redisReply *r,
                     const convo_checkpoint_list_opts *o, void *filter,
                     convo_checkpoint_set *set, int *full, convo_error *err)
{
    int rc = 0;
    for (size_t i = 1; i < r->elements && rc == 0 && !*full; i++) {
        convo_checkpoint *cp;
        if ((rc = cp_decode(thread_id, r->element[i], &cp, err)) != 0)
            break;
        const char *meta = convo_checkpoint_metadata(cp);
        if (filter && !convo__json_contains(meta, strlen(meta), filter))
            convo_checkpoint_free(cp);
        else if (convo__checkpoint_set_add(set, cp) != 0)
            rc = oom(err);
        *full = o->limit && convo_checkpoint_set_count(set) >= o->limit;
    }
    return rc;
}

/* The checkpoints of one thread, newest first, a page (one script) at a time,
 * those put before `upper` (an ORDER in hex, "" = all): the filter is applied
 * here, so pages go on until limit matched. */
static int list_thread(convo_backend *b, rconn *c, const char *thread_id,
                       const convo_checkpoint_list_opts *o, void *filter, const char *upper,
                       convo_checkpoint_set *set, convo_error *err)
{
    thread_keys tk;
    if (keys_make(b, thread_id, &tk) != 0)
        return oom(err);
    char cursor[17];
    snprintf(cursor, sizeof cursor, "%s", upper);
    int rc = 0, full = o->limit && convo_checkpoint_set_count(set) >= o->limit;
    while (rc == 0 && !full) {
        size_t want = o->limit ? o->limit - convo_checkpoint_set_count(set) : 256;
        long long page = filter ? 64 : want < 16 ? 16 : want > 256 ? 256 : (long long)want;
        cmd call = {0};
        cmd_script_head(&call, &tk);
        cmd_str(&call, o->checkpoint_ns ? "1" : "0");
        cmd_str(&call, o->checkpoint_ns ? o->checkpoint_ns : "");
        cmd_str(&call, cursor);
        cmd_num(&call, page);
        redisReply *r = NULL;
        rc = pipeline_script(b, c, &call, 1, 0, S_CP_LIST, &r, err);
        cmd_free(&call);
        if (rc == 0 && r->type == REDIS_REPLY_ERROR)
            rc = reply_error(r, err);
        else if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
                             r->element[0]->type != REDIS_REPLY_STRING ||
                             r->element[0]->len >= sizeof cursor))
            rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a listing");
        if (rc == 0) {
            memcpy(cursor, r->element[0]->str, r->element[0]->len);
            cursor[r->element[0]->len] = '\0';
            rc = list_take(thread_id, r, o, filter, set, &full, err);
        }
        freeReplyObject(r);
        if (!cursor[0])
            break;
    }
    free(tk.buf);
    return rc;
}

/* The ORDER of checkpoint (before_thread_id, before_ns, before) as 16 hex
 * digits: the first object of its record. Listing takes what was put before. */
static int before_order(convo_backend *b, rconn *c, const convo_checkpoint_list_opts *o,
                        char upper[17], convo_error *err)
{
    /* the core fills both; the defaults it uses, should it not */
    const char *thread = o->before_thread_id ? o->before_thread_id : o->thread_id;
    const char *ns = o->before_ns ? o->before_ns : o->checkpoint_ns ? o->checkpoint_ns : "";
    thread_keys tk;
    if (!thread)
        return convo__error(err, CONVO_EINVAL, NULL, "before needs a thread id");
    if (keys_make(b, thread, &tk) != 0)
        return oom(err);
    size_t nlen = strlen(ns), ilen = strlen(o->before);
    char *field = malloc(nlen + ilen + 2);
    cmd q = {0};
    cmd_str(&q, "HGET");
    cmd_add(&q, tk.k[K_CP], tk.len[K_CP]);
    if (field) {
        memcpy(field, ns, nlen + 1); /* "NS\0ID" */
        memcpy(field + nlen + 1, o->before, ilen);
        cmd_add(&q, field, nlen + 1 + ilen);
    }
    redisReply *r = NULL;
    int rc = !field || q.failed ? oom(err) : pipeline(b, c, &q, 1, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR) {
        rc = reply_error(r, err);
    } else if (rc == 0 && r->type == REDIS_REPLY_NIL) {
        rc = convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint '%s' not found", o->before);
    } else if (rc == 0) {
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        size_t off = 0;
        int64_t order;
        if (r->type != REDIS_REPLY_STRING ||
            msgpack_unpack_next(&u, r->str, r->len, &off) != MSGPACK_UNPACK_SUCCESS ||
            obj_int(&u.data, &order) || order < 0)
            rc = convo__error(err, CONVO_ECORRUPT, NULL,
                              "redis: a stored checkpoint could not be decoded");
        else
            snprintf(upper, 17, "%016llx", (unsigned long long)order);
        msgpack_unpacked_destroy(&u);
    }
    freeReplyObject(r);
    cmd_free(&q);
    free(field);
    free(tk.buf);
    return rc;
}

/* Every thread of the index in byte order, newest checkpoints first in each;
 * entries of threads that are gone simply list nothing. */
static int list_all(convo_backend *b, rconn *c, const convo_checkpoint_list_opts *o,
                    void *filter, const char *upper, convo_checkpoint_set *set, convo_error *err)
{
    char *after = NULL;
    int rc = 0, done = 0;
    while (rc == 0 && !done && !(o->limit && convo_checkpoint_set_count(set) >= o->limit)) {
        redisReply *r;
        if ((rc = index_range(b, c, after, 100, &r, err)) != 0)
            break;
        done = r->elements < 100;
        for (size_t i = 0; i < r->elements && rc == 0; i++) {
            const redisReply *e = r->element[i];
            if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len))
                rc = convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread index entry");
            else if (!(o->limit && convo_checkpoint_set_count(set) >= o->limit))
                rc = list_thread(b, c, e->str, o, filter, upper, set, err);
        }
        free(after);
        after = rc == 0 && r->elements ? strdup(r->element[r->elements - 1]->str) : NULL;
        if (rc == 0 && r->elements && !after)
            rc = oom(err);
        freeReplyObject(r);
    }
    free(after);
    return rc;
}

static int rd_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o,
                              void *filter, convo_checkpoint_set **out, convo_error *err)
{
    convo_checkpoint_set *set = convo__checkpoint_set_new();
    if (!set)
        return oom(err);
    rconn *c;
    char upper[17] = "";
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        if (o->before)
            rc = before_order(b, c, o, upper, err);
        if (rc == 0)
            rc = o->thread_id ? list_thread(b, c, o->thread_id, o, filter, upper, set, err)
                              : list_all(b, c, o, filter, upper, set, err);
        release(b, c);
    }
    if (rc != 0) {
        convo_checkpoint_set_free(set);
        return rc;
    }
    *out = set;
    return 0;
}

static int rd_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                               convo_error *err)
{
    thread_keys tk;
    if (keys_make(b, thread_id, &tk) != 0)
        return oom(err);
    cmd call = {0};
    cmd_script_head(&call, &tk);
    cmd_num(&call, keep_last > (size_t)LLONG_MAX ? LLONG_MAX : (long long)keep_last);
    rconn *c;
    redisReply *r = NULL;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = pipeline_script(b, c, &call, 1, 0, S_CP_PRUNE, &r, err);
        release(b, c);
    }
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = reply_error(r, err);
    freeReplyObject(r);
    cmd_free(&call);
    free(tk.buf);
    return rc;
}

/* ---- layout 1 -> 2 (docs/redis.md, "Put order") ---- */

/* Runs the migration script on each thread of an index page, pipelined. It
 * is idempotent, so on NOSCRIPT the whole page is sent again with EVAL. */
static int migrate_page(convo_backend *b, rconn *c, const redisReply *ids, convo_error *err)
{
    size_t n = ids->elements;
    if (n == 0)
        return 0;
    thread_keys *tk = calloc(n, sizeof *tk);
    cmd *cmds = calloc(n, sizeof *cmds);
    redisReply **r = calloc(n, sizeof *r);
    int rc = tk && cmds && r ? 0 : oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const redisReply *e = ids->element[i];
        if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len))
            rc = convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread index entry");
        else if (keys_make(b, e->str, &tk[i]) != 0)
            rc = oom(err);
        else
            cmd_cp_head(&cmds[i], b, &tk[i]);
        if (rc == 0 && cmds[i].failed)
            rc = oom(err);
    }
    for (int eval = 0; rc == 0 && eval < 2; eval++) {
        for (size_t i = 0; i < n; i++) {
            cmds[i].argv[0] = eval ? "EVAL" : "EVALSHA";
            cmds[i].lens[0] = eval ? 4 : 7;
            cmds[i].argv[1] = eval ? scripts[S_CP_MIGRATE] : b->sha[S_CP_MIGRATE];
            cmds[i].lens[1] = strlen(cmds[i].argv[1]);
        }
        if ((rc = pipeline(b, c, cmds, n, r, err)) != 0)
            break;
        int lost = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            lost |= is_noscript(r[i]);
            if (r[i]->type == REDIS_REPLY_ERROR && !is_noscript(r[i]))
                rc = reply_error(r[i], err);
        }
        replies_free(r, n);
        if (!lost)
            break;
    }
    for (size_t i = 0; tk && cmds && i < n; i++) {
        free(tk[i].buf);
        cmd_free(&cmds[i]);
    }
    free(tk);
    free(cmds);
    free(r);
    return rc;
}

/* HGET P:store v, or (with value) HSET P:store v value; *is2 = it said "2". */
static int store_version(convo_backend *b, rconn *c, const char *value, int *is2,
                         convo_error *err)
{
    cmd q = {0};
    redisReply *r = NULL;
    cmd_str(&q, value ? "HSET" : "HGET");
    cmd_str(&q, b->store_key);
    cmd_add(&q, "v", 1);
    if (value)
        cmd_str(&q, value);
    int rc = q.failed ? oom(err) : pipeline(b, c, &q, 1, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = reply_error(r, err);
    if (rc == 0 && is2)
        *is2 = r->type == REDIS_REPLY_STRING && r->len == 1 && r->str[0] == '2';
    freeReplyObject(r);
    cmd_free(&q);
    return rc;
}

/* Stores of layout 1 numbered checkpoints per thread; layout 2 orders them
 * store-wide. P:store's v = 2 says every thread is migrated; until then each
 * open migrates the threads of the index, 100 per round trip, then sets it.
 * A thread written meanwhile (or not in the index) is migrated by its next
 * checkpoint write: every script that writes a checkpoint migrates first. */
static int layout_migrate(convo_backend *b, rconn *c, convo_error *err)
{
    convo_error mine = {0};
    int done = 0, rc = store_version(b, c, NULL, &done, &mine);
    char *after = NULL;
    while (rc == 0 && !done) {
        redisReply *r;
        if ((rc = index_range(b, c, after, 100, &r, &mine)) != 0)
            break;
        rc = migrate_page(b, c, r, &mine);
        done = r->elements < 100;
        free(after);
        after = rc == 0 && !done ? strdup(r->element[r->elements - 1]->str) : NULL;
        if (rc == 0 && !done && !after)
            rc = oom(&mine);
        freeReplyObject(r);
        if (rc == 0 && done)
            rc = store_version(b, c, "2", NULL, &mine);
    }
    free(after);
    /* ?wait=N with too few replicas: written on the master, and a later open
     * migrates again (it changes nothing twice); the store works meanwhile */
    if (rc == CONVO_ETIMEOUT && strcmp(mine.backend_code, "WAIT") == 0)
        return 0;
    if (rc != 0 && err)
        *err = mine;
    return rc;
}

/* ---- measuring (convo bench) ---- */

static double now_seconds(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* The raw primitive: one RPUSH round trip per message, on a scratch key. */
static int bench_run(convo_backend *b, rconn *c, const char *payload, size_t len, size_t n,
                     double *seconds, convo_error *err)
{
    char key[MAX_PREFIX_BYTES + 64];
    snprintf(key, sizeof key, "%s:bench:{%llu-%p}", b->prefix,
             (unsigned long long)convo__now_micros(), (void *)c);
    cmd push = {0}, del = {0};
    cmd_str(&push, "RPUSH");
    cmd_str(&push, key);
    cmd_add(&push, payload, len);
    cmd_str(&del, "DEL");
    cmd_str(&del, key);
    int rc = 0;
    double t0 = now_seconds();
    for (size_t i = 0; i < n && rc == 0; i++) {
        redisReply *r = NULL;
        rc = pipeline(b, c, &push, 1, &r, err);
        if (rc == 0 && r->type == REDIS_REPLY_ERROR)
            rc = reply_error(r, err);
        freeReplyObject(r);
    }
    *seconds = now_seconds() - t0;
    redisReply *r = NULL;
    if (rc == 0 && (rc = pipeline(b, c, &del, 1, &r, err)) == 0)
        freeReplyObject(r);
    cmd_free(&push);
    cmd_free(&del);
    return rc;
}

static int rd_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                        double *seconds, convo_error *err)
{
    rconn *c;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = bench_run(b, c, payload, payload_len, n, seconds, err);
        release(b, c);
    }
    return rc;
}

/* MEMORY USAGE of every key of one SCAN batch, in one round trip. */
static int usage_batch(convo_backend *b, rconn *c, const redisReply *keys, void *ctx,
                       convo_error *err)
{
    int64_t *total = ctx;
    size_t n = keys->elements;
    cmd *cmds = calloc(n, sizeof *cmds);
    redisReply **replies = calloc(n, sizeof *replies);
    int rc = cmds && replies ? 0 : oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        cmd_str(&cmds[i], "MEMORY");
        cmd_str(&cmds[i], "USAGE");
        cmd_add(&cmds[i], keys->element[i]->str, keys->element[i]->len);
        cmd_str(&cmds[i], "SAMPLES"); /* 0: every element, not an estimate from 5 */
        cmd_str(&cmds[i], "0");
    }
    if (rc == 0)
        rc = pipeline(b, c, cmds, n, replies, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (replies[i]->type == REDIS_REPLY_INTEGER)
            *total += replies[i]->integer;
    for (size_t i = 0; cmds && i < n; i++)
        cmd_free(&cmds[i]);
    if (replies)
        replies_free(replies, n);
    free(cmds);
    free(replies);
    return rc;
}

/* Memory of this store's keys (every key under the prefix, the index
 * included), by MEMORY USAGE: this store's data, not the server's. */
static int rd_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    rconn *c;
    *bytes = 0;
    int rc = acquire(b, &c, err);
    if (rc == 0) {
        rc = scan_each(b, c, ":*", usage_batch, bytes, err);
        release(b, c);
    }
    return rc;
}

static const char *const rd_schemes[] = {"redis", "redis+unix", "rediss", "redis+cluster", NULL};

const convo_driver convo_driver_redis = {
    .version = CONVO_DRIVER_VERSION,
    .name = "redis",
    .schemes = rd_schemes,
    .open = rd_open,
    .close = rd_close,
    .append = rd_append,
    .load = rd_load,
    .save_extra = rd_save_extra,
    .thread_delete = rd_thread_delete,
    .thread_list = rd_thread_list,
    .thread_fork = rd_thread_fork,
    .checkpoint_put = rd_checkpoint_put,
    .checkpoint_put_writes = rd_checkpoint_put_writes,
    .checkpoint_get = rd_checkpoint_get,
    .checkpoint_list = rd_checkpoint_list,
    .checkpoint_prune = rd_checkpoint_prune,
    .bench_raw = rd_bench_raw,
    .stored_bytes = rd_stored_bytes,
    .thread_import = rd_thread_import,
    .sweep = rd_sweep,
    .checkpoint_put_log = rd_checkpoint_put_log,
};
