-- cp_prune.lua (after prelude.lua, cp_prelude.lua): ARGV: keep_last. Drops
-- older checkpoints of each namespace with their writes and index members,
-- then every value no remaining checkpoint lists.
if redis.call('EXISTS', META) == 0 then
  return redis.error_reply('CONVO_NOTFOUND thread not found')
end
local ns, lms = next_ns(nil), nil
while ns do
  local old = redis.call('ZREVRANGEBYLEX', CPIDX, '(n\0' .. ns .. '\1',
                         '[n\0' .. ns .. '\0', 'LIMIT', ARGV[1], -1)
  if #old > 0 then lms = lms or loglen_members() end
  for i = 1, #old do
    local order, id = string.match(old[i], '^n%z[^%z]*%z(%x+)%z(.*)$')
    local field = ns .. '\0' .. id
    drop_checkpoint(field, order, lms[field])
  end
  ns = next_ns(ns)
end
drop_unused_values()
return 1
