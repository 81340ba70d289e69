-- room_read.lua: the instructor's bounded read of one stream a student writes (its
-- events or its answers). A student's ACL cannot bound the size of what it appends,
-- so the instructor never takes an entry whole: an entry larger than a worker makes
-- comes back as a marker with its size, and a batch stops at a byte budget.
--
-- KEYS[1] = the stream
-- ARGV[1] = where to start, as XRANGE takes it ('-', '+', or '(' .. the last id read)
-- ARGV[2] = 'forward' (oldest first) or 'reverse' (newest first)
-- ARGV[3] = entries at most, ARGV[4] = the largest entry (bytes, names and values),
-- ARGV[5] = the bytes of kept entries after which the batch ends
--
-- Returns {{id, {field, value, ...}}, ...} as XRANGE does. An oversized entry's fields
-- are {'oversized', <its size>}, and its 'seq' when that is a short one.
local bound, reverse = ARGV[1], ARGV[2] == 'reverse'
local count, largest, budget = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local out, kept = {}, 0
while #out < count and kept < budget do
  local found
  if reverse then
    found = redis.call('XREVRANGE', KEYS[1], bound, '-', 'COUNT', 1)[1]
  else
    found = redis.call('XRANGE', KEYS[1], bound, '+', 'COUNT', 1)[1]
  end
  if not found then break end
  bound = '(' .. found[1]
  local fields, size = found[2], 0
  for _, v in ipairs(fields) do size = size + #v end
  if size > largest then
    local marker = {'oversized', tostring(size)}
    for i = 1, #fields - 1, 2 do
      if fields[i] == 'seq' and #fields[i + 1] <= 20 then
        marker[3], marker[4] = 'seq', fields[i + 1]
      end
    end
    found[2] = marker
  else
    kept = kept + size
  end
  out[#out + 1] = found
end
return out
