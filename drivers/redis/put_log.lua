-- put_log.lua: a checkpoint put with messages (convo_checkpoint_in version 2),
-- after prelude.lua, index.lua, cp_prelude.lua, checkpoint.lua and
-- put_log_steps.lua (its ARGV). One script, so the messages and the checkpoint
-- are stored together or not at all. Everything is checked before the first
-- write. Returns the checkpoint's order, or CONVO_CREATE / CONVO_MIGRATE.
local v, reply = put_log_check()
if reply then return reply end
local order, st = put_log_write(v)
ix_end(st)
expire_all(tonumber(ARGV[2]))
return order
