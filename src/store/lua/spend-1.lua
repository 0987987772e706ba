--[[
  Money spent by model attempts, in µ$ (1e-6 USD; src/core/prices.ts), on the counters of tenants (per UTC day
  and month), agents (per day) and the fleet (per month), and on the day's and the month's report: a writer's
  batch of settlements, then, optionally, one attempt's reservation, in one atomic change. A worker settles its
  attempts in memory and sends them here in batches, with its next reservation or on a timer
  (src/budget/spend.ts): a step with no money limit makes no call of its own.

  Settlements are never refused (what was spent is recorded even past a limit, so the next reservation sees
  it): each counter's delta (the attempts' real cost, minus what they reserved on that counter), and the real
  cost on the reports (hash field `<tenant> <agent> <provider>/<model>`). A batch is applied once: KEYS[1]
  marks it, so the same command sent again after a lost reply changes nothing the second time.

  The reservation takes the attempt's estimate on each counter that has a limit; when one would pass its
  limit nothing is taken.

  Keys besides KEYS[1] travel in ARGV, as many as a batch touched; every one carries the hash tag {spend}
  (KeySpace.spend), KEYS[1]'s Cluster slot. A key is given its ttl when this script creates it.

  KEYS[1] the batch's mark (string; set when the batch is applied)
  ARGV[1] 1 when the call carries a batch, 0 when not   ARGV[2] ttl of the mark (ms)
  ARGV[3] C; then C x (counter key, delta, ttl ms)
  then R; then R x (report key, field, cost, ttl ms)
  then L, the counters reserved on (0: no reservation); the amount; then L x (counter key, limit, ttl ms)

  Returns { 0 }, or { -16, i, total } when the i-th reserved counter (1..L) would pass its limit: its total
  before the reservation; nothing reserved.
]]
local function keepFor(key, ttl)
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, ttl) end
end

local apply = ARGV[1] == '1' and redis.call('SET', KEYS[1], 1, 'NX', 'PX', ARGV[2])
local i = 4
local c = tonumber(ARGV[3])
if apply then
  for _ = 1, c do
    local delta = tonumber(ARGV[i + 1])
    -- The counter held nothing before (or was just created): it is given its ttl.
    if redis.call('INCRBY', ARGV[i], delta) - delta <= 0 then keepFor(ARGV[i], ARGV[i + 2]) end
    i = i + 3
  end
else
  i = i + 3 * c
end
local r = tonumber(ARGV[i])
i = i + 1
if apply then
  for _ = 1, r do
    -- A new field may be a new hash.
    if redis.call('HINCRBY', ARGV[i], ARGV[i + 1], ARGV[i + 2]) == tonumber(ARGV[i + 2]) then keepFor(ARGV[i], ARGV[i + 3]) end
    i = i + 4
  end
else
  i = i + 4 * r
end

local l = tonumber(ARGV[i])
local amount = tonumber(ARGV[i + 1])
i = i + 2
for j = 1, l do
  local total = redis.call('INCRBY', ARGV[i], amount)
  if total - amount <= 0 then keepFor(ARGV[i], ARGV[i + 2]) end
  if total > tonumber(ARGV[i + 1]) then
    for k = 0, j - 1 do redis.call('DECRBY', ARGV[i - 3 * k], amount) end
    return { -16, j, total - amount }
  end
  i = i + 3
end
return { 0 }
