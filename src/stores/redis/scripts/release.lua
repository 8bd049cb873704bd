-- release.lua — ends a lease, only for the same lease id and token, and wakes waiters.
-- KEYS[1]  lease record (hash: token, id, owner, exp, v); the token field stays
-- ARGV[1]  lease id      ARGV[2] token (decimal)      ARGV[3] release channel (pub/sub)
-- Returns: 1 released | 0 not owner (another lease holds or held the key since)
-- Time: none needed.
local rec = redis.call('HMGET', KEYS[1], 'id', 'token')
if rec[1] ~= ARGV[1] or rec[2] ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], 'id', 'owner', 'exp', 'v')
redis.call('PUBLISH', ARGV[3], '')
return 1
