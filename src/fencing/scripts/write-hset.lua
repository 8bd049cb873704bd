-- write-hset.lua — the fenced write of RedisFence.hset. KEYS[1] target hash;
-- ARGV field, value, field, value … Returns: the number of fields added.
local function leasehold_write(KEYS, ARGV)
  return redis.call('HSET', KEYS[1], unpack(ARGV))
end
