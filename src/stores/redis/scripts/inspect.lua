-- inspect.lua — a key's state for observers, read in one atomic step. Writes nothing.
-- KEYS[1]  lease record (hash: token, id, owner, exp, v — see lease-acquire.lua)
-- Returns: {lastToken} when no live holder (lastToken: the last token granted or reserved)
--          {lastToken, owner, token, remainingMs, leaseIdPrefix, v} with a live holder
-- Time: from Redis TIME only.
local rec = redis.call('HMGET', KEYS[1], 'id', 'exp', 'token', 'owner', 'v', 'own')
local last = rec[3] or '0'
if not rec[1] then return {last} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(rec[2]) - now
if left <= 0 then return {last} end
return {last, rec[4], lease_holder_token(rec[1], rec[3], rec[6]), left, string.sub(rec[1], 1, 8), rec[5]}
