-- append_fast.lua: the common append on a cluster (a thread this store wrote
-- lately; no idempotency key, expected length or generation; no ttl): the
-- records pushed and updated_at in one script with nothing else in it (every
-- definition a script holds costs the server time on each call); the client
-- writes the index after it. (One server needs no script for it: threads.c.)
-- No prelude. KEYS: msgs, idem, meta, extra. ARGV: now (the client's clock,
-- µs), then the records.
-- Returns first_seq, or CONVO_CREATE having written nothing: no message list,
-- a deadline (left by a store with ttl), or no updated_at (a thread of an older
-- layout): the client then runs append.lua, which handles each.
if redis.call('PTTL', KEYS[1]) ~= -1 then return redis.status_reply('CONVO_CREATE') end
if redis.call('HSET', KEYS[3], 'u', ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[3], 'u')
  return redis.status_reply('CONVO_CREATE')
end
local len
for i = 2, #ARGV, 1000 do
  len = redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return len - (#ARGV - 1)
