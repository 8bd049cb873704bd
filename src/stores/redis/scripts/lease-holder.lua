-- lease-holder.lua — lease_holder_token, prepended by scripts.ts to every lease script that
-- compares or reports the holder's token (the record is described in lease-acquire.lua).

-- The holder's own token from record fields id, token and own: `own` ('<t>:<lease id>', a
-- grant that reserved a token block) when its lease id is the holder's, else `token`.
local function lease_holder_token(id, token, own)
  if own then
    local sep = string.find(own, ':', 1, true)
    if sep and string.sub(own, sep + 1) == id then return string.sub(own, 1, sep - 1) end
  end
  return token
end
