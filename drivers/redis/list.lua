-- list.lua: a batch of a thread listing on one server (list.c), in one round
-- trip: the candidates of one index set after a position, and each one's
-- rows. Reads only; the keys are built here from the set's members, which one
-- server allows (a cluster reads them with separate commands). No prelude.
-- ARGV: set key, mode ('lexasc', 'lexdesc', 'desc', 'asc'), position time ('' = none),
-- position id, count, key prefix P, extra ('1'/'0'), last message ('1'/'0').
-- Returns {n, ties, range, rows...}: n the range's size (ties and range are
-- the ZRANGE replies: the client keeps the ties after the position, which
-- needs a byte order Lua's string compare does not promise), then per member
-- of ties and range, in that order: {HMGET meta c u, LLEN, HGETALL extra or 0,
-- the last record or false}.
local key, mode, t, id, k = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local prefix, want_extra, want_last = ARGV[6], ARGV[7] == '1', ARGV[8] == '1'
local ties, range = {}, {}
local lex = mode == 'lexasc' or mode == 'lexdesc'
if lex then
  local from = t ~= '' and '(' .. id or nil
  if mode == 'lexdesc' then
    range = redis.call('ZREVRANGEBYLEX', key, from or '+', '-', 'LIMIT', 0, k)
  else
    range = redis.call('ZRANGEBYLEX', key, from or '-', '+', 'LIMIT', 0, k)
  end
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
    out[#out + 1] = {redis.call('HMGET', base .. 'meta', 'c', 'u'),
                     redis.call('LLEN', base .. 'msgs'),
                     want_extra and redis.call('HGETALL', base .. 'extra') or 0,
                     want_last and redis.call('LINDEX', base .. 'msgs', -1) or false}
  end
end
rows(ties)
rows(range)
out[1] = #range / step
return out
