-- fork.lua (after prelude.lua, index.lua): creates the destination of a fork from what
-- was read off the source. ARGV: ttl ms, record count n, xb, xc, xn, the
-- source's generation, n records, extra field/value pairs.
if redis.call('EXISTS', META) == 1 then
  return redis.error_reply('CONVO_CONFLICT destination thread already exists')
end
local ttl, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local st = ix_begin(false)
chunked('RPUSH', MSGS, ARGV, 7, 6 + n)
chunked('HSET', EXTRA, ARGV, 7 + n, #ARGV)
redis.call('HSET', META, 'xb', ARGV[3], 'xc', ARGV[4], 'xn', ARGV[5])
if ARGV[6] ~= '0' then redis.call('HSET', META, 'g', ARGV[6]) end
ix_end(st)
expire_all(ttl)
return 1
