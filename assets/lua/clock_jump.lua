-- This server's clock jumps ARGV[1] ms ahead: each key given (the run's own, by
-- name) that has a deadline reaches it that much sooner, or is gone at once if it
-- had no more than that left. Keys without a deadline, or absent, are untouched.
-- Returns how many keys it shortened or expired.
local jump = tonumber(ARGV[1])
local changed = 0
for _, key in ipairs(KEYS) do
  local left = redis.call('PTTL', key)
  if left > 0 then
    if left <= jump then
      redis.call('DEL', key)
    else
      redis.call('PEXPIRE', key, left - jump)
    end
    changed = changed + 1
  end
end
return changed
