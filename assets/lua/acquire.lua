-- acquire.lua: take the lock and hand out a fencing token in one atomic step.
--
-- KEYS[1] = the lock key, KEYS[2] = the fence counter
-- ARGV[1] = this holder's random value, ARGV[2] = lease length in ms (0 = no expiry)
--
-- Returns {1, token} when the lock was granted, or {0, pttl} when someone else
-- holds it: pttl is the holder's remaining lease in ms (-1 if it never expires),
-- so a waiter can sleep exactly until the lease runs out instead of polling.
local granted
if tonumber(ARGV[2]) > 0 then
  granted = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
else
  granted = redis.call('SET', KEYS[1], ARGV[1], 'NX')
end
if granted then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
