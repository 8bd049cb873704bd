-- write-set.lua — the fenced write of RedisFence.set. KEYS[1] target; ARGV[1] value.
-- Returns: 'OK'.
local function leasehold_write(KEYS, ARGV)
  return redis.call('SET', KEYS[1], ARGV[1])
end
