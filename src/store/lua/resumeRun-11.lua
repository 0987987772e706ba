--[[
  Resumes a parked run (waiting_approval / needs_human) at its cursor with a
  new job, after a person decided. Only from the expected status: a second
  click changes nothing.

  KEYS[1] run hash  KEYS[2] events stream  KEYS[3..11] BullMQ addStandardJob keys

  ARGV[1] expected status  ARGV[2] new job id  ARGV[3] now (ms)
  ARGV[4] events max length  ARGV[5] event (JSON)  ARGV[6..8] BullMQ addStandardJob argv

  Returns 1, or -3 run missing, -4 the run is not in the expected status.

  Keeps the run listing indexes (includes/runIndex.lua) in the same change.
]]
-- @include emitEvent
-- @include runIndex
-- @include bullmq:addStandardJob

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -3 end
if status ~= ARGV[1] then return -4 end
indexRunStatus(KEYS[1], 'running', ARGV[3], 0)
redis.call('HSET', KEYS[1], 'status', 'running', 'reason', '', 'jobId', ARGV[2], 'updatedAt', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'resumes', 1)
emitEvent(KEYS[2], ARGV[4], 'status_changed', ARGV[5])
local bullKeys = {}
for i = 3, 11 do bullKeys[#bullKeys + 1] = KEYS[i] end
bullmqAddStandardJob(bullKeys, { ARGV[6], ARGV[7], ARGV[8] })
return 1
