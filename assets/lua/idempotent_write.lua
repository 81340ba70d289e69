-- idempotent_write.lua: a storage that knows nothing of fencing tokens, but remembers
-- idempotency keys (as a payment gateway does): a second write with the same key is
-- recognised as a repeat and not applied again.
--
-- KEYS[1] = the storage list, KEYS[2] = the set of idempotency keys already applied
-- ARGV[1] = the write's idempotency key (derived from the job), ARGV[2] = the entry
--
-- Returns the list's length after the append when applied (at least 1: the write's
-- place in the storage's own order, counted in the same atomic step), 0 when the key
-- had been applied before.
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  return redis.call('RPUSH', KEYS[1], ARGV[2])
end
return 0
