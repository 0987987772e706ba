--[[
  Resumes a parked run (waiting_approval / needs_human) at its cursor with a
  new job, after a person decided. Only from the expected status: a second
  click changes nothing. Only the subject's latest run comes back to work
  (includes/subject.lua): a superseded run is not resumed; nor is a child whose
  parent took its outcome (includes/outcomeTaken.lua).

  KEYS[1] run hash  KEYS[2] events stream  KEYS[3..11] BullMQ addStandardJob keys
  KEYS[12] the subject's latest run (KeySpace.subjectLatest, the run's shard)

  ARGV[1] expected status  ARGV[2] new job id  ARGV[3] now (ms)
  ARGV[4] events max length  ARGV[5] event (JSON)  ARGV[6..8] BullMQ addStandardJob argv
  ARGV[9] the run id

  Returns {1, ''}, or {-3, ''} run missing, {-4, status} the run is not in the
  expected status, {-23, later run id} a later run of the subject superseded it,
  {-26, parent run id} the run is a child whose parent's wake took its outcome
  (includes/outcomeTaken.lua).

  Keeps the run listing indexes (includes/runIndex.lua) in the same change.
]]
-- @include emitEvent
-- @include outcomeTaken
-- @include runIndex
-- @include subject
-- @include bullmq:addStandardJob

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return { -3, '' } end
if status ~= ARGV[1] then return { -4, status } end
local later = laterRunOf(KEYS[1], KEYS[12], ARGV[9])
if later then return { -23, later } end
local parent = outcomeTakenBy(KEYS[1])
if parent then return { -26, parent } end
indexRunStatus(KEYS[1], 'running', ARGV[3], 0)
redis.call('HSET', KEYS[1], 'status', 'running', 'reason', '', 'jobId', ARGV[2], 'updatedAt', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'resumes', 1)
emitEvent(KEYS[2], ARGV[4], 'status_changed', ARGV[5])
local bullKeys = {}
for i = 3, 11 do bullKeys[#bullKeys + 1] = KEYS[i] end
bullmqAddStandardJob(bullKeys, { ARGV[6], ARGV[7], ARGV[8] })
return { 1, '' }
