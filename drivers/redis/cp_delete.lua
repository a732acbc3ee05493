-- cp_delete.lua (after prelude.lua, cp_prelude.lua): ARGV: NS, ID, NS, ID, ...
-- Drops those checkpoints of the thread that exist, with their writes and
-- index members, then every value no remaining checkpoint lists. Returns how
-- many it dropped (0 for a thread that does not exist).
if redis.call('EXISTS', META) == 0 then return 0 end
local lms, removed = nil, 0
for i = 1, #ARGV, 2 do
  local field = ARGV[i] .. '\0' .. ARGV[i + 1]
  local rec = redis.call('HGET', CP, field)
  if rec then
    lms = lms or loglen_members()
    drop_checkpoint(field, hex(rec_order(rec)), lms[field])
    removed = removed + 1
  end
end
if removed > 0 then drop_unused_values() end
return removed
