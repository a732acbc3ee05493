-- list.lua: a batch of a thread listing on one server (list.c), in one round
-- trip: the candidates of one index set after a position, and each one's
-- rows. Reads only; the keys are built here from the set's members, which one
-- server allows (a cluster reads them with separate commands). No prelude.
-- ARGV: set key, mode, position time ('' = none), position id, count, key
-- prefix P, extra ('1'/'0'), last message ('1'/'0'), P:ix:r (layout 5: its
-- scores are the threads' updated_at). Modes: 'lexasc', 'lexdesc' (a set by
-- id), 'desc', 'asc' (a set by time), 'rdesc', 'rasc' (the threads of a value
-- set by id, in P:ix:r's order: the activity order of a declared value is
-- found here, as a common append moves a thread in P:ix:r only).
-- Returns {n, ties, range, rows...}: n the range's size (ties and range are
-- ZRANGE replies WITHSCORES or as if: the client keeps the ties after the
-- position, which needs a byte order Lua's string compare does not promise),
-- then per member of ties and range, in that order: {{meta's c, updated_at},
-- LLEN, HGETALL extra or 0, the last record or false}.
local key, mode, t, id, k = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local prefix, want_extra, want_last, recent = ARGV[6], ARGV[7] == '1', ARGV[8] == '1', ARGV[9]
local ties, range = {}, {}
local lex = mode == 'lexasc' or mode == 'lexdesc'

-- a before b in bytes (ties of a time are in id order, as a sorted set has them)
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- 'rdesc' / 'rasc': every member of the value's set with its P:ix:r score,
-- those tied at t and the first k after t, flattened as WITHSCORES replies.
local function by_activity(desc)
  local members, all = redis.call('ZRANGE', key, 0, -1), {}
  for i = 1, #members, 1000 do
    local last = math.min(i + 999, #members)
    local got = redis.call('ZMSCORE', recent, unpack(members, i, last))
    for j = i, last do
      local s = got[j - i + 1]
      if s then all[#all + 1] = {members[j], tonumber(s), s} end
    end
  end
  local at = t ~= '' and tonumber(t)
  local after, tied = {}, {}
  for _, e in ipairs(all) do
    if not at or (desc and e[2] < at) or (not desc and e[2] > at) then after[#after + 1] = e
    elseif e[2] == at then tied[#tied + 1] = e end
  end
  table.sort(after, function(a, b)
    if a[2] ~= b[2] then return (a[2] > b[2]) == desc end
    if desc then return bytes_before(b[1], a[1]) end
    return bytes_before(a[1], b[1])
  end)
  local function flat(list, n)
    local out = {}
    for i = 1, math.min(n, #list) do
      out[#out + 1] = list[i][1]
      out[#out + 1] = list[i][3]
    end
    return out
  end
  return flat(tied, #tied), flat(after, k)
end

if lex then
  local from = t ~= '' and '(' .. id or nil
  if mode == 'lexdesc' then
    range = redis.call('ZREVRANGEBYLEX', key, from or '+', '-', 'LIMIT', 0, k)
  else
    range = redis.call('ZRANGEBYLEX', key, from or '-', '+', 'LIMIT', 0, k)
  end
elseif mode == 'rdesc' or mode == 'rasc' then
  ties, range = by_activity(mode == 'rdesc')
elseif mode == 'desc' then
  if t ~= '' then ties = redis.call('ZREVRANGEBYSCORE', key, t, t, 'WITHSCORES') end
  range = redis.call('ZREVRANGEBYSCORE', key, t ~= '' and '(' .. t or '+inf', '-inf',
                     'WITHSCORES', 'LIMIT', 0, k)
else
  if t ~= '' then ties = redis.call('ZRANGEBYSCORE', key, t, t, 'WITHSCORES') end
  range = redis.call('ZRANGEBYSCORE', key, t ~= '' and '(' .. t or '-inf', '+inf',
                     'WITHSCORES', 'LIMIT', 0, k)
end
local out = {0, ties, range}
local step = lex and 1 or 2
local function rows(list)
  for i = 1, #list, step do
    -- the thread's tag: as cmd.c encodes it (encode_tag)
    local tag = string.gsub(list[i], '[%z\1-\32\127%%{}:%*%?%[%]\\]', function(c)
      return string.format('%%%02X', string.byte(c))
    end)
    local base = prefix .. ':{' .. tag .. '}:'
    out[#out + 1] = {{redis.call('HGET', base .. 'meta', 'c'), redis.call('ZSCORE', recent, list[i])},
                     redis.call('LLEN', base .. 'msgs'),
                     want_extra and redis.call('HGETALL', base .. 'extra') or 0,
                     want_last and redis.call('LINDEX', base .. 'msgs', -1) or false}
  end
end
rows(ties)
rows(range)
out[1] = #range / step
return out
