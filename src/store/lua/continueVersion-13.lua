--[[
  Continues a run parked for a version change under another agent version:
  re-pins the run (its spec, agentVersion and toolsHash), journals the
  operator's decision, and resumes the run at its cursor with a new job, in one
  atomic change. Only from needs_human / version_mismatch and only while the run
  is still pinned to the version the operator saw: a second click (or a
  concurrent one) changes nothing. The ledger is not touched: effects recorded
  under the old version are answered from it, never redone.

  KEYS[1] run hash  KEYS[2] journal list  KEYS[3] events stream
  KEYS[4..12] BullMQ addStandardJob keys of the resumed step's job
  KEYS[13] the subject's latest run (KeySpace.subjectLatest, the run's shard)

  ARGV[1] pinned agent version the operator saw  ARGV[2] pinned tools hash the operator saw
  ARGV[3] new spec (JSON)  ARGV[4] new agent version  ARGV[5] new tools hash
  ARGV[6] new job id  ARGV[7] now (ms)  ARGV[8] events max length
  ARGV[9] the operator journal entry (JSON)  ARGV[10] the status_changed event (JSON)
  ARGV[11..13] BullMQ addStandardJob argv  ARGV[14] the run id

  Returns 1, or -3 run missing, -20 the run is not parked for a version change,
  -21 the run's pinned version is no longer the one the operator saw,
  {-23, later run id} a later run of the subject superseded it (includes/subject.lua:
  only the subject's latest run comes back to work), {-26, parent run id} the run is a
  child whose parent's wake took its outcome (includes/outcomeTaken.lua).

  Leaving needs_human takes the run out of the version queue (includes/runIndex.lua).
]]
-- @include emitEvents
-- @include outcomeTaken
-- @include runIndex
-- @include subject
-- @include bullmq:addStandardJob

local run = redis.call('HMGET', KEYS[1], 'status', 'reason', 'agentVersion', 'toolsHash')
if not run[1] then return -3 end
if run[1] ~= 'needs_human' or string.sub(run[2] or '', 1, 16) ~= 'version_mismatch' then return -20 end
if run[3] ~= ARGV[1] or run[4] ~= ARGV[2] then return -21 end
local later = laterRunOf(KEYS[1], KEYS[13], ARGV[14])
if later then return { -23, later } end
local parent = outcomeTakenBy(KEYS[1])
if parent then return { -26, parent } end
indexRunStatus(KEYS[1], 'running', ARGV[7], 0, run[1])
redis.call('HSET', KEYS[1], 'spec', ARGV[3], 'agentVersion', ARGV[4], 'toolsHash', ARGV[5],
  'status', 'running', 'reason', '', 'jobId', ARGV[6], 'updatedAt', ARGV[7])
redis.call('HINCRBY', KEYS[1], 'resumes', 1)
redis.call('RPUSH', KEYS[2], ARGV[9])
emitEvents(KEYS[3], ARGV[8], { 'operator_action', ARGV[9], 'status_changed', ARGV[10] })
local bullKeys = {}
for i = 4, 12 do bullKeys[#bullKeys + 1] = KEYS[i] end
bullmqAddStandardJob(bullKeys, { ARGV[11], ARGV[12], ARGV[13] })
return 1
