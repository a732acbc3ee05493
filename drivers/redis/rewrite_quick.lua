-- rewrite_quick.lua: the common tail rewrite (a pop, the last answer again) in
-- a script with nothing else in it (no prelude, no index.lua: every
-- definition, key and argument a script gets costs the server time on each
-- call): a thread of layout 4 (v 4 and created_at) without a deadline, in a
-- store without ttl (and on one server without declared keys), no idempotency
-- key, no checkpoint dropped. Anything else,
-- or checkpoints past keep or not indexed by log length, answers CONVO_SLOW
-- having written nothing, and the client sends the call as rewrite.lua, which
-- decides those cases (its checks and writes, in its order, are these).
-- KEYS: msgs, meta, cp, cpidx. ARGV: now (the client's clock, µs), P:ix:r (one
-- server; '' on a cluster), the thread id, keep, expected length (-1 = none),
-- expected generation (-1 = none), then the new message records.
-- Returns as rewrite.lua: {0, first_seq, count, removed, generation}.
local now, ixr, id = ARGV[1], ARGV[2], ARGV[3]
local keep, expect, gen = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local m = redis.call('HMGET', KEYS[2], 'v', 'g', 'c', 'co')
if not m[1] then return redis.error_reply('CONVO_NOTFOUND thread not found') end
if m[1] ~= '4' or not m[3] or redis.call('PTTL', KEYS[2]) ~= -1 then
  return redis.status_reply('CONVO_SLOW')
end
local g = tonumber(m[2]) or 0
local len = redis.call('LLEN', KEYS[1])
if (expect >= 0 and expect ~= len) or (gen >= 0 and gen ~= g) then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len .. ' messages at generation ' ..
                           g .. ': not the expected tail')
end
if keep > len then
  return redis.error_reply('CONVO_INVAL keep ' .. ARGV[4] .. ' is past the ' .. len ..
                           ' messages')
end
-- co, the last put order a checkpoint got, is set by every write of a
-- checkpoint record (checkpoint.lua): without it the thread never had one
local ncp = m[4] and redis.call('HLEN', KEYS[3]) or 0
if ncp > 0 and (ncp ~= redis.call('ZLEXCOUNT', KEYS[4], '[l\0', '(l\1') or
                #redis.call('ZRANGEBYLEX', KEYS[4], string.format('[l\0%016x\0', keep + 1),
                            '(l\1', 'LIMIT', 0, 1) > 0) then
  return redis.status_reply('CONVO_SLOW')
end
local n, first = #ARGV - 6, 7
if keep == len - 1 and n > 0 then -- the last answer again: one LSET
  redis.call('LSET', KEYS[1], -1, ARGV[7])
  first = 8
elseif keep == len - 1 then -- a pop
  redis.call('RPOP', KEYS[1])
elseif keep == 0 then
  redis.call('DEL', KEYS[1])
elseif keep < len then
  redis.call('LTRIM', KEYS[1], 0, keep - 1)
end
for i = first, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
-- the activity time in meta; on one server (a store without declared keys:
-- no value's :r set to move) its P:ix:r score too, on a cluster the client
-- writes the index after
redis.call('HSET', KEYS[2], 'g', string.format('%d', g + 1), 'u', now)
if ixr ~= '' then redis.call('ZADD', ixr, now, id) end
return {0, keep, n, len - keep, g + 1}
