--[[
  Ends a run whose current step job died: BullMQ failed it (attempts exhausted,
  stalled too often, unrecoverable input), it is missing, or it completed
  without a commit. Only if the run still waits on that job: status queued or
  running, run.jobId is the job, the job is in the state the caller saw, and
  the run was last updated at least the minimum age ago. Anything that moved
  on (a commit, a resume, a cancel) is left alone.

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] journal list
  KEYS[4] events stream  KEYS[5] run's actions set
  KEYS[6] the job's BullMQ hash  KEYS[7] the queue's failed zset
  KEYS[8] the queue's completed zset

  ARGV[1] job id  ARGV[2] expected job state: failed | missing | completed
  ARGV[3] new status (failed | needs_human)  ARGV[4] reason (a code)
  ARGV[5] now (ms)  ARGV[6] minimum age (ms since the run's updatedAt)
  ARGV[7] events max length  ARGV[8] retention ms (terminal statuses)

  Returns {1, job state} settled, {0, why} left alone (run_moved_on,
  job_alive, job_<state>, too_young), or {-3, ''} run missing.

  Keeps the run listing indexes (includes/runIndex.lua) in the same change. A run
  that ends `failed` lets go of its completed step jobs (includes/dropRunJobs.lua);
  the failed job stays for inspection.
]]
-- @include dropRunJobs
-- @include emitEvent
-- @include expireRun
-- @include runIndex

local run = redis.call('HMGET', KEYS[1], 'status', 'jobId', 'updatedAt', 'cursor')
if not run[1] then return { -3, '' } end
if (run[1] ~= 'running' and run[1] ~= 'queued') or run[2] ~= ARGV[1] then return { 0, 'run_moved_on' } end

local jobState = 'alive'
if redis.call('EXISTS', KEYS[6]) == 0 then
  jobState = 'missing'
elseif redis.call('ZSCORE', KEYS[7], ARGV[1]) then
  jobState = 'failed'
elseif redis.call('ZSCORE', KEYS[8], ARGV[1]) then
  jobState = 'completed'
end
if jobState == 'alive' then return { 0, 'job_alive' } end
if jobState ~= ARGV[2] then return { 0, 'job_' .. jobState } end
if tonumber(run[3] or '0') > tonumber(ARGV[5]) - tonumber(ARGV[6]) then return { 0, 'too_young' } end

local status = ARGV[3]
local reason = ARGV[4]
indexRunStatus(KEYS[1], status, ARGV[5], ARGV[8])
redis.call('HSET', KEYS[1], 'status', status, 'reason', reason, 'updatedAt', ARGV[5])
redis.call('RPUSH', KEYS[3], cjson.encode({ v = 1, kind = 'status', step = tonumber(run[4] or '0'), status = status, reason = reason }))
emitEvent(KEYS[4], ARGV[7], 'status_changed', cjson.encode({ status = status, reason = reason, job = jobState }))
if status == 'failed' then
  redis.call('HSET', KEYS[1], 'finishedAt', ARGV[5])
  expireRun({ KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5] }, KEYS[5], ARGV[8])
  dropRunJobs(KEYS[8], string.sub(KEYS[6], 1, #KEYS[6] - #ARGV[1]), ARGV[1])
end
return { 1, jobState }
