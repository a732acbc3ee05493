-- swaps.lua: the swaps of a put with log references (put_refs.lua, after
-- prelude.lua and cp_prelude.lua). A swap replaces a pending write or a channel
-- value of the put's parent by a reference, only while it is stored exactly as
-- the client last read it (type and bytes), and raises that checkpoint's
-- log_length to at least the reference's end. Records hold bin objects, which
-- Redis's cmsgpack cannot decode, so their headers are read here by hand; a
-- record that does not decode is left as it is (the swap is skipped), so no
-- error can stop the script between its writes.

-- The payload of the str or bin object at byte `at` (1-based): first, last.
local function payload_at(s, at)
  local b = string.byte(s, at)
  local size = {[0xc4] = 1, [0xc5] = 2, [0xc6] = 4, [0xd9] = 1, [0xda] = 2, [0xdb] = 4}
  if b >= 0xa0 and b <= 0xbf then return at + 1, at + b - 0xa0 end
  local k = size[b]
  if not k then error('not a str or bin') end
  local n = 0
  for i = 1, k do n = n * 256 + string.byte(s, at + i) end
  return at + k + 1, at + k + n
end
-- Byte offsets after each of the k objects from offset off (0-based, as
-- cmsgpack.unpack_one counts).
local function skip(s, off, k)
  for _ = 1, k do
    off = cmsgpack.unpack_one(s, off)
    if off < 0 then error('record too short') end
  end
  return off
end
-- A value [type, bytes] at offset off: true when it is (type, bytes) and the
-- record ends with it.
local function value_is(s, off, type, bytes)
  local o, t = cmsgpack.unpack_one(s, off)
  if o < 0 then error('record too short') end
  local first, last = payload_at(s, o + 1)
  if last ~= #s then error('record too long') end
  return t == type and string.sub(s, first, last) == bytes
end
-- A checkpoint record (cp_prelude.lua): the offset of its log_length (the last
-- object of the tail [parent, metadata, body type, body, log_length]) and it.
local function log_length_at(rec)
  local off = skip(rec, 0, 3)
  if string.byte(rec, off + 1) ~= 0x95 then error('tail is not an array of 5') end
  off = skip(rec, off + 1, 3)
  if string.byte(rec, off + 1) == 0xc0 then
    off = off + 1
  else
    local _, last = payload_at(rec, off + 1)
    off = last
  end
  local o, n = cmsgpack.unpack_one(rec, off)
  if o ~= -1 or type(n) ~= 'number' then error('log_length is not the last integer') end
  return off, n
end
-- kind 'w': a pending write [task, path, idx, channel, type, bytes] of WRITES,
-- whose last two objects become `new`; 'c': a channel value [type, bytes] of
-- BLOBS, which becomes `new`. The new record, or nil when it is not as expected.
local function swapped(kind, rec, type, bytes, new)
  if kind == 'w' then
    if string.byte(rec, 1) ~= 0x96 then error('write is not an array of 6') end
    local off = skip(rec, 1, 4)
    if value_is(rec, off, type, bytes) then return string.sub(rec, 1, off) .. new end
  else
    if string.byte(rec, 1) ~= 0x92 then error('value is not an array of 2') end
    if value_is(rec, 1, type, bytes) then return new end
  end
  return nil
end
-- One swap: kind, field of the value, checkpoint field NS\0ID, old type, old
-- bytes, the new record part, the reference's end. Returns true when applied.
local function swap(kind, field, cpf, type, bytes, new, ends)
  local key = kind == 'w' and WRITES or BLOBS
  local rec, cprec = redis.call('HGET', key, field), redis.call('HGET', CP, cpf)
  if not rec or not cprec then return false end
  local ok, now = pcall(swapped, kind, rec, type, bytes, new)
  local ok2, off, was = pcall(log_length_at, cprec)
  if not (ok and now and ok2) then return false end
  redis.call('HSET', key, field, now)
  if was < ends then
    redis.call('HSET', CP, cpf, string.sub(cprec, 1, off) .. cmsgpack.pack(ends))
    redis.call('ZREM', CPIDX, loglen_member(was, cpf))
    redis.call('ZADD', CPIDX, 0, loglen_member(ends, cpf))
  end
  return true
end
