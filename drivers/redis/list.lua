-- list.lua: the candidates of a page in activity order on one server (layouts
-- 6 and 7; list.c, when its MULTI found more than WINDOW_EXTRA members within
-- the k-th's window): members of a set by activity time (P:ix:r, or a
-- value's :r), whose score S, the thread's u, has S <= U < S + W for its
-- updated_at U. Reads only the set: the rows are read after it, pipelined,
-- by the client, which orders them by (U, id) (a row read in Lua cost the
-- server more than the whole pipelined read).
-- ARGV: set key, 'desc' or 'asc', the position's time ('' = none), count k,
-- the window W (µs).
-- Returns {ended, f, members...}: the first k members in score order from
-- the position (S <= its time newest first; S > its time - W oldest
-- first), then, unless the set ended there, every member within one window
-- past the last one's score f (newest first scored in (f - W, f], oldest
-- first in [f, f + W)). Newest first every thread not returned then has
-- U < f; oldest first U >= f + W: the client's rows up to there are complete.
local key, desc, t = ARGV[1], ARGV[2] == 'desc', ARGV[3]
local k, W = tonumber(ARGV[4]), tonumber(ARGV[5])
local got
if desc then
  got = redis.call('ZREVRANGEBYSCORE', key, t ~= '' and t or '+inf', '-inf', 'LIMIT', 0, k)
else
  local from = t ~= '' and '(' .. string.format('%.0f', tonumber(t) - W) or '-inf'
  got = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'LIMIT', 0, k)
end
if #got < k then
  table.insert(got, 1, '')
  table.insert(got, 1, 1)
  return got
end
local f = tonumber(redis.call('ZSCORE', key, got[#got]))
local near
if desc then
  near = redis.call('ZREVRANGEBYSCORE', key, string.format('%.0f', f),
                    '(' .. string.format('%.0f', f - W))
else
  near = redis.call('ZRANGEBYSCORE', key, string.format('%.0f', f),
                    '(' .. string.format('%.0f', f + W))
end
local seen, out = {}, {0, string.format('%.0f', f)}
for _, m in ipairs(got) do seen[m] = true out[#out + 1] = m end
for _, m in ipairs(near) do if not seen[m] then out[#out + 1] = m end end
return out
