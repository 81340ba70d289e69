-- release.lua: compare-and-delete. Delete the lock only if it still holds our value.
--
-- KEYS[1] = the lock key; ARGV[1] = this holder's random value
--
-- A plain DEL would remove whoever holds the lock now, even a newer holder whose
-- lease began after ours expired. Returns 1 if we deleted our own lock, 0 if the
-- lock was no longer ours (expired, or taken by someone else).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
