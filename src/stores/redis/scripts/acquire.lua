-- acquire.lua — grants a lease on a free, released or expired key, or answers busy.
-- KEYS[1]  the key's lease record (see lease-acquire.lua)
-- ARGV[1]  lease id      ARGV[2] owner id      ARGV[3] ttl in ms
-- ARGV[4]  '=' .. value, or '' for none      ARGV[5] token block (1..64; absent: 1)
-- ARGV[6]  the key's pub/sub channel, told 'granted' on a grant (absent: nobody is told)
-- ARGV[7]  the fencing epoch floor, canonical decimal (absent: none; see lease-acquire.lua)
-- ARGV[8]  this grant's lock-delay in ms (absent or '0': none)
-- ARGV[9]  '1' to grant during an expired holder's lock-delay (absent: honour it)
-- Returns: what lease_acquire returns (granted, idempotent re-grant, or busy — nothing written).
return lease_acquire(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5] or '1'),
  ARGV[6], ARGV[7], ARGV[8], ARGV[9])
