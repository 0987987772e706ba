--[[
  One model attempt's cost estimate, in µ$ (src/core/prices.ts), reserved before the attempt on each money
  counter that has a limit (src/budget/spend.ts): the tenant's day or month, the agent's day, the fleet's month.
  When one would pass its limit, nothing is taken on any. The attempt's settlement gives the reservation back
  (settleSpend-1.lua).

  The counters travel in ARGV (one to four); every one carries the hash tag {spend} (KeySpace.spend), and KEYS[1],
  the first of them, names their Cluster slot. A counter is given its ttl when this script creates it.

  KEYS[1] the first counter
  ARGV[1] the amount
  ARGV[2..] the counters, as (key, limit, ttl ms)

  Returns 0, or { -16, i, total } when the i-th counter would pass its limit: its total before the
  reservation; nothing reserved.
]]
local amount = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  local total = redis.call('INCRBY', ARGV[i], amount)
  if total - amount <= 0 and redis.call('PTTL', ARGV[i]) < 0 then redis.call('PEXPIRE', ARGV[i], ARGV[i + 2]) end
  if total > tonumber(ARGV[i + 1]) then
    for j = 2, i, 3 do redis.call('DECRBY', ARGV[j], amount) end
    return { -16, (i + 1) / 3, total - amount }
  end
end
return 0
