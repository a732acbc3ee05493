-- append_fast.lua: the common append (a thread this store wrote lately; no
-- idempotency key, expected length or generation; no ttl): the records pushed,
-- updated_at and, on one server, the activity order (P:ix:r and the sets of
-- the thread's declared values, index.lua) in one script with nothing else in
-- it: every definition a script holds costs the server time on each call, and
-- index.lua's cost this path more than its writes. No prelude.
-- KEYS: msgs, idem, meta, extra. ARGV: now (the client's clock, µs), the index
-- prefix "P:ix:" ('' on a cluster: the client writes the index), the thread id,
-- n, the n declared fields, then the records.
-- Returns first_seq, or CONVO_CREATE having written nothing: no message list,
-- a deadline (left by a store with ttl), or no updated_at (a thread of an older
-- layout): the client then runs append.lua, which handles each.
if redis.call('PTTL', KEYS[1]) ~= -1 then return redis.status_reply('CONVO_CREATE') end
local now, p, id, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if redis.call('HSET', KEYS[3], 'u', now) == 1 then
  redis.call('HDEL', KEYS[3], 'u')
  return redis.status_reply('CONVO_CREATE')
end
local len
for i = 5 + n, #ARGV, 1000 do
  len = redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if p ~= '' then
  redis.call('ZADD', p .. 'r', now, id)
  if n > 0 then
    local got = redis.call('HMGET', KEYS[4], unpack(ARGV, 5, 4 + n))
    for i = 1, n do
      -- ix_kv of index.lua: the value's JSON text after "ORD ", numbers as %.17g
      local sp = got[i] and string.find(got[i], ' ', 1, true)
      local v = sp and string.sub(got[i], sp + 1)
      local c = v and string.byte(v, 1)
      if c and c ~= 123 and c ~= 91 then
        if c == 45 or (c >= 48 and c <= 57) then
          local x = tonumber(v)
          if x == 0 then x = 0 end
          v = x and string.format('%.17g', x)
        end
        if v and #v > 200 then v = string.sub(v, 1, 200) .. '\n' end
        if v then redis.call('ZADD', p .. '{' .. ARGV[4 + i] .. v .. '}:r', now, id) end
      end
    end
  end
end
return len - (#ARGV - 4 - n)
