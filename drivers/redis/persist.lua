-- persist.lua: after the common append of one server (MULTI with RPUSHX, no
-- script; threads.c) found a deadline on the list, left by a store with ttl:
-- a store without ttl makes every key of the thread permanent again. No
-- prelude. KEYS: all eight. Returns 0 when the list is gone already (expired
-- or deleted since the push), else 1.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end
return 1
