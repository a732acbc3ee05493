-- rewrite_quick.lua: the common tail rewrite (a pop, the last answer again) in
-- a script with nothing else in it (no prelude, no index.lua: every
-- definition, key, argument, redis.call and number conversion a script makes
-- costs the server time on each call; docs/redis.md, "The quick script"): a
-- thread of layout 4 (created_at) without a deadline, in a store without ttl
-- (and on one server without declared keys), no idempotency key, no
-- checkpoint dropped. Anything else, or checkpoints past keep or not indexed
-- by log length, answers CONVO_SLOW having written nothing, and the client
-- sends the call as rewrite.lua, which decides those cases (its checks and
-- writes, in its order, are these).
-- KEYS: msgs, meta (one server: cp and cpidx are named from meta's key when
-- the thread has checkpoints; the same slot), or msgs, meta, cp, cpidx (a
-- cluster). ARGV: now (the client's clock, µs); 'p' (one server inside the
-- activity window), "P:ix:r\0ID" (one server outside it) or '' (a cluster);
-- keep, or '-' for the expected length − 1 (a pop of the last message: no
-- number to convert); expected length (-1 = none); expected generation (-1 =
-- none); then the new message records.
-- Returns the new generation as text when an expected length was given
-- (removed is that length - keep), else {removed, generation}: first_seq is
-- keep, count the records sent (converting a table reply costs the server
-- about a redis.call, a number next to nothing).
local m = redis.call('HMGET', KEYS[2], 'g', 'v', 'co')
if m[2] ~= '4' or redis.call('PTTL', KEYS[2]) ~= -1 then
  return redis.status_reply('CONVO_SLOW') -- missing, another layout, a deadline
end
-- the generation stays text (a stored g and ARGV[5] are both decimal): a
-- tonumber() costs a strtod, a number written back a '%.14g'
local g, len = m[1] or '0', redis.call('LLEN', KEYS[1])
if (ARGV[4] ~= '-1' and tonumber(ARGV[4]) ~= len) or (ARGV[5] ~= '-1' and ARGV[5] ~= g) then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len .. ' messages at generation ' ..
                           g .. ': not the expected tail')
end
local keep, n = ARGV[3] == '-' and len - 1 or tonumber(ARGV[3]), #ARGV - 5
if keep > len then
  return redis.error_reply('CONVO_INVAL keep ' .. ARGV[3] .. ' is past the ' .. len ..
                           ' messages')
end
-- co, the last put order a checkpoint got, is set by every write of a
-- checkpoint record (checkpoint.lua): without it the thread never had one
if m[3] then
  local base = string.sub(KEYS[2], 1, -5)
  local cp, cpidx = KEYS[3] or base .. 'cp', KEYS[4] or base .. 'cpidx'
  local ncp = redis.call('HLEN', cp)
  if ncp > 0 and
      (ncp ~= redis.call('ZLEXCOUNT', cpidx, '[l\0', '(l\1') or
       #redis.call('ZRANGEBYLEX', cpidx, string.format('[l\0%016x\0', keep + 1), '(l\1',
                   'LIMIT', 0, 1) > 0) then
    return redis.status_reply('CONVO_SLOW')
  end
end
local first = 6
if keep == len - 1 and n > 0 then -- the last answer again: one LSET
  redis.call('LSET', KEYS[1], -1, ARGV[6])
  first = 7
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
-- g + 1 as text: the last digit raised when it is not a 9 (two short
-- strings, no strtod and no '%.14g'); an integer below 2^53 else
local d = string.byte(g, -1)
g = d >= 48 and d < 57 and string.sub(g, 1, -2) .. string.char(d + 1) or string.format('%.0f', g + 1)
-- the activity time (docs/redis.md, "The activity window"): on one server
-- (a store without declared keys: no value's :r set to move) inside the
-- window the store remembers ('p', layout 7) in p, which updated_at takes
-- when later, the index left alone; else u and (one server) the thread's
-- P:ix:r score; on a cluster the client writes the index after. p and u are
-- meta's on a cluster, the extra hash's on one server (layout 8)
if ARGV[2] == '' then
  redis.call('HSET', KEYS[2], 'g', g, 'u', ARGV[1])
else
  redis.call('HSET', KEYS[2], 'g', g)
  redis.call('HSET', string.sub(KEYS[2], 1, -5) .. 'extra', ARGV[2] == 'p' and 'p' or 'u',
             ARGV[1])
end
if ARGV[2] ~= '' and ARGV[2] ~= 'p' then
  local z = string.find(ARGV[2], '\0', 1, true)
  if z then
    redis.call('ZADD', string.sub(ARGV[2], 1, z - 1), ARGV[1], string.sub(ARGV[2], z + 1))
  end
end
if ARGV[4] ~= '-1' then return g end
return {len - keep, tonumber(g)}
