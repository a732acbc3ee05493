-- put_refs.lua: a checkpoint put with log references (driver.h,
-- checkpoint_put_refs), after prelude.lua, index.lua, cp_prelude.lua,
-- checkpoint.lua, put_log_steps.lua and swaps.lua. One script: the generation
-- condition, the put with its messages (none: expected length -1), then the
-- swaps (swaps.lua). ARGV: as put_log_steps.lua says, then 7 per swap (kind
-- 'w'/'c', value field, checkpoint field, old type, old bytes, new part, end),
-- then the number of swaps; they are taken off ARGV first, so the put reads
-- its own arguments as put_log.lua does. Returns the checkpoint's order, or
-- CONVO_CREATE / CONVO_MIGRATE (nothing written).
local nswaps = tonumber(table.remove(ARGV))
local swaps = {}
for i = #ARGV - 7 * nswaps + 1, #ARGV do swaps[#swaps + 1] = ARGV[i] end
for _ = 1, 7 * nswaps do table.remove(ARGV) end
local v, reply = put_log_check()
if reply then return reply end
local order, st = put_log_write(v)
for i = 1, #swaps, 7 do
  swap(swaps[i], swaps[i + 1], swaps[i + 2], swaps[i + 3], swaps[i + 4], swaps[i + 5],
       tonumber(swaps[i + 6]))
end
ix_end(st)
expire_all(tonumber(ARGV[2]))
return order
