-- import.lua (after prelude.lua, index.lua): restores messages [first, first + n) of a
-- dump: whole records (created_at included) from the client. ARGV: ttl ms,
-- first seq, the dumped thread's generation, records. A thread without
-- messages takes the generation when first is 0; any other must have it
-- (checked first: a tail rewritten since an earlier import is never mixed with
-- the dump's). Returns 1 when the thread already holds them (the same dump
-- imported again), else 0.
local ttl, first, gen = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local len = redis.call('LLEN', MSGS)
local g = redis.call('HGET', META, 'g') or '0'
if not (len == 0 and first == 0) and g ~= gen then
  return redis.error_reply('CONVO_CONFLICT thread is at generation ' .. g .. ', the dump at ' ..
                           gen .. ': its tail was rewritten since it was imported')
end
if len >= first + #ARGV - 3 then return 1 end
if len ~= first then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len ..
                           ' messages, the dump continues at ' .. first)
end
local st = ix_begin(false)
chunked('RPUSH', MSGS, ARGV, 4, #ARGV)
if g ~= gen then redis.call('HSET', META, 'g', gen) end
ix_end(st)
expire_all(ttl)
return 0
