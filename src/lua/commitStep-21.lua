--[[
  Commits one step: journal entries, budget, cursor and status, the next
  step's job, and the completion of this step's own job (with the fetch of the
  worker's next job), in one atomic change fenced by the job lock and the run
  cursor. Nothing is written unless the fence holds.

  KEYS[1] run hash       KEYS[2] budget hash     KEYS[3] journal list
  KEYS[4] events stream  KEYS[5] job lock key    KEYS[6] actions set
  KEYS[7..20] BullMQ moveToFinished keys completing this job
  KEYS[21] BullMQ's job id counter key; addStandardJob's keys for the next step's
           job are KEYS[7, 14, 15, 21, 17, 13, 8, 10, 20] (bullmqInternals.ts
           ADD_KEYS_FROM_FINISH, checked against BullMQ's own on every commit)

  ARGV[1] lock token     ARGV[2] step (cursor the caller holds)
  ARGV[3] next status (running | completed | failed | budget_exceeded | needs_human | waiting_approval ...)
  ARGV[4] reason ('' for none)
  ARGV[5] steps delta    ARGV[6] tokens delta    ARGV[7] context tokens delta
  ARGV[8] now (ms)       ARGV[9] events max length
  ARGV[10] advance cursor (1) or keep it (0, the run parks mid-step)
  ARGV[11] retention ms for terminal statuses
  ARGV[12] step-committed event (JSON)
  ARGV[13] 1 when the entries carry the step's decision (it must not be journalled yet);
           ARGV[30+N] is then its decision event (JSON)
  ARGV[14] this job's id (must be the run's current job)
  ARGV[15] the next step's job id (becomes the run's current job when status is running)
  ARGV[16] number of journal entries N
  ARGV[17..25] BullMQ moveToFinished argv (completes this job; may fetch the worker's next job)
  ARGV[26..25+N] journal entries (JSON)
  ARGV[26+N..28+N] BullMQ addStandardJob argv (empty strings when the status is not running)
  ARGV[29+N] step-started event (JSON; '' when this delivery's journalDecision already emitted it)

  Returns: { journal length after the commit, moveToFinished's reply (0, the
  worker's next job, or BullMQ's negative code: the commit stands and the worker
  completes the job itself), the run's status after the commit (a pending cancel
  turns running into cancelled) }, or a negative code:
   -1 lock lost  -2 stale step  -3 run missing  -4 run not running  -5 decision already journalled
]]
-- @include fence
-- @include emitEvent
-- @include expireRun
-- @include bullmq:addStandardJob
-- @include bullmq:moveToFinished

local step = tonumber(ARGV[2])
local fence, decidedStep, cancelRequested = checkFence(KEYS[1], KEYS[5], ARGV[1], step, ARGV[14])
if fence ~= 0 then return fence end

if ARGV[13] == '1' and decidedStep == ARGV[2] then return -5 end

local n = tonumber(ARGV[16])
local len
if n > 0 then len = redis.call('RPUSH', KEYS[3], unpack(ARGV, 26, 25 + n)) else len = redis.call('LLEN', KEYS[3]) end

redis.call('HINCRBY', KEYS[2], 'stepsUsed', ARGV[5])
redis.call('HINCRBY', KEYS[2], 'tokensUsed', ARGV[6])
redis.call('HINCRBY', KEYS[2], 'contextTokens', ARGV[7])

local status = ARGV[3]
local reason = ARGV[4]
if status == 'running' and cancelRequested == '1' then
  status = 'cancelled'
  reason = 'cancelled_by_operator'
end

local nextCursor = step
if ARGV[10] == '1' then nextCursor = step + 1 end
if status == 'running' then
  redis.call('HSET', KEYS[1], 'cursor', nextCursor, 'status', status, 'reason', reason, 'updatedAt', ARGV[8], 'jobId', ARGV[15])
else
  redis.call('HSET', KEYS[1], 'cursor', nextCursor, 'status', status, 'reason', reason, 'updatedAt', ARGV[8])
end
emitEvent(KEYS[4], ARGV[9], 'step_started', ARGV[29 + n])
if ARGV[13] == '1' then emitEvent(KEYS[4], ARGV[9], 'decision', ARGV[30 + n]) end
emitEvent(KEYS[4], ARGV[9], 'step_committed', ARGV[12])

if status == 'running' then
  bullmqAddStandardJob({ KEYS[7], KEYS[14], KEYS[15], KEYS[21], KEYS[17], KEYS[13], KEYS[8], KEYS[10], KEYS[20] },
    { ARGV[26 + n], ARGV[27 + n], ARGV[28 + n] })
else
  emitEvent(KEYS[4], ARGV[9], 'status_changed', cjson.encode({ status = status, reason = reason }))
  local terminal = { completed = true, failed = true, budget_exceeded = true, cancelled = true }
  if terminal[status] then
    redis.call('HSET', KEYS[1], 'finishedAt', ARGV[8])
    expireRun({ KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6] }, KEYS[6], ARGV[11])
  end
end

local finished = bullmqMoveToFinished(
  { KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17], KEYS[18], KEYS[19], KEYS[20] },
  { ARGV[17], ARGV[18], ARGV[19], ARGV[20], ARGV[21], ARGV[22], ARGV[23], ARGV[24], ARGV[25] })
return { len, finished, status }
