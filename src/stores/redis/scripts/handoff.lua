-- handoff.lua — releases one lease and attempts another acquisition of the same key, in one
-- step: a client passing its key straight to its own next waiter.
-- KEYS[1]  lease record (see lease-acquire.lua)
-- ARGV[1]  releasing lease id      ARGV[2] its token (decimal)      ARGV[3] release channel
-- ARGV[4]  acquiring lease id      ARGV[5] owner id      ARGV[6] ttl in ms
-- ARGV[7]  '=' .. value, or '' for none      ARGV[8] token block (1..64)
-- ARGV[9]  the fencing epoch floor, canonical decimal (absent: none; see lease-acquire.lua)
-- ARGV[10] lock-delay in ms, ARGV[11] '1' to ignore one (as acquire.lua's ARGV[8] and [9])
-- Returns: {released (1|0), acquire reply...} — the acquire reply as lease_acquire's (lease-acquire.lua).
-- Waiters elsewhere are told of a release only when the key ends up free: a key handed over
-- is not free (the grant itself publishes 'granted', for observers).
local released = lease_release(KEYS[1], ARGV[1], ARGV[2])
local acquired = lease_acquire(KEYS[1], ARGV[4], ARGV[5], ARGV[6], ARGV[7],
  tonumber(ARGV[8] or '1'), ARGV[3], ARGV[9], ARGV[10], ARGV[11])
if released == 1 and acquired[1] == 0 then redis.call('PUBLISH', ARGV[3], '') end
table.insert(acquired, 1, released)
return acquired
