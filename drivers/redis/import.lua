-- import.lua (after prelude.lua): restores messages [first, first + n) of a
-- dump: whole records (created_at included) from the client. ARGV: ttl ms,
-- first seq, records. Returns 1 when the thread already holds them (the same
-- dump imported again), else 0.
local ttl, first = tonumber(ARGV[1]), tonumber(ARGV[2])
local len = redis.call('LLEN', MSGS)
if len >= first + #ARGV - 2 then return 1 end
if len ~= first then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len ..
                           ' messages, the dump continues at ' .. first)
end
chunked('RPUSH', MSGS, ARGV, 3, #ARGV)
redis.call('HSETNX', META, 'v', '2')
expire_all(ttl)
return 0
