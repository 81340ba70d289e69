-- renew.lua: extend the lease, but only while we still own the lock.
--
-- KEYS[1] = the lock key; ARGV[1] = this holder's random value, ARGV[2] = new lease in ms
--
-- Returns 1 when the lease was extended, 0 when the lock is no longer ours. A renewal
-- that simply SET the key again would silently re-acquire a lock we had already lost,
-- hiding the moment when someone else held it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
