-- cp_put.lua (after prelude.lua, index.lua, cp_prelude.lua, checkpoint.lua): a checkpoint put.
-- ARGV: may create, ttl ms, ns, id, created_at (the client's clock, as for
-- messages), order hint, log_length, channel list, tail, then value
-- field/value pairs ("NS\0CHANNEL\0VERSION" -> msgpack [type, bytes]). KEYS:
-- the thread's eight, and P:store on one server. Returns the checkpoint's
-- order, or CONVO_CREATE / CONVO_MIGRATE (nothing written).
local v = redis.call('HGET', META, 'v')
if not v and ARGV[1] ~= '1' then return redis.status_reply('CONVO_CREATE') end
if needs_migration(v) then return redis.status_reply('CONVO_MIGRATE') end
mark_layout(v)
local st = ix_begin(false)
local order = put_checkpoint(ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[7]), ARGV[8],
                             ARGV[9], 10, tonumber(ARGV[6]))
ix_end(st)
expire_all(tonumber(ARGV[2]))
return order
