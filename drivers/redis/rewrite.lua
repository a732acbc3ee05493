-- rewrite.lua: the tail rewrite (convo_replace_tail) in one script: everything
-- is read and checked before the first write (Redis keeps what a script wrote
-- before an error), in the order of include/convo/driver.h (docs/redis.md,
-- "The tail rewrite"). It follows prelude.lua, index.lua and one of two definitions of
-- past_keep(beyond, keep, drop), for the checkpoints past keep ("l" members):
-- rewrite_fast.lua (the script for a tail no checkpoint refers to, without
-- the checkpoint code, which costs the server time on every call) or
-- rewrite_cp.lua (after cp_prelude.lua). past_keep answers a reply (nothing
-- written), or nil and the function that drops them.
-- ARGV: ttl ms, keep, expected length (-1 = none), expected generation (-1 =
-- none), idempotency key ('' = none), drop checkpoints ('1'/'0'), then the new
-- message records, packed by the client as for an append.
-- Returns {replayed, first_seq, count, removed, generation}, or CONVO_MIGRATE
-- (a thread whose checkpoints are not indexed by log length yet), or (the
-- fast script) CONVO_CHECKPOINTS.
local ttl, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
local expect, gen, key, drop = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6] == '1'
-- every redis.call costs about as much as a short command: the hot path (no
-- checkpoint, the last answer replaced) makes six
local m = redis.call('HMGET', META, 'v', 'g')
if not m[1] then return redis.error_reply('CONVO_NOTFOUND thread not found') end
local g = tonumber(m[2]) or 0
if key ~= '' then
  local prior = redis.call('HGET', IDEM, key)
  if prior then
    local first, n = string.match(prior, '^(%d+) (%d+)$')
    if not first then return redis.error_reply('CONVO_CORRUPT bad idempotency record') end
    return {1, tonumber(first), tonumber(n), 0, g}
  end
end
local len = redis.call('LLEN', MSGS)
if (expect >= 0 and expect ~= len) or (gen >= 0 and gen ~= g) then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len .. ' messages at generation ' ..
                           g .. ': not the expected tail')
end
if keep > len then
  return redis.error_reply('CONVO_INVAL keep ' .. ARGV[2] .. ' is past the ' .. len ..
                           ' messages')
end
local ncp = redis.call('HLEN', CP)
if ncp > 0 and ((m[1] ~= '3' and m[1] ~= '4') or ncp ~= redis.call('ZLEXCOUNT', CPIDX, '[l\0', '(l\1')) then
  return redis.status_reply('CONVO_MIGRATE') -- see needs_migration (cp_prelude.lua)
end

-- the checkpoints that refer to messages past keep: log_length > keep
local beyond = ncp == 0 and {} or
               redis.call('ZRANGEBYLEX', CPIDX, string.format('[l\0%016x\0', keep + 1), '(l\1')
local drop_them
if #beyond > 0 then
  local reply
  reply, drop_them = past_keep(beyond, keep, drop)
  if reply then return reply end
  drop_them()
end
if m[1] ~= '3' and m[1] ~= '4' then redis.call('HSET', META, 'v', '3') end
local st = ix_begin(false)
local n, first = #ARGV - 6, 7
if keep == len - 1 and n > 0 then -- the last answer again: one LSET
  redis.call('LSET', MSGS, -1, ARGV[7])
  first = 8
elseif keep == 0 then
  redis.call('DEL', MSGS)
elseif keep < len then
  redis.call('LTRIM', MSGS, 0, keep - 1)
end
chunked('RPUSH', MSGS, ARGV, first, #ARGV)
redis.call('HSET', META, 'g', string.format('%d', g + 1))
if key ~= '' then redis.call('HSET', IDEM, key, string.format('%d %d', keep, n)) end
ix_end(st)
expire_all(ttl)
return {0, keep, n, len - keep, g + 1}
