-- lease.lua — the lease operations shared by acquire.lua, release.lua and handoff.lua
-- (prepended after decimal.lua by scripts.ts). Each entry script is one call into these.
--
-- A key's lease record is one hash that never expires (so its token never resets):
--   token  last granted token (decimal string)      id     lease id of the holder
--   owner  owner id      exp  expiry, Redis TIME in ms      v  '=' .. value, or ''
-- One hash holds the record and its counter: always one Redis Cluster slot.
-- Time: from Redis TIME only (expiry and the token floor); never a client clock.

local function lease_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Grants a lease on a free, released or expired key, or answers busy (writing nothing).
-- Returns: {1, token, nowMs}   granted (nowMs = Redis TIME in ms at the grant)
--          {1, token}          the same live lease id asked again (idempotent retry)
--          {0, owner, token, remainingMs, leaseIdPrefix, v}   busy
-- Token: max(last + 1, TIME_ms * 1024). The floor keeps tokens above every earlier one even
-- when Redis lost the record (restart without persistence, failover to a replica that missed
-- writes), as long as a key never saw 1024 grants within one ms and the clock did not step back.
local function lease_acquire(record, id, owner, ttl_ms, v)
  local rec = redis.call('HMGET', record, 'id', 'exp', 'token', 'owner', 'v')
  local now = lease_now_ms()
  if rec[1] and tonumber(rec[2]) > now then
    if rec[1] == id then return {1, rec[3]} end
    return {0, rec[4], rec[3], tonumber(rec[2]) - now, string.sub(rec[1], 1, 8), rec[5]}
  end
  -- now * 1024 < 2^53 until the year 2248, so this product is exact.
  local floor = string.format('%.0f', now * 1024)
  local token = dec_incr(rec[3] or '0')
  if dec_lt(token, floor) then token = floor end
  if dec_lt(LEASEHOLD_MAX_TOKEN, token) then
    return redis.error_reply('LEASEHOLD token space of this key is exhausted')
  end
  redis.call('HSET', record, 'token', token, 'id', id, 'owner', owner,
    'exp', string.format('%.0f', now + tonumber(ttl_ms)), 'v', v)
  return {1, token, string.format('%.0f', now)}
end

-- Ends a lease, only for the same lease id and token; the token field stays.
-- Returns: 1 released | 0 not owner (another lease holds or held the key since)
local function lease_release(record, id, token)
  local rec = redis.call('HMGET', record, 'id', 'token')
  if rec[1] ~= id or rec[2] ~= token then return 0 end
  redis.call('HDEL', record, 'id', 'owner', 'exp', 'v')
  return 1
end
