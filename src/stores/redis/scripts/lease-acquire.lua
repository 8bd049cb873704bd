-- lease-acquire.lua — lease_acquire, shared by acquire.lua and handoff.lua (prepended after
-- decimal.lua by scripts.ts). Each entry script is one call into it.
--
-- A key's lease record is one hash that never expires (so its token never resets):
--   token  the last token granted or reserved (decimal string)      id  lease id of the holder
--   owner  owner id      exp  expiry, Redis TIME in ms      v  '=' .. value, or ''
--   own    '<t>:<lease id>' when that grant reserved a token block (decision 007): its own
--          token t, below `token` (the block's top). Valid only while its lease id is the
--          record's `id`; otherwise (absent, or left by an earlier grant) the holder's token
--          is `token`. So a process of an earlier version, which reads `token` as the last
--          token, still grants above every reserved token.
--   ld     '<ms>:<lease id>' when that grant asked for a lock-delay: after its expiry (not a
--          release, which deletes `id`) no grant until exp + ms. Valid only while its lease id
--          is the record's `id`, like `own`, so a later grant never has to delete it.
-- One hash holds the record and its counter: always one Redis Cluster slot.
-- Time: from Redis TIME only (expiry and the token floor); never a client clock.
--
-- Redis runs the whole script body on every EVALSHA, so each `local function` here is a new
-- closure per call: only what acquiring needs is defined here (release is lease-release.lua).

local function lease_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The canonical decimal string of n, an integer with 0 <= n < 2^53 (a time, not a token).
-- Not '%.0f', which goes through libc's arbitrary-precision float printing (a measurable part
-- of an acquire), and not '%d' alone, which truncates where C long has 32 bits: two halves
-- below 10^9 instead.
local function lease_int_str(n)
  if n < 1e9 then return string.format('%d', n) end
  local hi = math.floor(n / 1e9)
  local lo = n - hi * 1e9
  if lo < 0 then hi, lo = hi - 1, lo + 1e9 end
  return string.format('%d%09d', hi, lo)
end

-- Token arithmetic is on canonical decimal strings only, never on Lua numbers: a double holds
-- every integer only up to 2^53, and a token above it would round (an odd block top above
-- 2^53 came out one lower, so the next grant reused it). The small operand n (a block size,
-- a carry) is a Lua number below 10^9; each digit step stays far below 2^53.

-- The canonical decimal string of s + n, for canonical decimal s and integer 0 <= n < 10^9.
local function dec_add(s, n)
  local tail, i = '', #s
  while n > 0 do
    local acc = n + (i >= 1 and string.byte(s, i) - 48 or 0)
    tail = string.char(48 + acc % 10) .. tail
    n = math.floor(acc / 10)
    i = i - 1
  end
  if i < 1 then return tail end
  return string.sub(s, 1, i) .. tail
end

-- The token floor now × 1024 as a canonical decimal string, for now = Redis TIME in ms. Built
-- from two halves that are each exact small integers (now = a × 10^6 + b): the product itself,
-- about 2^51 today, is never a Lua number.
local function lease_floor(now)
  local a = math.floor(now / 1e6)
  local lo = (now - a * 1e6) * 1024
  local carry = math.floor(lo / 1e6)
  local hi = a * 1024 + carry
  lo = lo - carry * 1e6
  if hi == 0 then return lease_int_str(lo) end
  return lease_int_str(hi) .. string.format('%06d', lo)
end

