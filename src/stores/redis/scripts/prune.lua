-- prune.lua — retention (decision 049); prepended with decimal.lua, lease-holder.lua and
-- lease-acquire.lua (for lease_now_ms and lease_floor) by retention.ts.
-- KEYS: lease records, all in one slot (one record per call on a Cluster).
-- ARGV[1]: grace in ms: a record with a holder is deleted only this long after its expiry
--          (and its lock-delay); a released record (no `id`) at once.
-- ARGV[2]: '1' keeps every record whose token is not below the clock floor. '0' only in the
--          test that shows a prune without that check handing out old tokens again.
-- Why deleting is safe: every grant's token is at least TIME_ms × 1024 (lease-acquire.lua), and
-- Redis TIME does not run backwards (the documented assumption). A record whose last token
-- (the top of its block) is below that floor now is below every token a later grant of the
-- key can get, record or no record. A record ahead of the clock (raised by an epoch with
-- --at-least) is kept until the clock passes it.
-- Returns {deleted, kept ahead of the clock, floor now (decimal)}.
local now = lease_now_ms()
local floor = lease_floor(now)
local grace = tonumber(ARGV[1])
local deleted, kept = 0, 0
for _, record in ipairs(KEYS) do
  local rec = redis.call('HMGET', record, 'token', 'id', 'exp', 'ld')
  local free = true
  if rec[2] then
    local until_ms = tonumber(rec[3] or '0') + grace
    if rec[4] then
      local ms, lid = string.match(rec[4], '^(%d+):(.*)$')
      if lid == rec[2] then until_ms = until_ms + tonumber(ms) end
    end
    free = until_ms <= now
  end
  if free and rec[1] then
    if ARGV[2] == '0' or dec_lt(rec[1], floor) then
      redis.call('DEL', record)
      deleted = deleted + 1
    else
      kept = kept + 1
    end
  end
end
return {deleted, kept, floor}
