-- cp_list.lua (after prelude.lua, cp_prelude.lua): one page of a listing,
-- newest first. ARGV: one namespace ('1'/'0'), ns, cursor (ORDER of the last
-- one seen, or of `before`; '' = the newest), page size. Returns {next cursor
-- or '', fetch() of each}. Reads only.
local one, ns, upper, count = ARGV[1] == '1', ARGV[2], ARGV[3], tonumber(ARGV[4])
local lo, hi, pat
if one then
  lo, pat = '[n\0' .. ns .. '\0', '^n%z[^%z]*%z(%x+)%z(.*)$'
  hi = upper ~= '' and ('(n\0' .. ns .. '\0' .. upper) or ('(n\0' .. ns .. '\1')
else
  lo, pat = '[o\0', '^o%z(%x+)%z(.*)$'
  hi = upper ~= '' and ('(o\0' .. upper) or '(o\1'
end
local m = redis.call('ZREVRANGEBYLEX', CPIDX, hi, lo, 'LIMIT', 0, count)
local out = {#m < count and '' or string.match(m[#m], pat)}
for i = 1, #m do
  local _, rest = string.match(m[i], pat)
  local r = fetch(one and (ns .. '\0' .. rest) or rest)
  if r then out[#out + 1] = r end
end
return out
