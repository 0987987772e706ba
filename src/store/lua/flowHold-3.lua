--[[
  A run that was admitted before and comes back to work (a parked run resumed
  by a person, a stopped run retried) takes a slot at once, even past its
  limit: it already had its turn, and a person's decision does not wait behind
  a burst. Idempotent: a run already holding a slot changes nothing.

  KEYS[1] held hash  KEYS[2] counts hash  KEYS[3] waiting hash

  ARGV[1] run id  ARGV[2] the run's JSON (tenant, agent, shard, priority, at, admittedAt)

  Returns 1 slot taken, 0 already held or still waiting in line.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 or redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
local meta = cjson.decode(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], 't:' .. meta.tenant, 1)
redis.call('HINCRBY', KEYS[2], 'a:' .. meta.agent, 1)
redis.call('HINCRBY', KEYS[2], 'all', 1)
return 1
