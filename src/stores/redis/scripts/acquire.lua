-- acquire.lua — grants a lease on a free, released or expired key, or answers busy.
-- KEYS[1]  the key's lease record, a hash that never expires (so its token never resets):
--            token  last granted token (decimal string)      id     lease id of the holder
--            owner  owner id      exp  expiry, Redis TIME in ms      v  '=' .. value, or ''
--          One hash holds the record and its counter: always one Redis Cluster slot.
-- ARGV[1]  lease id      ARGV[2] owner id      ARGV[3] ttl in ms
-- ARGV[4]  '=' .. value, or '' for none
-- Returns: {1, token, nowMs}   granted (nowMs = Redis TIME in ms at the grant)
--          {1, token}          the same live lease id asked again (idempotent retry)
--          {0, owner, token, remainingMs, leaseIdPrefix, v}   busy — and nothing written
-- Time: from Redis TIME only (expiry and the token floor); never a client clock.
-- Token: max(last + 1, TIME_ms * 1024). The floor keeps tokens above every earlier one even
-- when Redis lost the record (restart without persistence, failover to a replica that missed
-- writes), as long as a key never saw 1024 grants within one ms and the clock did not step back.
local rec = redis.call('HMGET', KEYS[1], 'id', 'exp', 'token', 'owner', 'v')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if rec[1] and tonumber(rec[2]) > now then
  if rec[1] == ARGV[1] then return {1, rec[3]} end
  return {0, rec[4], rec[3], tonumber(rec[2]) - now, string.sub(rec[1], 1, 8), rec[5]}
end
-- now * 1024 < 2^53 until the year 2248, so this product is exact.
local floor = string.format('%.0f', now * 1024)
local token = dec_incr(rec[3] or '0')
if dec_lt(token, floor) then token = floor end
if dec_lt(LEASEHOLD_MAX_TOKEN, token) then
  return redis.error_reply('LEASEHOLD token space of this key is exhausted')
end
redis.call('HSET', KEYS[1], 'token', token, 'id', ARGV[1], 'owner', ARGV[2],
  'exp', string.format('%.0f', now + tonumber(ARGV[3])), 'v', ARGV[4])
return {1, token, string.format('%.0f', now)}
