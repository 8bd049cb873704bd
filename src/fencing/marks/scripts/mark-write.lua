-- mark-write.lua — the gateway's part of a RedisFence.script check: runs only when the token
-- passed the fence, before the fence advances the mark, in the same atomic step.
-- KEYS[1]  the scope's version (decimal string; absent = 0)
-- KEYS[2]  the idempotency answer hash (KEYS[1] again when there is no key)
-- ARGV[1]  expected version (canonical decimal) or '' for none
-- ARGV[2]  '1' to record the answer hash as pending, else '0'    ARGV[3] its TTL in ms
-- Returns: the new version as a decimal string, or '' when no version was asked.
-- Raises LEASEHOLD_VERSION <current> on a mismatch BEFORE writing anything, so the script
-- stops and the fence does not advance the mark (Redis has no rollback; nothing was written).
-- Time: none (the answer's PX is the server's clock).
local result = ''
if ARGV[1] ~= '' then
  local current = redis.call('GET', KEYS[1]) or '0'
  if current ~= ARGV[1] then error({err = 'LEASEHOLD_VERSION ' .. current}) end
  result = tostring(redis.call('INCR', KEYS[1]))
end
if ARGV[2] == '1' then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'state', 'pending')
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return result
