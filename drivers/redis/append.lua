-- append.lua (after index.lua): the hot path, so no prelude and nothing the
-- client can do instead: the client packs whole records [created_at, role,
-- bytes], the script pushes them as they came (a Lua string built here would
-- cost more than the push), and keeps updated_at and the index (index.lua).
-- KEYS: msgs, idem, meta and extra, or all eight (with leave to create or a ttl).
-- ARGV: may create ('1'/'0'), idempotency key ('' = none), expected length
-- (-1 = none), ttl ms, expected generation (-1 = none; meta's g, a missing
-- field or thread being 0), then the records. Without leave to create, a thread
-- with no message list (new, or no message yet) or, for a store without
-- ttl, one with a deadline answers CONVO_CREATE and writes nothing: the
-- client then runs it again with every key, inside the index protocol.
-- Returns first_seq, or {first_seq, count} for a replay.
local create, key = ARGV[1] == '1', ARGV[2]
local expect, ttl, gen = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
-- only reading TIME needs effects replication (Redis 4)
if ttl > 0 and redis.replicate_commands then redis.replicate_commands() end
if key ~= '' then
  local prior = redis.call('HGET', KEYS[2], key)
  if prior then
    local first, n = string.match(prior, '^(%d+) (%d+)$')
    if not first then return redis.error_reply('CONVO_CORRUPT bad idempotency record') end
    return {tonumber(first), tonumber(n)}
  end
end
if expect >= 0 then
  local len = redis.call('LLEN', KEYS[1])
  if expect ~= len then
    return redis.error_reply('CONVO_CONFLICT thread has ' .. len ..
                             ' messages, expected ' .. expect)
  end
end
if gen >= 0 then
  local g = tonumber(redis.call('HGET', KEYS[3], 'g')) or 0
  if g ~= gen then
    return redis.error_reply('CONVO_CONFLICT thread is at generation ' .. g ..
                             ', expected ' .. ARGV[5])
  end
end
if not create then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl == -2 or (ttl == 0 and pttl ~= -1) then
    return redis.status_reply('CONVO_CREATE')
  end
end
local st = ix_begin(false)
local len
for i = 6, #ARGV, 1000 do
  len = redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local n = #ARGV - 5
local first = len - n
ix_end(st)
if key ~= '' then redis.call('HSET', KEYS[2], key, first .. ' ' .. n) end
if ttl > 0 then
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
  for i = 1, #KEYS do redis.call('PEXPIREAT', KEYS[i], at) end
elseif create and redis.call('PTTL', KEYS[3]) > 0 then
  for i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end
end
return first
