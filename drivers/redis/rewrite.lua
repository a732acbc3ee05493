-- rewrite.lua (after prelude.lua, cp_prelude.lua): the tail rewrite
-- (convo_replace_tail) in one script: everything is read and checked before
-- the first write (Redis keeps what a script wrote before an error), in the
-- order of include/convo/driver.h (docs/redis.md, "The tail rewrite").
-- ARGV: ttl ms, keep, expected length (-1 = none), expected generation (-1 =
-- none), idempotency key ('' = none), drop checkpoints ('1'/'0'), then the new
-- message records, packed by the client as for an append.
-- Returns {replayed, first_seq, count, removed, generation}, or CONVO_MIGRATE
-- (a thread whose checkpoints are not indexed by log length yet).
local ttl, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
local expect, gen, key, drop = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6] == '1'
if redis.call('EXISTS', META) == 0 then
  return redis.error_reply('CONVO_NOTFOUND thread not found')
end
local g = tonumber(redis.call('HGET', META, 'g')) or 0
if key ~= '' then
  local prior = redis.call('HGET', IDEM, key)
  if prior then
    local first, n = string.match(prior, '^(%d+) (%d+)$')
    if not first then return redis.error_reply('CONVO_CORRUPT bad idempotency record') end
    return {1, tonumber(first), tonumber(n), 0, g}
  end
end
local len = redis.call('LLEN', MSGS)
if (expect >= 0 and expect ~= len) or (gen >= 0 and gen ~= g) then
  return redis.error_reply('CONVO_CONFLICT thread has ' .. len .. ' messages at generation ' ..
                           g .. ': not the expected tail')
end
if keep > len then
  return redis.error_reply('CONVO_INVAL keep ' .. ARGV[2] .. ' is past the ' .. len ..
                           ' messages')
end
if needs_migration(true) then return redis.status_reply('CONVO_MIGRATE') end

-- the checkpoints that refer to messages past keep: log_length > keep
local beyond = redis.call('ZRANGEBYLEX', CPIDX, '[' .. loglen_member(keep + 1, ''), '(l\1')
if #beyond > 0 and not drop then
  local n, ns, id = string.match(beyond[1], '^l%z(%x+)%z([^%z]*)%z(.*)$')
  return redis.error_reply('CONVO_CONFLICT checkpoint ' .. id .. " (namespace '" .. ns ..
                           "') refers to " .. tonumber(n, 16) .. ' messages; the rewrite keeps ' ..
                           ARGV[2] .. ': nothing written (drop_checkpoints removes such ' ..
                           'checkpoints)')
end
-- what dropping them removes: records, members, writes, and each value
-- ("NS\0CHANNEL\0VERSION") no remaining checkpoint lists, so that a version
-- put again later stores its new value (values are written once, HSETNX)
local gone, dropped, loose, nloose, spaces = {}, {}, {}, 0, {}
for i = 1, #beyond do
  local field = string.sub(beyond[i], 20)
  local rec = redis.call('HGET', CP, field)
  dropped[field] = true
  gone[#gone + 1] = {field, rec and hex(rec_order(rec)), beyond[i]}
  local ns = string.match(field, '^([^%z]*)%z')
  local ch = rec and rec_channels(rec) or {}
  for j = 1, #ch, 2 do
    local f = ns .. '\0' .. ch[j] .. '\0' .. ch[j + 1]
    if not loose[f] then loose[f], nloose, spaces[ns] = true, nloose + 1, true end
  end
end
-- the remaining checkpoints of those namespaces, newest first (the likeliest
-- to share a version), until each value is found listed or none is left
for ns in pairs(spaces) do
  local members = redis.call('ZREVRANGEBYLEX', CPIDX, '(n\0' .. ns .. '\1', '[n\0' .. ns .. '\0')
  for i = 1, #members do
    if nloose == 0 then break end
    local field = ns .. '\0' .. string.match(members[i], '^n%z[^%z]*%z%x+%z(.*)$')
    local rec = not dropped[field] and redis.call('HGET', CP, field)
    local ch = rec and rec_channels(rec) or {}
    for j = 1, #ch, 2 do
      local f = ns .. '\0' .. ch[j] .. '\0' .. ch[j + 1]
      if loose[f] then loose[f], nloose = nil, nloose - 1 end
    end
  end
end

-- the writes
for i = 1, #gone do
  if gone[i][2] then drop_checkpoint(gone[i][1], gone[i][2], gone[i][3])
  else redis.call('ZREM', CPIDX, gone[i][3]) end
end
local orphans = {}
for f in pairs(loose) do orphans[#orphans + 1] = f end
chunked('HDEL', BLOBS, orphans, 1, #orphans)
if keep == 0 then
  redis.call('DEL', MSGS)
elseif keep < len then
  redis.call('LTRIM', MSGS, 0, keep - 1)
end
chunked('RPUSH', MSGS, ARGV, 7, #ARGV)
local n = #ARGV - 6
redis.call('HSET', META, 'g', string.format('%d', g + 1))
if key ~= '' then redis.call('HSET', IDEM, key, string.format('%d %d', keep, n)) end
mark_layout()
expire_all(ttl)
return {0, keep, n, len - keep, g + 1}
