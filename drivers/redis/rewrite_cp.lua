-- rewrite_cp.lua (after prelude.lua, cp_prelude.lua, before rewrite.lua):
-- past_keep for the rewrite that meets checkpoints past keep (beyond: their
-- "l" members): without drop a conflict naming the first; with it, reads what
-- dropping them removes (records, index members, writes, and each value
-- "NS\0CHANNEL\0VERSION" no remaining checkpoint lists, so that a version put
-- again later stores its new value: values are written once, HSETNX) and
-- returns the function that removes it, run after every check.
local function past_keep(beyond, keep, drop)
  if not drop then
    local n, ns, id = string.match(beyond[1], '^l%z(%x+)%z([^%z]*)%z(.*)$')
    return redis.error_reply('CONVO_CONFLICT checkpoint ' .. id .. " (namespace '" .. ns ..
                             "') refers to " .. tonumber(n, 16) .. ' messages; the rewrite ' ..
                             'keeps ' .. keep .. ': nothing written (drop_checkpoints removes ' ..
                             'such checkpoints)')
  end
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

  return nil, function()
    for i = 1, #gone do
      if gone[i][2] then drop_checkpoint(gone[i][1], gone[i][2], gone[i][3])
      else redis.call('ZREM', CPIDX, gone[i][3]) end
    end
    local orphans = {}
    for f in pairs(loose) do orphans[#orphans + 1] = f end
    chunked('HDEL', BLOBS, orphans, 1, #orphans)
  end
end
