-- lease-release.lua — lease_release, shared by release.lua and handoff.lua (prepended by
-- scripts.ts; the record is described in lease-acquire.lua). Needs no decimal.lua: tokens
-- are compared as the exact strings they are stored as.

-- Ends a lease, only for the same lease id and token; the token field stays.
-- Returns: 1 released | 0 not owner (another lease holds or held the key since)
local function lease_release(record, id, token)
  local rec = redis.call('HMGET', record, 'id', 'token')
  if rec[1] ~= id or rec[2] ~= token then return 0 end
  redis.call('HDEL', record, 'id', 'owner', 'exp', 'v')
  return 1
end
