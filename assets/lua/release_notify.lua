-- release_notify.lua: compare-and-delete, then tell the waiters (wait = "notify").
--
-- KEYS[1] = the lock key; ARGV[1] = this holder's random value;
-- ARGV[2] = the run's release channel (fencelab:{run}:released)
--
-- As release.lua, plus a PUBLISH in the same atomic step when the lock was ours:
-- a waiter subscribed to the channel tries again at once instead of sleeping out a
-- lease nobody holds any more. Returns 1 if we deleted our own lock, 0 if not.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
