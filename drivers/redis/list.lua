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

-- 'rdesc' / 'rasc': the value's members in P:ix:r's order, those tied at t and
-- the first k after t, flattened as WITHSCORES replies. ZINTER orders them in
-- the server (by score, then member bytes: a sorted set's order) without
-- formatting a score; only the probes of the binary search for t and the
-- members returned have their score read (ZSCORE / ZMSCORE).
local function by_activity(desc)
  local all = redis.call('ZINTER', 2, key, recent, 'WEIGHTS', 0, 1)
  local function score(i) return tonumber(redis.call('ZSCORE', recent, all[i])) end
  -- the first index whose score is >= x, or #all + 1
  local function bound(x)
    local lo, hi = 1, #all + 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if score(mid) >= x then hi = mid else lo = mid + 1 end
    end
    return lo
  end
  local first, past = 1, #all + 1 -- the ties are all[first .. past - 1]
  if t ~= '' then
    local at = tonumber(t)
    first = bound(at)
    past = first
    while past <= #all and score(past) == at do past = past + 1 end
  end
  local function flat(from, to, step)
    local members, out = {}, {}
    for i = from, to, step do members[#members + 1] = all[i] end
    for i = 1, #members, 1000 do
      local last = math.min(i + 999, #members)
      local scores = redis.call('ZMSCORE', recent, unpack(members, i, last))
      for j = i, last do
        out[#out + 1] = members[j]
        out[#out + 1] = scores[j - i + 1]
      end
    end
    return out
  end
  if desc then -- the ties too in the page's order, as ZREVRANGEBYSCORE gives them
    local from = (t ~= '' and first or past) - 1
    return t ~= '' and flat(past - 1, first, -1) or {}, flat(from, math.max(1, from - k + 1), -1)
  end
  local from = t ~= '' and past or 1
  return t ~= '' and flat(first, past - 1, 1) or {}, flat(from, math.min(#all, from + k - 1), 1)
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
-- the range's scores are updated_at already when it was read off P:ix:r
local scored = mode == 'rdesc' or mode == 'rasc' or (not lex and key == recent)
local function rows(list)
  for i = 1, #list, step do
    -- the thread's tag: as cmd.c encodes it (encode_tag)
    local tag = string.gsub(list[i], '[%z\1-\32\127%%{}:%*%?%[%]\\]', function(c)
      return string.format('%%%02X', string.byte(c))
    end)
    local base = prefix .. ':{' .. tag .. '}:'
    local updated = scored and list[i + 1] or redis.call('ZSCORE', recent, list[i])
    out[#out + 1] = {{redis.call('HGET', base .. 'meta', 'c'), updated},
                     redis.call('LLEN', base .. 'msgs'),
                     want_extra and redis.call('HGETALL', base .. 'extra') or 0,
                     want_last and redis.call('LINDEX', base .. 'msgs', -1) or false}
  end
end
rows(ties)
rows(range)
out[1] = #range / step
return out
