-- function-args.lua — checks the arguments of a call of the leasehold_fence library's
-- functions (FCALL from any client), which the script path leaves to RedisFence. Prepended
-- after decimal.lua. Same KEYS and ARGV as fence.lua; `claim` is true for leasehold_fence_claim.
-- Returns: nil when the call is well formed, else an error reply naming what is wrong.
-- Time: none.
local function leasehold_bad_call(KEYS, ARGV, claim)
  local function bad(what) return redis.error_reply('ERR leasehold fence: ' .. what) end
  if #KEYS < 3 then
    return bad('KEYS must start with the mark, the idempotency record (or the mark again) and the claim marker')
  end
  local token = ARGV[1]
  if type(token) ~= 'string' or not string.match(token, '^[1-9][0-9]*$') or #token > 19
      or (#token == 19 and token > LEASEHOLD_MAX_TOKEN) then
    return bad('the token (ARGV[1]) must be a positive 64-bit integer in decimal, no sign or leading zeros')
  end
  if ARGV[2] ~= '>=' and ARGV[2] ~= '>' then return bad("the policy (ARGV[2]) must be '>=' or '>'") end
  if claim then
    if ARGV[3] ~= 'claim' then return bad("ARGV[3] must be 'claim' for a claim") end
  elseif ARGV[3] ~= '0' and ARGV[3] ~= '1' then
    return bad("ARGV[3] must be '1' with an idempotency key, else '0'")
  end
  local ttl = tonumber(ARGV[4])
  if ttl == nil or ttl < 1 or ttl ~= math.floor(ttl) then
    return bad('the idempotency TTL (ARGV[4]) must be a whole number of milliseconds')
  end
  return nil
end
