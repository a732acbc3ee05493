-- reindex.lua (after prelude.lua, index.lua): a thread to layout 4, and its
-- index entries written again (on one server). Run for every thread when a
-- store of layout 3 is opened or declares its index keys for the first time,
-- and for one thread whose entries a listing, a sweep or a common append
-- (threads.c) found wrong or missing. updated_at is, on one server, the
-- thread's score in P:ix:r where it has one, on a cluster meta's u; a thread
-- without it takes the time of its last message or its last checkpoint put
-- (meta's co), whichever is later; one without c its first message's time
-- (NOW, the migration's time, for a thread with neither). Layout 1 and 2 keep
-- their v: their checkpoints are migrated by their own scripts. No other ARGV.
-- Returns {c, u}, or 0 for a missing thread.
local m = redis.call('HMGET', META, 'v', 'c', 'u', 'co')
if not m[1] then return 0 end
local c, u = m[2], m[3]
if IX_P then u = redis.call('ZSCORE', IX_P .. 'r', IX_ID) end
if not c then c = ix_rec_time(redis.call('LINDEX', MSGS, 0)) or IX_NOW end
if not u then
  local last = tonumber(ix_rec_time(redis.call('LINDEX', MSGS, -1)) or 0)
  local co = tonumber(m[4]) or 0
  u = string.format('%.0f', math.max(last, co, tonumber(c)))
end
if not m[2] then redis.call('HSET', META, 'c', c) end
if not IX_P and not m[3] then redis.call('HSET', META, 'u', u) end
if m[1] == '3' then redis.call('HSET', META, 'v', '4') end
ix_add(c, u)
return {c, u}
