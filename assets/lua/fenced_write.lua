-- fenced_write.lua: the storage checks fencing tokens before it accepts a write.
--
-- KEYS[1] = the storage list, KEYS[2] = the highest token the storage has accepted
-- ARGV[1] = the writer's fencing token, ARGV[2] = the entry to append,
-- ARGV[3] = how to compare: '<=' (accept highest <= token) or '<' (highest < token)
--
-- A write whose token is LOWER than one already accepted comes from a holder whose
-- lease has since passed to someone else: it is rejected. An EQUAL token is accepted
-- with '<=', because it comes from the current holder writing more than once during
-- its lease (unless the counter handed the same token out twice); '<' refuses it.
-- Returns {1, highest, n} when accepted, n the list's length after the append: the
-- write's place in the storage's own order, counted in the same atomic step (the
-- order replies reach the writers can differ); {0, highest, 0} when rejected.
local highest = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < highest or (ARGV[3] == '<' and token == highest) then
  return {0, highest, 0}
end
redis.call('SET', KEYS[2], token)
local n = redis.call('RPUSH', KEYS[1], ARGV[2])
return {1, token, n}
