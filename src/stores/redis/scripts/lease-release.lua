-- lease-release.lua — lease_release, shared by release.lua and handoff.lua (prepended by
-- scripts.ts; the record is described in lease-acquire.lua). Needs no decimal.lua: tokens
-- are compared as the exact strings they are stored as.

-- Ends a lease, only for the same lease id and token (the holder's own token: `own` when it
-- is valid for the id, else `token` — see lease-acquire.lua); the token field stays.
-- Returns: 1 released | 0 not owner (another lease holds or held the key since)
local function lease_release(record, id, token)
  local rec = redis.call('HMGET', record, 'id', 'token', 'own')
  if rec[1] ~= id then return 0 end
  local held = rec[2]
  if rec[3] then
    local sep = string.find(rec[3], ':', 1, true)
    if sep and string.sub(rec[3], sep + 1) == id then held = string.sub(rec[3], 1, sep - 1) end
  end
  if held ~= token then return 0 end
  redis.call('HDEL', record, 'id', 'owner', 'exp', 'v')
  return 1
end
