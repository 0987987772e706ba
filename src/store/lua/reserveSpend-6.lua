--[[
  Money spent by model attempts, in µ$ (1e-6 USD; src/core/prices.ts), counted per tenant per UTC day and
  month, per agent per day, and for the fleet per month. Reserve (ARGV[6] = 1) takes an attempt's cost
  estimate before it and is refused when any counter with a limit would go past it; settle (ARGV[6] = 0)
  records the real cost (minus the reservation) and is never refused: what was spent is recorded even past
  a limit, so the next reservation sees it. Settle also adds the real cost to the day's and the month's
  report (hash field `<tenant> <agent> <provider>/<model>`, read by `agentctl spend`). Every key shares the
  hash tag {spend}: one script, one Cluster slot.

  KEYS[1] tenant-day  KEYS[2] tenant-month  KEYS[3] agent-day  KEYS[4] fleet-month
  KEYS[5] the day's report hash  KEYS[6] the month's report hash
  ARGV[1] amount (may be negative when settling)  ARGV[2..5] the limits of KEYS[1..4] (0 = none)
  ARGV[6] 1 = reserve, 0 = settle  ARGV[7] ttl of day keys (ms)  ARGV[8] ttl of month keys (ms)
  ARGV[9] report field  ARGV[10] the attempt's real cost (settle only)

  Returns { 0, the tenant-day total }, or { -16, index of the counter refused (1..4), its total } (nothing reserved).
]]
local amount = tonumber(ARGV[1])
if ARGV[6] == '1' then
  for i = 1, 4 do
    local limit = tonumber(ARGV[1 + i])
    if limit > 0 then
      local current = tonumber(redis.call('GET', KEYS[i]) or '0')
      if current + amount > limit then return { -16, i, current } end
    end
  end
end
local total = 0
for i = 1, 4 do
  local t = redis.call('INCRBY', KEYS[i], amount)
  if i == 1 then total = t end
  if redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIRE', KEYS[i], (i == 2 or i == 4) and ARGV[8] or ARGV[7]) end
end
if ARGV[6] == '0' and tonumber(ARGV[10]) > 0 then
  for i = 5, 6 do
    redis.call('HINCRBY', KEYS[i], ARGV[9], ARGV[10])
    if redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIRE', KEYS[i], i == 5 and ARGV[7] or ARGV[8]) end
  end
end
return { 0, total }
