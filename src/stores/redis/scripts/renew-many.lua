-- renew-many.lua — renews many leases in one call, each exactly as renew.lua would on its own.
-- KEYS[i]        lease record of lease i (hash: token, id, owner, exp, v, own — see
--                lease-acquire.lua); on a Cluster every key of one call is in one slot.
-- ARGV[3i-2]     lease id of lease i     ARGV[3i-1] its token (decimal string, compared as a
--                string, never a double)  ARGV[3i] its ttl in ms
-- Returns: { nowMs (Redis TIME in ms, a string), r1, r2, … } with ri = 1 when lease i was
--          renewed, 0 when lost (expired even if nobody took the key, released, taken over).
-- Time: from Redis TIME only, read once for the whole call.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = { string.format('%.0f', now) }
for i = 1, #KEYS do
  local id = ARGV[3 * i - 2]
  local rec = redis.call('HMGET', KEYS[i], 'id', 'token', 'exp', 'own')
  local exp = tonumber(rec[3])
  if rec[1] == id and lease_holder_token(rec[1], rec[2], rec[4]) == ARGV[3 * i - 1]
    and exp ~= nil and exp > now then
    redis.call('HSET', KEYS[i], 'exp', string.format('%.0f', now + tonumber(ARGV[3 * i])))
    out[i + 1] = 1
  else
    out[i + 1] = 0
  end
end
return out
