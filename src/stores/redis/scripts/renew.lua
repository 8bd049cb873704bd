-- renew.lua — extends a live lease, only for the same lease id and token.
-- KEYS[1]  lease record (hash: token, id, owner, exp, v, own — see lease-acquire.lua)
-- ARGV[1]  lease id      ARGV[2] token (decimal)      ARGV[3] ttl in ms
-- Returns: nowMs (Redis TIME in ms, a string) when renewed | 0 when lost: expired (even if
--          nobody took the key — a lost lease is never revived), released, or taken over.
-- Time: from Redis TIME only.
local rec = redis.call('HMGET', KEYS[1], 'id', 'token', 'exp', 'own')
if rec[1] ~= ARGV[1] or lease_holder_token(rec[1], rec[2], rec[4]) ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not (tonumber(rec[3]) > now) then return 0 end
redis.call('HSET', KEYS[1], 'exp', string.format('%.0f', now + tonumber(ARGV[3])))
return string.format('%.0f', now)
