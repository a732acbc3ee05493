-- index.lua: the thread index (docs/redis.md, "The thread index"), before
-- every script that writes a thread (after prelude.lua where there is one;
-- rec_time.lua before it). KEYS[1], KEYS[3], KEYS[4] are the thread's msgs,
-- meta and extra.
-- The client puts one argument in front of the script's own: "NOW" (its clock,
-- µs) on a cluster (layout 4), where the index lives in other slots and the
-- client writes it after the script; on one server (layout 6)
-- "NOW\0P:ix:\0ID\0F1\0F2...", the index prefix, the thread id and the
-- declared extra keys as JSON text (the extra hash's fields), and the script
-- keeps the index in the same atomic write:
--   P:ix:r, P:ix:c          every thread by its activity time / created_at
--                           (score µs)
--   P:ix:{F V}:r, :c, :i    the threads whose extra has key F = V (V: the
--                           value's JSON text, a number as %.17g, cut at 200
--                           bytes + "\n"), by activity time, created_at, id
--                           (score 0)
-- c (created_at) and u, µs as decimal text, live in meta on a cluster and in
-- the extra hash on one server (layout 8: a page reads that hash whole, one
-- command a row for the extra and the times; the extra's own fields are JSON
-- texts, which start with '"'). On a cluster u is the
-- thread's updated_at; on one server (layout 6) u is its activity time, the
-- score of its :r entries, which every script moves to NOW together, and a
-- common append inside the window (threads.c) leaves alone: there the
-- thread's updated_at is its last record's created_at when that is later
-- (docs/redis.md, "The activity window").
local IX_NOW, IX_P, IX_ID, IX_F = nil, nil, nil, {}
do
  local spec, at, parts = table.remove(ARGV, 1), 1, {}
  while true do
    local z = string.find(spec, '\0', at, true)
    parts[#parts + 1] = string.sub(spec, at, (z or 0) - 1)
    if not z then break end
    at = z + 1
  end
  IX_NOW, IX_P, IX_ID = parts[1], parts[2], parts[3]
  for i = 4, #parts do IX_F[#IX_F + 1] = parts[i] end
end
-- the hash of c and u (and p, the quick rewrite's): the extra hash on one
-- server, meta on a cluster
local IX_ROW = IX_P and KEYS[4] or KEYS[3]

-- created_at of a message record as decimal text, or nil (rec_time.lua)
local function ix_rec_time(rec)
  local t = rec_time(rec)
  return t and string.format('%.0f', t)
end

-- The index key prefix "P:ix:{F V}:" of a stored extra value ("ORD JSON"), or
-- nil: objects and arrays are not indexed.
local function ix_kv(f, stored)
  local sp = stored and string.find(stored, ' ', 1, true)
  if not sp then return nil end
  local v = string.sub(stored, sp + 1)
  local c = string.byte(v, 1)
  if c == 123 or c == 91 then return nil end
  if c == 45 or (c and c >= 48 and c <= 57) then
    local x = tonumber(v)
    if not x then return nil end
    if x == 0 then x = 0 end
    v = string.format('%.17g', x)
  end
  if #v > 200 then v = string.sub(v, 1, 200) .. '\n' end
  return IX_P .. '{' .. f .. v .. '}:'
end

-- The "P:ix:{F V}:" prefixes of the thread's declared extra keys now.
local function ix_values()
  local out = {}
  if not IX_P or #IX_F == 0 then return out end
  local got = redis.call('HMGET', KEYS[4], unpack(IX_F))
  for i = 1, #IX_F do
    local kv = ix_kv(IX_F[i], got[i])
    if kv then out[#out + 1] = kv end
  end
  return out
end

-- What a write needs to know before it writes: meta's v and c, and (for a
-- write that changes the extra) the thread's index values. On one server c
-- is read only where its value is used (a write that changes the extra) or
-- may be missing (a thread of layout 1 to 3): a thread of layout 4 has it
-- (true stands for it; the walk of layout 8 moved it into the extra hash).
local function ix_begin(extra_changes)
  local v, c
  if IX_P then
    v = redis.call('HGET', KEYS[3], 'v')
    if extra_changes or (v and v ~= '4') then
      c = redis.call('HGET', IX_ROW, 'c')
    else
      c = v == '4'
    end
  else
    local m = redis.call('HMGET', KEYS[3], 'v', 'c')
    v, c = m[1], m[2]
  end
  return {v = v, c = c, before = extra_changes and ix_values() or nil}
end

local function ix_add_kv(kv, c, u)
  redis.call('ZADD', kv .. 'r', u, IX_ID)
  redis.call('ZADD', kv .. 'c', c, IX_ID)
  redis.call('ZADD', kv .. 'i', 0, IX_ID)
end

local function ix_drop_kv(kv)
  redis.call('ZREM', kv .. 'r', IX_ID)
  redis.call('ZREM', kv .. 'c', IX_ID)
  redis.call('ZREM', kv .. 'i', IX_ID)
end

-- Every entry of the thread, created_at c and activity time u.
local function ix_add(c, u)
  if not IX_P then return end
  redis.call('ZADD', IX_P .. 'r', u, IX_ID)
  redis.call('ZADD', IX_P .. 'c', c, IX_ID)
  for _, kv in ipairs(ix_values()) do ix_add_kv(kv, c, u) end
end

-- After a write (st from ix_begin): u = NOW; a thread created now gets
-- created_at NOW, one of an older layout the time of its first message (NOW
-- when it has none). Then its entries: the activity order moves (P:ix:r and
-- each value's :r); a new thread, or changed extra values, add and remove
-- the others.
local function ix_end(st)
  local created, c = not st.v, st.c
  if not c then
    c = (not created and ix_rec_time(redis.call('LINDEX', KEYS[1], 0))) or IX_NOW
  end
  local row = {'u', IX_NOW}
  if not st.c then row[3], row[4] = 'c', c end
  if (created or st.v == '3') and IX_P then
    redis.call('HSET', KEYS[3], 'v', '4')
  elseif created or st.v == '3' then
    row[#row + 1], row[#row + 2] = 'v', '4'
  end
  redis.call('HSET', IX_ROW, unpack(row))
  if not IX_P then return end
  if not st.c then return ix_add(c, IX_NOW) end
  redis.call('ZADD', IX_P .. 'r', IX_NOW, IX_ID)
  local had = {}
  for _, kv in ipairs(st.before or {}) do had[kv] = true end
  for _, kv in ipairs(ix_values()) do
    if not st.before then
      redis.call('ZADD', kv .. 'r', IX_NOW, IX_ID)
    elseif had[kv] then
      redis.call('ZADD', kv .. 'r', IX_NOW, IX_ID)
      had[kv] = nil
    else
      ix_add_kv(kv, c, IX_NOW)
    end
  end
  for kv in pairs(had) do ix_drop_kv(kv) end
end

-- Before a delete: every entry of the thread.
local function ix_drop()
  if not IX_P then return end
  redis.call('ZREM', IX_P .. 'r', IX_ID)
  redis.call('ZREM', IX_P .. 'c', IX_ID)
  for _, kv in ipairs(ix_values()) do ix_drop_kv(kv) end
end
