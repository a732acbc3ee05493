-- rewrite_fast.lua (after prelude.lua, before rewrite.lua): past_keep of the
-- rewrite's common script, which has no checkpoint code: a checkpoint past keep
-- makes it answer CONVO_CHECKPOINTS, having written nothing, and the client
-- sends the call again as the script with rewrite_cp.lua.
local function past_keep()
  return redis.status_reply('CONVO_CHECKPOINTS')
end
