-- put_log.lua: a checkpoint put with messages (convo_checkpoint_in version 2),
-- after prelude.lua, cp_prelude.lua and checkpoint.lua. One script, so the
-- messages and the checkpoint are stored together or not at all. Everything is
-- checked before the first write.
-- ARGV: may create ('1'/'0'), ttl ms, expected length, message count n, ns, id,
-- created_at, order hint, channel list, record tail, then the n message
-- records (as the append script gets them), then value field/value pairs.
-- Returns the checkpoint's order.
local create, ttl = ARGV[1] == '1', tonumber(ARGV[2])
local expect, n = tonumber(ARGV[3]), tonumber(ARGV[4])
local len = redis.call('LLEN', MSGS)
if len ~= expect then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len ..
                           ' messages, expected ' .. expect)
end
if redis.call('EXISTS', META) == 0 then
  if not create then return redis.status_reply('CONVO_CREATE') end
  redis.call('HSET', META, 'v', '2')
end
migrate()
-- Redis keeps what a script wrote before an error: a stored record of this key
-- that put_checkpoint cannot decode fails here, before the messages go in
local old = redis.call('HGET', CP, ARGV[5] .. '\0' .. ARGV[6])
if old then cmsgpack.unpack_one(old, (cmsgpack.unpack_one(old))) end
chunked('RPUSH', MSGS, ARGV, 11, 10 + n)
local order = put_checkpoint(ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[9], ARGV[10],
                             11 + n, tonumber(ARGV[8]))
expire_all(ttl)
return order
