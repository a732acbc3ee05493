-- reindex.lua (after prelude.lua, index.lua): a thread to layout 4, and its
-- index entries written again (on one server). Run for every thread when a
-- store of layout 3 is opened or declares its index keys for the first time,
-- and for one thread whose entries a listing or sweep found wrong. A thread
-- without c/u takes created_at from its first message and updated_at from its
-- last message or its last checkpoint put (meta's co), whichever is later
-- (NOW, the migration's time, for a thread with neither). Layout 1 and 2 keep
-- their v: their checkpoints are migrated by their own scripts. No other ARGV.
-- Returns {c, u}, or 0 for a missing thread.
local m = redis.call('HMGET', META, 'v', 'c', 'u', 'co')
if not m[1] then return 0 end
local c, u = m[2], m[3]
if not c then c = ix_rec_time(redis.call('LINDEX', MSGS, 0)) or IX_NOW end
if not u then
  local last = tonumber(ix_rec_time(redis.call('LINDEX', MSGS, -1)) or 0)
  local co = tonumber(m[4]) or 0
  u = string.format('%.0f', math.max(last, co, tonumber(c)))
  redis.call('HSET', META, 'c', c, 'u', u)
end
if m[1] == '3' then redis.call('HSET', META, 'v', '4') end
ix_add(c, u)
return {c, u}
