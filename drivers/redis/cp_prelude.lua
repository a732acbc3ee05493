-- cp_prelude.lua: what the checkpoint scripts share, after prelude.lua.
-- A record (the value of field "NS\0ID" in cp) is four msgpack objects in a
-- row: put order, created_at, the channel list [ch, version, ...] (strings: the
-- only part a script decodes), and the client's tail. cpidx is a sorted set of
-- score 0 read by range of bytes:
--   "o\0" ORDER "\0" NS "\0" ID          every checkpoint, in put order
--   "n\0" NS "\0" ORDER "\0" ID          per namespace, in put order
--   "w\0" NS "\0" ID "\0" TASK "\0" IDX  the pending writes of a checkpoint
--   "l\0" LOGLEN "\0" NS "\0" ID       by the log length it refers to (layout 3)
-- ORDER is the store-wide put order (microseconds, see checkpoint.lua and
-- docs/redis.md, "Put order") and LOGLEN the checkpoint's log_length, each as
-- 16 hex digits.
local function rec_order(rec)
  local _, o = cmsgpack.unpack_one(rec)
  return o
end
local function rec_channels(rec)
  local o1 = cmsgpack.unpack_one(rec)
  local o2 = cmsgpack.unpack_one(rec, o1)
  local _, ch = cmsgpack.unpack_one(rec, o2)
  return ch
end
local function hex(order) return string.format('%016x', order) end
local function next_ns(after)
  local from = after and ('[n\0' .. after .. '\1') or '[n\0'
  local m = redis.call('ZRANGEBYLEX', CPIDX, from, '(n\1', 'LIMIT', 0, 1)
  return m[1] and string.match(m[1], '^n%z([^%z]*)%z')
end
local function writes_of(field)
  return '[w\0' .. field .. '\0', '(w\0' .. field .. '\1'
end
local function hmget_all(key, fields)
  local out = {}
  for i = 1, #fields, 1000 do
    local part = redis.call('HMGET', key, unpack(fields, i, math.min(i + 999, #fields)))
    for j = 1, #part do out[#out + 1] = part[j] end
  end
  return out
end
-- {field, record, values in channel order, pending writes}, or false
local function fetch(field)
  local rec = redis.call('HGET', CP, field)
  if not rec then return false end
  local ns = string.match(field, '^([^%z]*)%z')
  local ch, bf = rec_channels(rec), {}
  for i = 1, #ch, 2 do bf[#bf + 1] = ns .. '\0' .. ch[i] .. '\0' .. ch[i + 1] end
  local wf = redis.call('ZRANGEBYLEX', CPIDX, writes_of(field))
  for i = 1, #wf do wf[i] = string.sub(wf[i], 3) end
  return {field, rec, hmget_all(BLOBS, bf), hmget_all(WRITES, wf)}
end
-- The "l" member of checkpoint field NS\0ID at log_length n.
local function loglen_member(n, field) return 'l\0' .. hex(n) .. '\0' .. field end
-- field -> its "l" member, for every checkpoint (one range read of the index).
local function loglen_members()
  local out = {}
  for _, m in ipairs(redis.call('ZRANGEBYLEX', CPIDX, '[l\0', '(l\1')) do
    out[string.sub(m, 20)] = m
  end
  return out
end
-- Removes checkpoint field (put order order_hex) with its index members and
-- its pending writes; lm is its "l" member, if known.
local function drop_checkpoint(field, order_hex, lm)
  local ns, id = string.match(field, '^([^%z]*)%z(.*)$')
  redis.call('HDEL', CP, field)
  redis.call('ZREM', CPIDX, 'o\0' .. order_hex .. '\0' .. field,
             'n\0' .. ns .. '\0' .. order_hex .. '\0' .. id)
  if lm then redis.call('ZREM', CPIDX, lm) end
  local w = redis.call('ZRANGEBYLEX', CPIDX, writes_of(field))
  for j = 1, #w do w[j] = string.sub(w[j], 3) end
  chunked('HDEL', WRITES, w, 1, #w)
  redis.call('ZREMRANGEBYLEX', CPIDX, writes_of(field))
end
-- Removes every value no remaining checkpoint of its namespace lists.
local function drop_unused_values()
  local used, all = {}, redis.call('HGETALL', CP)
  for i = 1, #all, 2 do
    local n, ch = string.match(all[i], '^([^%z]*)%z'), rec_channels(all[i + 1])
    for j = 1, #ch, 2 do used[n .. '\0' .. ch[j] .. '\0' .. ch[j + 1]] = true end
  end
  local gone = {}
  for _, f in ipairs(redis.call('HKEYS', BLOBS)) do
    if not used[f] then gone[#gone + 1] = f end
  end
  chunked('HDEL', BLOBS, gone, 1, #gone)
end
-- Layout 3 finds checkpoints by log length ("l" members). A script cannot
-- index a thread of layout 1 or 2: the log length is in the record's tail,
-- next to bytes cmsgpack cannot decode (bin). So such a thread with
-- checkpoints answers CONVO_MIGRATE, before any write: the client indexes it
-- (layout.c) and sends the call again. One without checkpoints is layout 3 as
-- it is; a write marks it (mark_layout; index.lua's ix_end then takes it to
-- layout 4). v: meta's v, read by the caller (nil
-- for a thread the call creates). (rewrite.lua also counts the members.)
local function needs_migration(v)
  return v and v ~= '3' and v ~= '4' and redis.call('HLEN', CP) > 0
end
local function mark_layout(v)
  if v ~= '3' and v ~= '4' then redis.call('HSET', META, 'v', '3') end
end
