-- release.lua — ends a lease, only for the same lease id and token, and wakes waiters.
-- KEYS[1]  lease record (hash {id, owner, token, value?}); the token counter is not touched
-- ARGV[1]  lease id      ARGV[2] token (decimal)      ARGV[3] release channel (pub/sub)
-- Returns: 1 released | 0 not owner (expired, or another lease holds the key)
-- Time: none needed.
local rec = redis.call('HMGET', KEYS[1], 'id', 'token')
if rec[1] ~= ARGV[1] or rec[2] ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], '')
return 1
