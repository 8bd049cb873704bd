-- release.lua — ends a lease, only for the same lease id and token, and wakes waiters.
-- KEYS[1]  lease record (see lease-acquire.lua); the token field stays
-- ARGV[1]  lease id      ARGV[2] token (decimal)      ARGV[3] release channel (pub/sub)
-- Returns: 1 released | 0 not owner (another lease holds or held the key since)
-- Time: none needed.
local released = lease_release(KEYS[1], ARGV[1], ARGV[2])
if released == 1 then redis.call('PUBLISH', ARGV[3], '') end
return released
