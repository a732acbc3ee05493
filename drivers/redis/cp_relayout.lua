-- cp_relayout.lua (after prelude.lua, cp_prelude.lua): a thread of layout 2
-- to layout 3, where each checkpoint has an "l" member (cp_prelude.lua). Only
-- the client can read a record's log_length (its tail holds bin, which
-- cmsgpack cannot decode), so it sends what it read (layout.c).
-- ARGV: (field, log_length, record) triples, from the client's HGETALL of cp.
-- A record changed since it was read is left alone, and the thread stays in
-- its layout: the client reads it again. "l" members of checkpoints that are
-- gone (pruned by an older convo), and a second member of one, are removed.
-- Returns 1 when the thread is in layout 3 now (or missing), 0 when it must be
-- read again (a change, or a thread of layout 1, which cp_migrate.lua takes to
-- layout 2 first).
if redis.call('EXISTS', META) == 0 then return 1 end
if redis.call('HGET', META, 'v') == '1' then return 0 end
local lms = {}
for _, lm in ipairs(redis.call('ZRANGEBYLEX', CPIDX, '[l\0', '(l\1')) do
  local field = string.sub(lm, 20)
  if lms[field] or redis.call('HEXISTS', CP, field) == 0 then
    redis.call('ZREM', CPIDX, lm) -- a second one, or a checkpoint gone
  else
    lms[field] = lm
  end
end
for i = 1, #ARGV, 3 do
  local field, lm = ARGV[i], loglen_member(tonumber(ARGV[i + 1]), ARGV[i])
  if lms[field] ~= lm and redis.call('HGET', CP, field) == ARGV[i + 2] then
    if lms[field] then redis.call('ZREM', CPIDX, lms[field]) end
    redis.call('ZADD', CPIDX, 0, lm)
    lms[field] = lm
  end
end
if redis.call('HLEN', CP) ~= redis.call('ZLEXCOUNT', CPIDX, '[l\0', '(l\1') then return 0 end
-- with created_at (layout 4: set with the index, and with u on a cluster;
-- in the extra hash on one server since layout 8) already, it is back in
-- layout 4
local m = redis.call('HMGET', META, 'v', 'c')
if m[1] ~= '4' then
  redis.call('HSET', META, 'v', (m[2] or redis.call('HGET', EXTRA, 'c')) and '4' or '3')
end
return 1
