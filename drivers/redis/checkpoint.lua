-- checkpoint.lua: what the scripts that write checkpoints share (docs/redis.md,
-- "Checkpoints" and "Put order"): the store-wide put order, the migration of a
-- thread of layout 1, and the record itself. It follows prelude.lua and
-- cp_prelude.lua (scripts.c joins them). KEYS[9], on one server only, is the
-- store's hash P:store, whose field co is the last order given in the whole store.
local STORE = KEYS[9]

-- Orders are microseconds of the server's clock: max(TIME, the thread's last
-- + 1, the client's hint + 1, on one server the store's last + 1). So they grow
-- within a thread and, on one server, within the store; across the masters of
-- a cluster they follow the masters' clocks (and each client's own puts).
local function next_order(hint)
  local t = redis.call('TIME')
  local order = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), hint + 1,
                         (tonumber(redis.call('HGET', META, 'co')) or 0) + 1)
  if STORE then
    order = math.max(order, (tonumber(redis.call('HGET', STORE, 'co')) or 0) + 1)
    redis.call('HSET', STORE, 'co', string.format('%d', order))
  end
  redis.call('HSET', META, 'co', string.format('%d', order))
  return order
end

-- Layout 1 numbered a thread's checkpoints 1, 2, 3... Its checkpoints get
-- orders max(created_at, previous + 1) in their old order: the thread keeps its
-- order, and threads compare by the time of their puts.
local function migrate()
  if redis.call('HGET', META, 'v') ~= '1' then return end
  local members = redis.call('ZRANGEBYLEX', CPIDX, '[o\0', '(o\1')
  local last = 0
  for i = 1, #members do
    local old, field = string.match(members[i], '^o%z(%x+)%z(.*)$')
    local ns, id = string.match(field, '^([^%z]*)%z(.*)$')
    redis.call('ZREM', CPIDX, members[i], 'n\0' .. ns .. '\0' .. old .. '\0' .. id)
    local rec = redis.call('HGET', CP, field)
    if rec then
      local o1 = cmsgpack.unpack_one(rec)
      local _, at = cmsgpack.unpack_one(rec, o1)
      last = math.max(at, last + 1)
      redis.call('HSET', CP, field, cmsgpack.pack(last) .. string.sub(rec, o1 + 1))
      redis.call('ZADD', CPIDX, 0, 'o\0' .. hex(last) .. '\0' .. field,
                 0, 'n\0' .. ns .. '\0' .. hex(last) .. '\0' .. id)
    end
  end
  redis.call('HSET', META, 'v', '2', 'co', string.format('%d', last))
  if STORE and last > (tonumber(redis.call('HGET', STORE, 'co')) or 0) then
    redis.call('HSET', STORE, 'co', string.format('%d', last))
  end
end

-- Stores checkpoint NS\0ID: the record (the client's channel list and tail
-- behind the order and created_at), the three index members of a new key (the
-- "l" member of another log length replaced for an old one), the values
-- ARGV[first], ARGV[first + 1], ... each only if absent. The same key again
-- keeps its order and created_at. Returns the order.
local function put_checkpoint(ns, id, created_at, log_length, channels, tail, first, hint)
  local field = ns .. '\0' .. id
  local old = redis.call('HGET', CP, field)
  local head, order
  local lm = loglen_member(log_length, field)
  if old then
    local o1 = cmsgpack.unpack_one(old)
    head = string.sub(old, 1, (cmsgpack.unpack_one(old, o1)))
    order = rec_order(old)
    if not redis.call('ZSCORE', CPIDX, lm) then
      local was = loglen_members()[field]
      if was then redis.call('ZREM', CPIDX, was) end
      redis.call('ZADD', CPIDX, 0, lm)
    end
  else
    order = next_order(hint)
    head = cmsgpack.pack(order) .. cmsgpack.pack(created_at)
    redis.call('ZADD', CPIDX, 0, 'o\0' .. hex(order) .. '\0' .. field,
               0, 'n\0' .. ns .. '\0' .. hex(order) .. '\0' .. id, 0, lm)
  end
  redis.call('HSET', CP, field, head .. channels .. tail)
  for i = first, #ARGV, 2 do redis.call('HSETNX', BLOBS, ARGV[i], ARGV[i + 1]) end
  return order
end
