-- delete.lua (after prelude.lua, index.lua): every key of the thread and its
-- index entries (one server), or CONVO_NOTFOUND.
if redis.call('EXISTS', META) == 0 then
  return redis.error_reply('CONVO_NOTFOUND thread not found')
end
ix_drop()
redis.call('DEL', unpack(KEYS))
return 1
