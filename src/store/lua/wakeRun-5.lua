--[[
  Wakes a run parked on a wait (sleeping | waiting_event | waiting_child) at the
  start of its wake job: the run is running again, its wait removed, and the
  wait's results journalled when it has some to journal (an event's payload or its
  timeout, each child's outcome in the order the model asked; a sleep's result was
  journalled by the commit that parked it). The children's spend is charged to this
  run's budget in the same change, so it is charged exactly once, with the resume.
  Fenced like commitStep, from the parked statuses instead of running.

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] journal list  KEYS[4] events stream
  KEYS[5] job lock key

  ARGV[1] lock token  ARGV[2] step  ARGV[3] this job's id  ARGV[4] now (ms)
  ARGV[5] events max length  ARGV[6] retention ms (listing indexes)
  ARGV[7] context bytes delta ('' = none kept)  ARGV[8] the woke event (JSON)
  ARGV[9] steps to charge (the children's)  ARGV[10] tokens to charge (the children's)
  ARGV[11] µ$ to charge (the children's cost)
  ARGV[12..] the wait's result entries (JSON), none for a sleep

  Returns 1, 0 when the run is already running (an earlier delivery woke it), or a negative code:
   -1 lock lost  -2 stale step  -3 run missing  -4 run not parked on a wait (cancelled, say)
]]
-- @include emitEvents
-- @include runIndex

if redis.call('GET', KEYS[5]) ~= ARGV[1] then return -1 end
local run = redis.call('HMGET', KEYS[1], 'cursor', 'status', 'jobId')
if not run[1] then return -3 end
if tonumber(run[1]) ~= tonumber(ARGV[2]) or run[3] ~= ARGV[3] then return -2 end
if run[2] == 'running' then return 0 end
if run[2] ~= 'sleeping' and run[2] ~= 'waiting_event' and run[2] ~= 'waiting_child' then return -4 end

if #ARGV >= 12 then
  redis.call('RPUSH', KEYS[3], unpack(ARGV, 12, #ARGV))
  if ARGV[7] ~= '' then redis.call('HINCRBY', KEYS[2], 'contextBytes', ARGV[7]) end
end
if tonumber(ARGV[9]) > 0 then redis.call('HINCRBY', KEYS[2], 'stepsUsed', ARGV[9]) end
if tonumber(ARGV[10]) > 0 then redis.call('HINCRBY', KEYS[2], 'tokensUsed', ARGV[10]) end
if tonumber(ARGV[11]) > 0 then redis.call('HINCRBY', KEYS[2], 'costUsed', ARGV[11]) end
indexRunStatus(KEYS[1], 'running', ARGV[4], ARGV[6], run[2], '')
redis.call('HSET', KEYS[1], 'status', 'running', 'reason', '', 'updatedAt', ARGV[4])
redis.call('HDEL', KEYS[1], 'wait')
emitEvents(KEYS[4], ARGV[5], { 'woke', ARGV[8], 'status_changed', cjson.encode({ status = 'running', reason = '' }) })
return 1
