-- put_log_steps.lua: the two halves of a checkpoint put with messages, shared by
-- put_log.lua and put_refs.lua (after prelude.lua, index.lua, cp_prelude.lua and
-- checkpoint.lua). put_log_check reads and checks everything before the first
-- write (Redis keeps what a script wrote before an error); put_log_write writes.
-- ARGV: may create ('1'/'0'), ttl ms, expected length (-1 = none), expected
-- generation (-1 = none), message count n, ns, id, created_at, order hint,
-- log_length, channel list, record tail, then the n message records (as the
-- append script gets them), then value field/value pairs.
-- put_log_check returns meta's v (false for a new thread), or nil and the reply to give (a conflict,
-- CONVO_CREATE or CONVO_MIGRATE: nothing written).
local function put_log_check()
  local create = ARGV[1] == '1'
  local expect, gen = tonumber(ARGV[3]), tonumber(ARGV[4])
  local len = redis.call('LLEN', MSGS)
  if expect >= 0 and len ~= expect then
    return nil, redis.error_reply('CONVO_CONFLICT thread has ' .. len ..
                                  ' messages, expected ' .. expect)
  end
  local m = redis.call('HMGET', META, 'v', 'g')
  local g = tonumber(m[2]) or 0
  if gen >= 0 and g ~= gen then
    return nil, redis.error_reply('CONVO_CONFLICT thread is at generation ' .. g ..
                                  ', expected ' .. ARGV[4])
  end
  if not m[1] and not create then return nil, redis.status_reply('CONVO_CREATE') end
  if needs_migration(m[1]) then return nil, redis.status_reply('CONVO_MIGRATE') end
  -- a stored record of this key that put_checkpoint cannot decode fails here,
  -- before the messages go in
  local old = redis.call('HGET', CP, ARGV[6] .. '\0' .. ARGV[7])
  if old then cmsgpack.unpack_one(old, (cmsgpack.unpack_one(old))) end
  return m[1]
end
-- Messages, then the checkpoint, around the thread index (ix_begin .. ix_end,
-- which the caller ends with st). v: put_log_check's. Returns the order and st.
local function put_log_write(v)
  local n = tonumber(ARGV[5])
  mark_layout(v)
  local st = ix_begin(false)
  chunked('RPUSH', MSGS, ARGV, 13, 12 + n)
  local order = put_checkpoint(ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[10]), ARGV[11],
                               ARGV[12], 13 + n, tonumber(ARGV[9]))
  return order, st
end
