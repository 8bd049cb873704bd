-- fence.lua — compares the token with the scope's high-water mark and, when it may pass,
-- applies the write and advances the mark, in one atomic step. Prepended by decimal.lua and
-- by one `local function leasehold_write(KEYS, ARGV) … end` (SET, HSET, a command list, or
-- your script body), which sees only the write's own keys and arguments. A claim (claim
-- before start, DESIGN §4) is the same decision with no write.
-- KEYS[1]  high-water mark: decimal string, never expires
-- KEYS[2]  idempotency record (decimal token, PX) — KEYS[1] again when no idempotency key
-- KEYS[3]  the claimed token: equals the mark while a claim installed it and no write at the
--          mark has been accepted since (under '>' that token's one write still passes);
--          any other value is an old claim and means nothing
-- KEYS[4…] the write's keys (in a Cluster, give them the same {scope} hash tag)
-- ARGV[1]  token (canonical decimal)    ARGV[2] policy: '>=' or '>'
-- ARGV[3]  '1' when an idempotency key is given, 'claim' for a claim, else '0'
-- ARGV[4]  the idempotency record's TTL in ms    ARGV[5…] the write's arguments
-- Returns: {'applied', writeResult} | {'duplicate'} | {'stale_fence', highWaterMark}
-- Order: check, write, then advance the mark — a write that raises an error leaves the mark
-- where it was (Redis has no rollback: writes the body made before its error remain).
-- Time: none (the idempotency record's PX is the server's clock).
local token = ARGV[1]
local claim = ARGV[3] == 'claim'
local hwm = redis.call('GET', KEYS[1]) or '0'
-- A retried key is a duplicate only at or above the mark: below it the write is stale like
-- any other of its token, whether or not the key's record has expired yet.
if ARGV[3] == '1' and not dec_lt(token, hwm) and redis.call('GET', KEYS[2]) == token then
  return {'duplicate'}
end
local claimed = token == hwm and redis.call('GET', KEYS[3]) == token
if dec_lt(token, hwm) or (ARGV[2] == '>' and token == hwm and not claimed) then
  return {'stale_fence', hwm}
end
local result = nil
if not claim then
  local wkeys, wargs = {}, {}
  for i = 4, #KEYS do wkeys[#wkeys + 1] = KEYS[i] end
  for i = 5, #ARGV do wargs[#wargs + 1] = ARGV[i] end
  result = leasehold_write(wkeys, wargs)
end
local raised = dec_lt(hwm, token)
if raised then redis.call('SET', KEYS[1], token) end
if claim then
  if raised then redis.call('SET', KEYS[3], token) end
elseif claimed then
  -- The first write at a claimed mark uses the claim: under '>' the next one is refused.
  redis.call('DEL', KEYS[3])
end
if ARGV[3] == '1' then redis.call('SET', KEYS[2], token, 'PX', ARGV[4]) end
return {'applied', result}
