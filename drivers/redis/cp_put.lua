-- cp_put.lua (after prelude.lua, cp_prelude.lua, checkpoint.lua): a checkpoint put.
-- ARGV: may create, ttl ms, ns, id, created_at (the client's clock, as for
-- messages), order hint, channel list, tail, then value field/value pairs
-- ("NS\0CHANNEL\0VERSION" -> msgpack [type, bytes]). KEYS: the thread's eight,
-- and P:store on one server. Returns the checkpoint's order.
if redis.call('EXISTS', META) == 0 then
  if ARGV[1] ~= '1' then return redis.status_reply('CONVO_CREATE') end
  redis.call('HSET', META, 'v', '2')
end
migrate()
local order = put_checkpoint(ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[7], ARGV[8], 9,
                             tonumber(ARGV[6]))
expire_all(tonumber(ARGV[2]))
return order
