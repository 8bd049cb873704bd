-- acquire.lua — grants a lease on a free, released or expired key, or answers busy.
-- KEYS[1]  lease record: hash {id, owner, token, value?}, expires by PEXPIRE (server clock)
-- KEYS[2]  token counter: decimal string, no TTL (survives release and expiry)
--          Both keys carry the same {key} hash tag, so they live in one Redis Cluster slot.
-- ARGV[1]  lease id      ARGV[2] owner id      ARGV[3] ttl in ms
-- ARGV[4]  value (optional: absent means no value)
-- Returns: {1, token, serverMs}   granted (serverMs = Redis TIME in ms at the grant)
--          {1, token}             the same live lease id asked again (idempotent retry)
--          {0, owner, token, pttl, leaseIdPrefix, value|nil}   busy — and nothing written
-- Time: from Redis TIME only (the token floor) and PEXPIRE (expiry); never a client clock.
-- Token: max(counter + 1, TIME_ms * 1024). The floor keeps tokens above every earlier one
-- even when Redis lost the counter (restart without persistence, failover to a replica that
-- missed writes), as long as a key averaged < 1024 grants per ms and the clock did not step back.
local rec = redis.call('HMGET', KEYS[1], 'id', 'owner', 'token', 'value')
if rec[1] then
  if rec[1] == ARGV[1] then return {1, rec[3]} end
  return {0, rec[2], rec[3], redis.call('PTTL', KEYS[1]), string.sub(rec[1], 1, 8), rec[4]}
end
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- ms * 1024 < 2^53 until the year 2248, so this product is exact.
local floor = string.format('%.0f', ms * 1024)
local token = dec_incr(redis.call('GET', KEYS[2]) or '0')
if dec_lt(token, floor) then token = floor end
if dec_lt(LEASEHOLD_MAX_TOKEN, token) then
  return redis.error_reply('LEASEHOLD token space of this key is exhausted')
end
redis.call('SET', KEYS[2], token)
if ARGV[4] then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'owner', ARGV[2], 'token', token, 'value', ARGV[4])
else
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'owner', ARGV[2], 'token', token)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, token, string.format('%.0f', ms)}
