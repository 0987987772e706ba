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
           ADD_KEYS_FROM_FINISH, checked against BullMQ's own on every commit),
           addPrioritizedJob's KEYS[20, 15, 21, 9, 13, 17, 8, 10, 16]
           (ADD_PRIORITIZED_KEYS_FROM_FINISH)
  KEYS[22] the action a park into waiting_approval asks approval for (any other
           commit passes the run hash here, untouched)
  KEYS[23] the shard's approvals zset

  ARGV[1] lock token     ARGV[2] step (cursor the caller holds)
  ARGV[3] next status (running | completed | failed | budget_exceeded | needs_human | waiting_approval ...);
          a recorded cancel wins over any of them: the run ends `cancelled` with the cancel's
          reason (who asked), no next job, and a status entry saying so closes the step's entries
  ARGV[4] reason ('' for none)
  ARGV[5] steps delta    ARGV[6] tokens delta    ARGV[7] context bytes delta ('' = the run keeps none)
  ARGV[8] now (ms)       ARGV[9] events max length
  ARGV[10] advance cursor (1) or keep it (0, the run parks mid-step)
  ARGV[11] retention ms for terminal statuses
  ARGV[12] step-committed event (JSON)
  ARGV[13] 1 when the entries carry the step's decision (it must not be journalled yet)
  ARGV[14] this job's id (must be the run's current job)
  ARGV[15] the next step's job id (becomes the run's current job when status is running)
  ARGV[16] number of journal entries N
  ARGV[17..25] BullMQ moveToFinished argv (completes this job; may fetch the worker's next job)
  ARGV[26..28] BullMQ addStandardJob or addPrioritizedJob argv (empty strings when the status is not running)
  ARGV[29] step-started event (JSON; '' when this delivery's journalDecision already emitted it)
  ARGV[30] the decision event (JSON; '' when ARGV[13] is 0)
  ARGV[31] the action id a park into waiting_approval asks approval for ('' for none)
  ARGV[32] that approval's expiry (ms) if none is recorded yet
  ARGV[33] a park on a wait (sleeping | waiting_event | waiting_child): the wait's record (JSON, src/runs/waits.ts), '' for none
  ARGV[34] sha1 of the step's decision entry when it was journalled before this commit
           (ARGV[13] is 0): the server must hold it as the step's decision, or nothing is
           written ('' when the commit follows no journalled decision)
  ARGV[35] `p` when the next step's job is prioritized (flow control: its priority says its
           tenant's share, src/flow/stepPriority.ts), '' for a standard job
  ARGV[36] cost delta in µ$ (the step's model attempts' cost, failed ones included), charged with the tokens
  ARGV[37..36+N] journal entries (JSON): the one variable-length run, last

  A park on a wait advances the cursor and makes the next step's job id the run's
  current job, with the wait recorded on the run hash (`wait`); no job is added here:
  the worker adds the wake job, delayed until the wait's time, after this commit (and
  the sweep adds it if the worker died in between).

  A park into waiting_approval records the approval request (expiry on the
  action, entry in the approvals index) here, in the same atomic change as the
  park: a pending approval exists only for a parked run, so it cannot expire
  before the park lands, and a cancel that wins over the park leaves none. An
  approval already past its expiry (a re-park) or already expired by the sweep
  does not park: the run ends `failed`, reason approval_expired. A park records
  the action on the run hash (`approvalFor`).

  Returns: { journal length after the commit, moveToFinished's reply (0, the
  worker's next job, or BullMQ's negative code: the commit stands and the worker
  completes the job itself), the status committed (ARGV[3], or what a cancel or
  an expired approval made of it) }, or a negative code:
   -1 lock lost  -2 stale step  -3 run missing  -4 run not running  -5 decision already journalled
   -24 the journalled decision this commit follows is not the server's (includes/journalledDecision.lua)

  The step's events (step_started, decision, step_committed, and status_changed
  when the run stops or parks) share one stream entry (includes/emitEvents.lua):
  the three of a step that stays running as one field (emitStepEvents).

  Keeps the run listing indexes and the version queue (includes/runIndex.lua) in the same change.

  A run that ends here lets go, in the same change, of what nothing reads after
  its end: its completed step jobs, this one included (includes/dropRunJobs.lua),
  and, when it cannot come back to work (completed, cancelled), the run hash's
  per-step bookkeeping (decidedStep, decisionIndex: a retry of a failed run reuses
  a journalled decision through them).
]]
-- @include fence
-- @include addToBudget
-- @include emitEvents
-- @include expireRun
-- @include runStatus
-- @include runIndex
-- @include journalledDecision
-- @include dropRunJobs
-- @include commitMemo
-- @include bullmq:addStandardJob
-- @include bullmq:addPrioritizedJob
-- @include bullmq:moveToFinished

local step = tonumber(ARGV[2])
local fence, decidedStep, cancelRequested, cancelReason, fromStatus, fromReason =
  checkFence(KEYS[1], KEYS[5], ARGV[1], step, ARGV[14])
if fence ~= 0 then return fence end
-- The fence read KEYS[5] holding ARGV[1]; BullMQ's copies below take that read as theirs (includes/commitMemo.lua).
beginCommitMemo(KEYS[5], ARGV[1])

