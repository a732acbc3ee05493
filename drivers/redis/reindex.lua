-- reindex.lua (after prelude.lua, rec_time.lua, index.lua): a thread to layout
-- 4 (its own keys) and its index entries written again. Run for every thread
-- when a store of an older layout is opened or declares its index keys for the
-- first time, and for one thread whose entries a listing, a sweep or a common
-- append (threads.c) found wrong or missing. The activity time u: on one
-- server the thread's updated_at, i.e. its P:ix:r score (layout 5 kept
-- updated_at there; layout 6 keeps u there too) or its last message's time
-- when that is later (an append inside the window, layout 6); on a cluster
-- meta's u. A thread without it takes the time of its last message or its
-- last checkpoint put (meta's co), whichever is later; one without c its
-- first message's time (NOW, the migration's time, for a thread with
-- neither). Layout 1 and 2 keep their v: their checkpoints are migrated by
-- their own scripts. On one server c, u and p move from meta into the extra
-- hash (layout 8; one the hash holds already, written by layout 8 since,
-- keeps its value there). No other ARGV. Returns {c, u}, or 0 for a missing
-- thread.
local m = redis.call('HMGET', META, 'v', 'c', 'u', 'co', 'p')
if not m[1] then return 0 end
if IX_P and (m[2] or m[3] or m[5]) then
  local names = {'c', 'u', 'p'}
  for i = 1, 3 do
    local x = m[i == 3 and 5 or i + 1]
    if x then redis.call('HSETNX', IX_ROW, names[i], x) end
  end
  redis.call('HDEL', META, 'c', 'u', 'p')
end
if IX_P then
  local r = redis.call('HMGET', IX_ROW, 'c', 'u')
  m[2], m[3] = r[1], r[2]
end
local c, u = m[2], m[3]
if IX_P then u = redis.call('ZSCORE', IX_P .. 'r', IX_ID) end
if not c then c = ix_rec_time(redis.call('LINDEX', MSGS, 0)) or IX_NOW end
local last = rec_time(redis.call('LINDEX', MSGS, -1)) or 0
if not u then
  local co = tonumber(m[4]) or 0
  u = string.format('%.0f', math.max(last, co, tonumber(c)))
elseif IX_P and last > tonumber(u) then
  u = string.format('%.0f', last)
end
if not m[2] then redis.call('HSET', IX_ROW, 'c', c) end
if IX_P or not m[3] then redis.call('HSET', IX_ROW, 'u', u) end
if m[1] == '3' then redis.call('HSET', META, 'v', '4') end
ix_add(c, u)
return {c, u}
