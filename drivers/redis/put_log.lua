-- put_log.lua: a checkpoint put with messages (convo_checkpoint_in version 2),
-- after prelude.lua, index.lua, cp_prelude.lua and checkpoint.lua. One script, so the
-- messages and the checkpoint are stored together or not at all. Everything is
-- checked before the first write.
-- ARGV: may create ('1'/'0'), ttl ms, expected length, expected generation
-- (-1 = none), message count n, ns, id, created_at, order hint, log_length,
-- channel list, record tail, then the n message records (as the append script
-- gets them), then value field/value pairs.
-- Returns the checkpoint's order, or CONVO_CREATE / CONVO_MIGRATE.
local create, ttl = ARGV[1] == '1', tonumber(ARGV[2])
local expect, gen, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local len = redis.call('LLEN', MSGS)
if len ~= expect then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len ..
                           ' messages, expected ' .. expect)
end
local m = redis.call('HMGET', META, 'v', 'g')
local g = tonumber(m[2]) or 0
if gen >= 0 and g ~= gen then
  return redis.error_reply('CONVO_CONFLICT thread is at generation ' .. g ..
                           ', expected ' .. ARGV[4])
end
if not m[1] and not create then return redis.status_reply('CONVO_CREATE') end
if needs_migration(m[1]) then return redis.status_reply('CONVO_MIGRATE') end
-- Redis keeps what a script wrote before an error: a stored record of this key
-- that put_checkpoint cannot decode fails here, before the messages go in
local old = redis.call('HGET', CP, ARGV[6] .. '\0' .. ARGV[7])
if old then cmsgpack.unpack_one(old, (cmsgpack.unpack_one(old))) end
mark_layout(m[1])
local st = ix_begin(false)
chunked('RPUSH', MSGS, ARGV, 13, 12 + n)
local order = put_checkpoint(ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[10]), ARGV[11],
                             ARGV[12], 13 + n, tonumber(ARGV[9]))
ix_end(st)
expire_all(ttl)
return order