if ARGV[13] == '1' and decidedStep == ARGV[2] then return -5 end
if ARGV[34] ~= '' and not holdsDecision(KEYS[1], KEYS[3], ARGV[2], ARGV[34]) then return -24 end

local n = tonumber(ARGV[16])
local len
if n > 0 then len = redis.call('RPUSH', KEYS[3], unpack(ARGV, 37, 36 + n)) else len = redis.call('LLEN', KEYS[3]) end

-- Cancel wins: whatever this commit would set (a park included), the run ends cancelled.
local status = ARGV[3]
local reason = ARGV[4]
if cancelRequested == '1' then
  status = 'cancelled'
  reason = cancelReason or 'cancelled_by_operator'
elseif status == 'waiting_approval' and ARGV[31] ~= '' then
  local a = redis.call('HMGET', KEYS[22], 'state', 'approvalExpiresAt', 'decision')
  local expiresAt = a[2]
  if a[1] == 'planned' and not expiresAt then
    expiresAt = ARGV[32]
    redis.call('HSET', KEYS[22], 'approvalExpiresAt', expiresAt)
    redis.call('ZADD', KEYS[23], expiresAt, ARGV[31])
  end
  local expired = a[1] == 'planned' and tonumber(expiresAt) <= tonumber(ARGV[8])
  if a[3] and cjson.decode(a[3]).reason == 'approval_expired' then expired = true end
  if expired then
    status = 'failed'
    reason = 'approval_expired'
  end
end
if status ~= ARGV[3] then
  len = redis.call('RPUSH', KEYS[3], cjson.encode({ v = 1, kind = 'status', step = step, status = status, reason = reason }))
elseif status == 'waiting_approval' and ARGV[31] ~= '' then
  -- Which approval the run waits for: the sweep resumes it if a decision's resume was lost.
  redis.call('HSET', KEYS[1], 'approvalFor', ARGV[31])
end

local cost = ARGV[36]
if cost == '0' then cost = '' end
addToBudget(KEYS[2], { 'stepsUsed', ARGV[5], 'tokensUsed', ARGV[6], 'costUsed', cost, 'contextBytes', ARGV[7] })

local nextCursor = step
if ARGV[10] == '1' then nextCursor = step + 1 end
indexRunStatus(KEYS[1], status, ARGV[8], ARGV[11], fromStatus, reason)
if status == 'running' and fromStatus == status and fromReason == reason then
  -- A step of a run that stays running: its status and reason stand, only what moved is written (AOF bytes per step).
  redis.call('HSET', KEYS[1], 'cursor', nextCursor, 'updatedAt', ARGV[8], 'jobId', ARGV[15])
elseif status == 'running' then
  redis.call('HSET', KEYS[1], 'cursor', nextCursor, 'status', status, 'reason', reason, 'updatedAt', ARGV[8], 'jobId', ARGV[15])
elseif ARGV[33] ~= '' and status == ARGV[3] then
  redis.call('HSET', KEYS[1], 'cursor', nextCursor, 'status', status, 'reason', reason, 'updatedAt', ARGV[8], 'jobId', ARGV[15], 'wait', ARGV[33])
else
  redis.call('HSET', KEYS[1], 'cursor', nextCursor, 'status', status, 'reason', reason, 'updatedAt', ARGV[8])
end
-- The step's events, and the status change of a run that stops or parks, in one stream entry.
if status == 'running' and ARGV[29] ~= '' and ARGV[30] ~= '' and ARGV[12] ~= '' then
  emitStepEvents(KEYS[4], ARGV[9], step, ARGV[29], ARGV[30], ARGV[12])
else
  local events = { 'step_started', ARGV[29], 'decision', ARGV[30], 'step_committed', ARGV[12] }
  if status ~= 'running' then
    events[7] = 'status_changed'
    events[8] = cjson.encode({ status = status, reason = reason })
  end
  emitEvents(KEYS[4], ARGV[9], events)
end

if status == 'running' and ARGV[35] == 'p' then
  bullmqAddPrioritizedJob({ KEYS[20], KEYS[15], KEYS[21], KEYS[9], KEYS[13], KEYS[17], KEYS[8], KEYS[10], KEYS[16] },
    { ARGV[26], ARGV[27], ARGV[28] })
elseif status == 'running' then
  bullmqAddStandardJob({ KEYS[7], KEYS[14], KEYS[15], KEYS[21], KEYS[17], KEYS[13], KEYS[8], KEYS[10], KEYS[20] },
    { ARGV[26], ARGV[27], ARGV[28] })
elseif terminalStatus[status] then
  redis.call('HSET', KEYS[1], 'finishedAt', ARGV[8])
  expireRun({ KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6] }, KEYS[6], ARGV[11])
end

local finished = bullmqMoveToFinished(
  { KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17], KEYS[18], KEYS[19], KEYS[20] },
  { ARGV[17], ARGV[18], ARGV[19], ARGV[20], ARGV[21], ARGV[22], ARGV[23], ARGV[24], ARGV[25] })
if terminalStatus[status] then
  -- After the completion: the ending job is in the completed set by now. KEYS[17] is that set, ARGV[23] the queue's
  -- key prefix (moveToFinished's own).
  dropRunJobs(KEYS[17], ARGV[23], ARGV[14])
  if status == 'completed' or status == 'cancelled' then redis.call('HDEL', KEYS[1], 'decidedStep', 'decisionIndex') end
end
return { len, finished, status }
