-- rewrite_quick.lua: the common tail rewrite (a pop, the last answer again) in
-- a script with nothing else in it (no prelude, no index.lua: every
-- definition, key, argument, redis.call and number conversion a script makes
-- costs the server time on each call; docs/redis.md, "The quick script"): a
-- thread of layout 4 (v 4 and created_at) without a deadline, in a store
-- without ttl (and on one server without declared keys), no idempotency key,
-- no checkpoint dropped. Anything else, or checkpoints past keep or not
-- indexed by log length, answers CONVO_SLOW having written nothing, and the
-- client sends the call as rewrite.lua, which decides those cases (its checks
-- and writes, in its order, are these).
-- KEYS: msgs, meta, cp, cpidx. ARGV: now (the client's clock, µs), P:ix:r
-- (one server; 'p' inside the window, '' on a cluster), the thread id, keep,
-- expected length (-1 = none), expected generation (-1 = none), then the new
-- message records.
-- Returns the new generation when an expected length was given (removed is
-- that length - keep), else {removed, generation}: first_seq is keep, count
-- the records sent (converting a table reply costs the server about a
-- redis.call, a number next to nothing).
local m = redis.call('HMGET', KEYS[2], 'v', 'g', 'c', 'co')
if m[1] ~= '4' or not m[3] or redis.call('PTTL', KEYS[2]) ~= -1 then
  if not m[1] then return redis.error_reply('CONVO_NOTFOUND thread not found') end
  return redis.status_reply('CONVO_SLOW')
end
-- the generation stays text (a stored g and ARGV[6] are both decimal):
-- tonumber() costs a strtod
local g, len = m[2] or '0', redis.call('LLEN', KEYS[1])
if (ARGV[5] ~= '-1' and tonumber(ARGV[5]) ~= len) or (ARGV[6] ~= '-1' and ARGV[6] ~= g) then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len .. ' messages at generation ' ..
                           g .. ': not the expected tail')
end
local keep, n = tonumber(ARGV[4]), #ARGV - 6
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
local first = 7
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
-- the activity time (docs/redis.md, "The activity window"): on one server
-- (a store without declared keys: no value's :r set to move) inside the
-- window the store remembers (ARGV[2] 'p', layout 7) in meta's p, which
-- updated_at takes when later, the index left alone; else meta's u and (one
-- server) the thread's P:ix:r score; on a cluster the client writes the
-- index after
g = g + 1 -- an integer below 2^53: a Lua number passed to HSET is '%.14g'
if ARGV[2] == 'p' then
  redis.call('HSET', KEYS[2], 'g', g, 'p', ARGV[1])
else
  redis.call('HSET', KEYS[2], 'g', g, 'u', ARGV[1])
  if ARGV[2] ~= '' then redis.call('ZADD', ARGV[2], ARGV[1], ARGV[3]) end
end
if ARGV[5] ~= '-1' then return g end
return {len - keep, g}
