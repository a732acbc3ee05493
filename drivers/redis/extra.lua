-- extra.lua (after prelude.lua, index.lua): save_extra.
-- ARGV: may create, max merged bytes, ttl ms, then field/value pairs (field =
-- the key as JSON text, value = the value as compact JSON). Hash values are
-- stored as "<insertion ordinal> <json>"; meta keeps xb (sum of #field + 1 +
-- #json), xc (key count) and xn (last ordinal), so the merged size is exact.
local create, maxb, ttl = ARGV[1] == '1', tonumber(ARGV[2]), tonumber(ARGV[3])
local m = redis.call('HMGET', META, 'v', 'xb', 'xc', 'xn')
if not m[1] and not create then return redis.status_reply('CONVO_CREATE') end
local xb, xc, xn = tonumber(m[2]) or 0, tonumber(m[3]) or 0, tonumber(m[4]) or 0
local vals = {}
for i = 4, #ARGV, 2 do
  local f, v = ARGV[i], ARGV[i + 1]
  local old = redis.call('HGET', EXTRA, f)
  local ord
  if old then
    local sp = string.find(old, ' ', 1, true)
    if not sp then return redis.error_reply('CONVO_CORRUPT bad extra value') end
    ord = string.sub(old, 1, sp - 1)
    xb = xb - (#old - sp)
  else
    xn = xn + 1
    xc = xc + 1
    ord = string.format('%d', xn)
    xb = xb + #f + 1
  end
  xb = xb + #v
  vals[#vals + 1] = f
  vals[#vals + 1] = ord .. ' ' .. v
end
local size = 2 + xb + math.max(xc - 1, 0)
if size > maxb then
  return redis.error_reply('CONVO_TOOLARGE merged extra of ' .. size ..
                           ' bytes would exceed the limit of ' .. maxb .. ' bytes')
end
local st = ix_begin(true)
chunked('HSET', EXTRA, vals, 1, #vals)
redis.call('HSET', META, 'xb', string.format('%d', xb),
           'xc', string.format('%d', xc), 'xn', string.format('%d', xn))
ix_end(st)
expire_all(ttl)
return 1