-- Grants a lease on a free, released or expired key, or answers busy (writing nothing).
-- block: how many tokens the grant reserves (1..64, a number): its own, and the next
-- block − 1 for the client's local successors; the next grant comes after all of them.
-- channel: the key's pub/sub channel, or nil. A grant publishes 'granted' on it (a release
-- publishes ''), so that watchers of the key — election observers — learn of every new
-- holder; waiters ignore it.
-- Returns: {1, token, nowMs}   granted (nowMs = Redis TIME in ms at the grant, an integer)
--          {1, token}          the same live lease id asked again (idempotent retry)
--          {0, owner, token, remainingMs, leaseIdPrefix, v}   busy
--          {0, owner, token, 0, leaseIdPrefix, v, delayLeftMs}  busy: the expired holder's lock-delay
-- lock_delay: this grant's lock-delay in ms (a decimal string, or nil/'0' for none);
-- ignore_delay: '1' to grant even during the lock-delay an expired holder left.
-- epoch_floor: the fencing epoch's floor (canonical decimal, '0' for none) as the store last
-- read it from `<prefix>epoch` (epoch.ts); `leasehold epoch` also raises every existing
-- record to it, so it matters for keys that have no record.
-- Token: max(last + 1, TIME_ms * 1024, epoch_floor + 1), last = the record's token (the top
-- of the previous grant's block). The time floor keeps tokens above every earlier one even
-- when Redis lost the record (restart without persistence, failover to a replica that missed
-- writes), as long as a key never used 1024 tokens (grants times their blocks) within one ms
-- and the clock did not step back; the epoch floor is the explicit version of it.
local function lease_acquire(record, id, owner, ttl_ms, v, block, channel, epoch_floor,
    lock_delay, ignore_delay)
  -- A grant needs only these four fields; the holder's owner and value are read for a busy
  -- answer alone. Each field of an HMGET costs about as much as a short command (server CPU
  -- per call, busy machine, 2026-12-02: 6 fields 4.0 µs, 4 fields 2.5 µs).
  local rec = redis.call('HMGET', record, 'id', 'exp', 'token', 'own')
  local now = lease_now_ms()
  if rec[1] and tonumber(rec[2]) > now then
    local held = lease_holder_token(rec[1], rec[3], rec[4])
    if rec[1] == id then return {1, held} end
    local holder = redis.call('HMGET', record, 'owner', 'v')
    return {0, holder[1], held, tonumber(rec[2]) - now, string.sub(rec[1], 1, 8), holder[2]}
  end
  -- Expired without a release (a release deletes `id`): read its lock-delay, if any. Only on
  -- this path, so a grant of a released or new key reads nothing more.
  if rec[1] and ignore_delay ~= '1' then
    local ld = redis.call('HGET', record, 'ld')
    local sep = ld and string.find(ld, ':', 1, true)
    if sep and string.sub(ld, sep + 1) == rec[1] then
      local left = tonumber(rec[2]) + tonumber(string.sub(ld, 1, sep - 1)) - now
      if left > 0 then
        local holder = redis.call('HMGET', record, 'owner', 'v')
        return {0, holder[1], lease_holder_token(rec[1], rec[3], rec[4]), 0,
          string.sub(rec[1], 1, 8), holder[2], left}
      end
    end
  end
  -- max(last + 1, floor): the floor when last < floor (the usual case, time having moved on
  -- since the last grant), so the increment is worked out only when the counter is ahead.
  local last = rec[3] or '0'
  local floor = lease_floor(now)
  local token = dec_lt(last, floor) and floor or dec_incr(last)
  if epoch_floor and not dec_lt(epoch_floor, token) then token = dec_incr(epoch_floor) end
  local top = block > 1 and dec_add(token, block - 1) or token
  if dec_lt(LEASEHOLD_MAX_TOKEN, top) then
    return redis.error_reply('LEASEHOLD token space of this key is exhausted')
  end
  local exp = lease_int_str(now + tonumber(ttl_ms))
  if block > 1 or rec[4] then
    -- Also when an earlier grant left `own`: a retried request with this lease id must not
    -- find that one valid.
    redis.call('HSET', record, 'token', top, 'id', id, 'owner', owner, 'exp', exp, 'v', v,
      'own', token .. ':' .. id)
  else
    redis.call('HSET', record, 'token', token, 'id', id, 'owner', owner, 'exp', exp, 'v', v)
  end
  if lock_delay and lock_delay ~= '0' then redis.call('HSET', record, 'ld', lock_delay .. ':' .. id) end
  if channel then redis.call('PUBLISH', channel, 'granted') end
  return {1, token, now}
end
