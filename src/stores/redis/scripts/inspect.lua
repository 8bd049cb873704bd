-- inspect.lua — a key's state for observers, read in one atomic step. Writes nothing.
-- KEYS[1]  lease record (hash {id, owner, token, value?})      KEYS[2] token counter
-- Returns: {lastToken} when no live holder
--          {lastToken, owner, token, pttl, leaseIdPrefix, value|nil} with a live holder
-- Time: remaining time by PTTL, the server's clock.
local last = redis.call('GET', KEYS[2]) or '0'
local rec = redis.call('HMGET', KEYS[1], 'id', 'owner', 'token', 'value')
if not rec[1] then return {last} end
return {last, rec[2], rec[3], redis.call('PTTL', KEYS[1]), string.sub(rec[1], 1, 8), rec[4]}
