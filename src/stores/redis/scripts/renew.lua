-- renew.lua — extends a live lease, only for the same lease id and token.
-- KEYS[1]  lease record (hash {id, owner, token, value?}, PEXPIRE'd)
-- ARGV[1]  lease id      ARGV[2] token (decimal)      ARGV[3] ttl in ms
-- Returns: serverMs (Redis TIME in ms, a string) when renewed | 0 when lost (expired, released,
--          or another lease holds the key). A lost lease is never revived: an expired record
--          is gone, and a new grant has another id.
-- Time: from Redis TIME only; expiry by PEXPIRE at the server.
local rec = redis.call('HMGET', KEYS[1], 'id', 'token')
if rec[1] ~= ARGV[1] or rec[2] ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local t = redis.call('TIME')
return string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
