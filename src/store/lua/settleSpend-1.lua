--[[
  A writer's batch of spend settlements, in µ$ (1e-6 USD; src/core/prices.ts): its model attempts' real cost on
  the counters of tenants (per UTC day and month), agents (per day) and the fleet (per month), minus what they
  drew from the writer's leases on each and minus what those leases held undrawn (leaseSpend-1.lua), and on the
  day's and the month's report (hash field `<tenant> <agent> <provider>/<model>`). A worker settles its attempts in
  memory and sends them here in batches (src/budget/spend.ts): a step without a money limit makes no call for money
  of its own. Never refused: what was spent is recorded even past a limit, so the next lease sees it.

  A batch is applied once: KEYS[1] marks it, so the same command sent again after a lost reply changes nothing.
  Keys besides KEYS[1] travel in ARGV, as many as the batch touched; every one carries the hash tag {spend}
  (KeySpace.spend), KEYS[1]'s Cluster slot. A key is given its ttl when this script creates it.

  KEYS[1] the batch's mark (string; set when the batch is applied)
  ARGV[1] ttl of the mark (ms)
  ARGV[2] C; then C x (counter key, delta, ttl ms)
  then R; then R x (report key, field, cost, ttl ms)

  Returns 1 when applied, 0 when the batch had been applied before.
]]
if not redis.call('SET', KEYS[1], 1, 'NX', 'PX', ARGV[1]) then return 0 end
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local delta = tonumber(ARGV[i + 1])
  -- The counter held nothing before (or was just created): it is given its ttl.
  if redis.call('INCRBY', ARGV[i], delta) - delta <= 0 and redis.call('PTTL', ARGV[i]) < 0 then
    redis.call('PEXPIRE', ARGV[i], ARGV[i + 2])
  end
  i = i + 3
end
local r = tonumber(ARGV[i])
i = i + 1
for _ = 1, r do
  -- A new field may be a new hash.
  local total = redis.call('HINCRBY', ARGV[i], ARGV[i + 1], ARGV[i + 2])
  if total == tonumber(ARGV[i + 2]) and redis.call('PTTL', ARGV[i]) < 0 then
    redis.call('PEXPIRE', ARGV[i], ARGV[i + 3])
  end
  i = i + 4
end
return 1
