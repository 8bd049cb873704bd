-- epoch-raise.lua — `leasehold epoch` on one lease record: raises its counter to the new floor
-- and clears its holder (a lease restored from an old RDB, or kept by a replica that missed
-- writes, is not trusted), then wakes its waiters.
-- KEYS[1]  lease record (see lease-acquire.lua)
-- ARGV[1]  the new floor, canonical decimal      ARGV[2] the key's pub/sub channel
-- Returns: 1 when the record changed | 0 when it was already at or above the floor and free.
-- Time: none needed.
local rec = redis.call('HMGET', KEYS[1], 'token', 'id', 'own')
local changed = 0
if not rec[1] or dec_lt(rec[1], ARGV[1]) then
  redis.call('HSET', KEYS[1], 'token', ARGV[1])
  changed = 1
end
if rec[2] or rec[3] then
  redis.call('HDEL', KEYS[1], 'id', 'owner', 'exp', 'v', 'own')
  changed = 1
end
if changed == 1 then redis.call('PUBLISH', ARGV[2], '') end
return changed
