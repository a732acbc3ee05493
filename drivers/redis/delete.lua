-- delete.lua (after prelude.lua): every key of the thread, or CONVO_NOTFOUND.
if redis.call('EXISTS', META) == 0 then
  return redis.error_reply('CONVO_NOTFOUND thread not found')
end
redis.call('DEL', unpack(KEYS))
return 1
