-- cp_writes.lua (after prelude.lua, cp_prelude.lua): pending writes.
-- ARGV: ttl ms, "NS\0ID", then (mode, field, value) triples: field
-- "NS\0ID\0TASK\0IDX"; mode 'r' replaces (idx < 0), 'k' keeps the first.
if redis.call('HEXISTS', CP, ARGV[2]) == 0 then
  return redis.error_reply('CONVO_NOTFOUND checkpoint not found')
end
for i = 3, #ARGV, 3 do
  redis.call(ARGV[i] == 'r' and 'HSET' or 'HSETNX', WRITES, ARGV[i + 1], ARGV[i + 2])
  redis.call('ZADD', CPIDX, 0, 'w\0' .. ARGV[i + 1])
end
expire_all(tonumber(ARGV[1]))
return 1
