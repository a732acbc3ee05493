-- copy.lua (after prelude.lua, index.lua, cp_prelude.lua, checkpoint.lua): a
-- fork that copies the checkpoints too, creating the destination from what
-- was read off the source in one MULTI (threads.c), in this one script: the
-- copy is whole or not there. ARGV: ttl ms, record count n, xb, xc, xn, the
-- source's generation, extra field count e, order hint; n records; e extra
-- fields and values; then four lists, each after its length: the source's cp
-- (field, record, ...), every cpidx member, blobs (field, value, ...), writes
-- (field, value, ...). KEYS: the destination's eight, and P:store on one server.
-- Returns 1, or CONVO_MIGRATE (nothing written).
if redis.call('EXISTS', META) == 1 then
  return redis.error_reply('CONVO_CONFLICT destination thread already exists')
end
local ttl, n, e, hint = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[7]),
                        tonumber(ARGV[8])
local at = 9 + n + e
local function list()
  local first, last = at + 1, at + tonumber(ARGV[at])
  at = last + 1
  return first, last
end
local function pairs_of(first, last)
  local out = {}
  for i = first, last, 2 do out[ARGV[i]] = ARGV[i + 1] end
  return out
end
local records = pairs_of(list())
local mf, ml = list()
local blobs_first, blobs_last = list()
local writes = pairs_of(list())

-- the source's members: "o" in put order, "l" give each checkpoint's log
-- length, "w" its pending writes
local puts, loglen, wmembers = {}, {}, {}
for i = mf, ml do
  local m, kind = ARGV[i], string.sub(ARGV[i], 1, 1)
  if kind == 'o' then
    puts[#puts + 1] = string.sub(m, 20)
  elseif kind == 'l' then
    loglen[string.sub(m, 20)] = tonumber(string.sub(m, 3, 18), 16)
  elseif kind == 'w' then
    wmembers[#wmembers + 1] = m
  end
end
-- a checkpoint without its log length member: the client indexes the source
-- and reads it again, before anything is written here
for _, field in ipairs(puts) do
  if records[field] and not loglen[field] then return redis.status_reply('CONVO_MIGRATE') end
end

local st = ix_begin(false)
chunked('RPUSH', MSGS, ARGV, 9, 8 + n)
chunked('HSET', EXTRA, ARGV, 9 + n, 8 + n + e)
redis.call('HSET', META, 'xb', ARGV[3], 'xc', ARGV[4], 'xn', ARGV[5])
if ARGV[6] ~= '0' then redis.call('HSET', META, 'g', ARGV[6]) end

-- the checkpoints within the n messages copied, in put order, each put now
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local copied = {}
for _, field in ipairs(puts) do
  local rec, ll = records[field], loglen[field]
  if rec and ll and ll <= n then
    local order = next_order(hint)
    local o1 = cmsgpack.unpack_one(rec)
    local o2 = cmsgpack.unpack_one(rec, o1)
    redis.call('HSET', CP, field, cmsgpack.pack(order) .. cmsgpack.pack(now) ..
               string.sub(rec, o2 + 1))
    local ns, id = string.match(field, '^([^%z]*)%z(.*)$')
    redis.call('ZADD', CPIDX, 0, 'o\0' .. hex(order) .. '\0' .. field,
               0, 'n\0' .. ns .. '\0' .. hex(order) .. '\0' .. id,
               0, loglen_member(ll, field))
    copied[field] = true
  end
end
for _, m in ipairs(wmembers) do
  local ns, id = string.match(m, '^w%z([^%z]*)%z([^%z]*)%z')
  local wf = string.sub(m, 3)
  if ns and copied[ns .. '\0' .. id] and writes[wf] then
    redis.call('ZADD', CPIDX, 0, m)
    redis.call('HSET', WRITES, wf, writes[wf])
  end
end
chunked('HSET', BLOBS, ARGV, blobs_first, blobs_last)
drop_unused_values()
ix_end(st)
expire_all(ttl)
return 1
