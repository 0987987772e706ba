--[[
  Gives back a run's slot (it ended, parked, was cancelled) or takes it out of
  its line (it ended while waiting). Idempotent: a run neither holding nor
  waiting changes nothing, so a release sent twice (a retry, the bookkeeping
  sweep racing a worker) frees one slot once. A release for an older job than the
  one the slot is held for (ARGV[4]: the parking commit's job, slow to send it,
  after the run woke and took the slot for its wake job) frees nothing.

  KEYS[1] waiting hash  KEYS[2] held hash  KEYS[3] pending hash
  KEYS[4] counts hash   KEYS[5] turns zset

  ARGV[1] run id  ARGV[2] line key prefix (+ tenant)
  ARGV[3] `waiting` to only take a waiting run out of its line (a cancel: a run at work keeps its slot
          until its commit ends it), else `any`
  ARGV[4] the generation released (JSON {step, resume} of the job releasing it), '' for any

  Returns 1 slot released, 2 taken out of its line, 0 nothing to do.
]]
-- @include flowTurns

local held = ARGV[3] ~= 'waiting' and redis.call('HGET', KEYS[2], ARGV[1])
if held then
  local meta = cjson.decode(held)
  if ARGV[4] ~= '' and not flowGenAtLeast(cjson.decode(ARGV[4]), meta.gen) then return 0 end
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('HINCRBY', KEYS[4], 't:' .. meta.tenant, -1)
  redis.call('HINCRBY', KEYS[4], 'a:' .. meta.agent, -1)
  redis.call('HINCRBY', KEYS[4], 'all', -1)
  return 1
end
local waiting = redis.call('HGET', KEYS[1], ARGV[1])
if waiting then
  local meta = cjson.decode(waiting)
  local line = ARGV[2] .. meta.tenant
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', line, ARGV[1])
  if redis.call('ZCARD', line) == 0 then redis.call('ZREM', KEYS[5], meta.tenant) end
  return 2
end
return 0
