-- rec_time.lua: the created_at of a message record (msgpack [created_at, role,
-- bytes], packed by the client) read off its first bytes, without decoding
-- the record. Before index.lua and list.lua.
local REC_WIDTH = {[0xcc] = 1, [0xcd] = 2, [0xce] = 4, [0xcf] = 8,
                   [0xd0] = 1, [0xd1] = 2, [0xd2] = 4, [0xd3] = 8}
-- created_at (µs) as a number, or nil (no record, or not an integer >= 0)
local function rec_time(rec)
  local t = rec and string.byte(rec, 2)
  if not t then return nil end
  if t < 0x80 then return t end
  local w = REC_WIDTH[t]
  if not w or (t >= 0xd0 and string.byte(rec, 3) >= 0x80) then return nil end
  local v = 0
  for i = 3, 2 + w do v = v * 256 + string.byte(rec, i) end
  return v
end
