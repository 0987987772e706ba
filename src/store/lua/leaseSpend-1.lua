--[[
  A worker's lease of money, in µ$ (src/core/prices.ts), taken on each money counter that has a limit
  (src/budget/spend.ts): the tenant's day or month, the agent's day, the fleet's month. The worker draws each model
  attempt's cost estimate from it in memory, so every attempt is still covered by an amount counted here before its
  call; the attempts' settlements give their draws back and the rest of the lease comes back with the worker's next
  batch (settleSpend-1.lua), or here, with its next lease on the same counters (ARGV[1]).

  The lease is `want`, cut to 1/`share` of the least room left on the counters (limit - total), but never below
  `need` (the attempt at hand's estimate): far from a limit a worker leases several attempts at once; near it, a
  lease is the one estimate, so workers that each hold a lease cannot starve one another of what is left. When one
  counter has no room for `need`, nothing is leased on any (what ARGV[1] gives back is given back all the same).

  The counters travel in ARGV (one to four); every one carries the hash tag {spend} (KeySpace.spend), and KEYS[1],
  the first of them, names their Cluster slot. A counter is given its ttl when this script creates it.

  KEYS[1] the first counter
  ARGV[1] given back first: the unused rest of the worker's previous lease on these counters (0 for none)
  ARGV[2] need: the least amount leased
  ARGV[3] want: the most amount leased
  ARGV[4] share: a lease above `need` takes at most 1/share of the least room
  ARGV[5..] the counters, as (key, limit, ttl ms)

  Returns the amount leased (need <= amount <= want), or { -16, i, total } when the i-th counter has no room for
  `need`: its total (after what was given back); nothing leased.
]]
local back = tonumber(ARGV[1])
local need = tonumber(ARGV[2])
-- The i-th counter's total once `back` is off it (a counter that held nothing is given its ttl).
local function givenBack(i)
  if back == 0 then return tonumber(redis.call('GET', ARGV[i]) or '0') end
  local total = redis.call('DECRBY', ARGV[i], back)
  if total == -back and redis.call('PTTL', ARGV[i]) < 0 then redis.call('PEXPIRE', ARGV[i], ARGV[i + 2]) end
  return total
end
local room
for i = 5, #ARGV, 3 do
  local total = givenBack(i)
  local left = tonumber(ARGV[i + 1]) - total
  if left < need then
    if back > 0 then
      for j = i + 3, #ARGV, 3 do givenBack(j) end
    end
    return { -16, (i - 2) / 3, total }
  end
  if room == nil or left < room then room = left end
end
local amount = math.min(tonumber(ARGV[3]), math.max(need, math.floor(room / tonumber(ARGV[4]))))
for i = 5, #ARGV, 3 do
  if redis.call('INCRBY', ARGV[i], amount) - amount <= 0 and redis.call('PTTL', ARGV[i]) < 0 then
    redis.call('PEXPIRE', ARGV[i], ARGV[i + 2])
  end
end
return amount
