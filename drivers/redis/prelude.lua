-- prelude.lua: the start of every script but append.lua and persist.lua.
-- KEYS are the keys of one thread, in the order of enum key_kind (redis_int.h):
-- msgs idem meta extra cp cpidx blobs writes, named here. '\0' is a NUL byte: it
-- separates namespace, ids and versions in fields and index members (none of
-- them can hold a control character). expire_all expires every key of the
-- thread together (PEXPIREAT with one deadline), or makes them all permanent
-- again (the eight keys of the thread: a ninth, P:store, is the store's);
-- chunked runs a command over list[first..last] 1000 arguments at a time.
if redis.replicate_commands then redis.replicate_commands() end
local MSGS, IDEM, META, EXTRA, CP, CPIDX, BLOBS, WRITES = unpack(KEYS)
local function expire_all(ttl)
  if ttl > 0 then
    local t = redis.call('TIME')
    local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
    for i = 1, 8 do redis.call('PEXPIREAT', KEYS[i], at) end
  elseif redis.call('PTTL', META) > 0 then
    for i = 1, 8 do redis.call('PERSIST', KEYS[i]) end
  end
end
local function chunked(cmd, key, list, first, last)
  for i = first, last, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, last)))
  end
end
