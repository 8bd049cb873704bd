-- write-commands.lua — the fenced write of RedisFence.commands: a list of commands.
-- ARGV, per command: name, number of keys, number of other arguments, then those arguments;
-- the keys come from KEYS in order. Each command is called as name, keys…, arguments….
-- Returns: the list of the commands' replies.
local function leasehold_write(KEYS, ARGV)
  local out, k, a = {}, 1, 1
  while a <= #ARGV do
    local call = {ARGV[a]}
    local nk, na = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
    for _ = 1, nk do call[#call + 1] = KEYS[k]; k = k + 1 end
    for _ = 1, na do call[#call + 1] = ARGV[a]; a = a + 1 end
    out[#out + 1] = redis.call(unpack(call))
  end
  return out
end
