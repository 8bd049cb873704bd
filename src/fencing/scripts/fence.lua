-- fence.lua — compares the token with the scope's high-water mark and, when it may pass,
-- applies the write and advances the mark, in one atomic step. Prepended by decimal.lua and
-- by one `local function leasehold_write(KEYS, ARGV) … end` (SET, HSET, a command list, or
-- your script body), which sees only the write's own keys and arguments.
-- KEYS[1]  high-water mark: decimal string, never expires
-- KEYS[2]  idempotency record (decimal token, PX) — KEYS[1] again when no idempotency key
-- KEYS[3…] the write's keys (in a Cluster, give them the same {scope} hash tag)
-- ARGV[1]  token (canonical decimal)    ARGV[2] policy: '>=' or '>'
-- ARGV[3]  '1' when an idempotency key is given, else '0'    ARGV[4] its TTL in ms
-- ARGV[5…] the write's arguments
-- Returns: {'applied', writeResult} | {'duplicate'} | {'stale_fence', highWaterMark}
-- Order: check, write, then advance the mark — a write that raises an error leaves the mark
-- where it was (Redis has no rollback: writes the body made before its error remain).
-- Time: none (the idempotency record's PX is the server's clock).
local token = ARGV[1]
if ARGV[3] == '1' and redis.call('GET', KEYS[2]) == token then return {'duplicate'} end
local hwm = redis.call('GET', KEYS[1]) or '0'
if dec_lt(token, hwm) or (ARGV[2] == '>' and token == hwm) then return {'stale_fence', hwm} end
local wkeys, wargs = {}, {}
for i = 3, #KEYS do wkeys[#wkeys + 1] = KEYS[i] end
for i = 5, #ARGV do wargs[#wargs + 1] = ARGV[i] end
local result = leasehold_write(wkeys, wargs)
if dec_lt(hwm, token) then redis.call('SET', KEYS[1], token) end
if ARGV[3] == '1' then redis.call('SET', KEYS[2], token, 'PX', ARGV[4]) end
return {'applied', result}
