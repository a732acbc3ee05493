-- cp_get.lua (after prelude.lua, cp_prelude.lua): one checkpoint.
-- ARGV: ns, id ('' = the latest of ns). Reads only.
local ns, id = ARGV[1], ARGV[2]
if id == '' then
  local m = redis.call('ZREVRANGEBYLEX', CPIDX, '(n\0' .. ns .. '\1',
                       '[n\0' .. ns .. '\0', 'LIMIT', 0, 1)
  id = m[1] and string.match(m[1], '^n%z[^%z]*%z%x+%z(.*)$')
end
local r = id and fetch(ns .. '\0' .. id)
if not r then return redis.error_reply('CONVO_NOTFOUND checkpoint not found') end
return r
