--[[
  A run that was admitted before and comes back to work by a person's decision
  (a parked run resumed, a stopped run retried, a version continued) takes a slot
  at once, even past its limit: it already had its turn, and a person's decision
  does not wait behind a burst. (A run woken from a wait asks with flowWake-8.lua
  and waits for its slot.) Idempotent: a run already holding a slot for this job
  or a newer one changes nothing; one still holding the slot of the job that
  parked or stopped it (its release not sent yet) keeps it, for this job, so the
  late release frees nothing.

  KEYS[1] held hash  KEYS[2] counts hash  KEYS[3] waiting hash

  ARGV[1] run id  ARGV[2] the run's JSON (tenant, agent, shard, priority, at, admittedAt, jobId, gen)

  Returns 1 slot taken, 0 already held or still waiting in line.
]]
-- @include flowTurns

local meta = cjson.decode(ARGV[2])
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  local h = cjson.decode(held)
  if not flowGenAtLeast(h.gen, meta.gen) then
    h.gen = meta.gen
    h.jobId = meta.jobId
    redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(h))
  end
  return 0
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], 't:' .. meta.tenant, 1)
redis.call('HINCRBY', KEYS[2], 'a:' .. meta.agent, 1)
redis.call('HINCRBY', KEYS[2], 'all', 1)
return 1
