--[[
  Retries a stopped run (failed, budget_exceeded or needs_human) by an
  operator: from its last commit (the cursor), with a new step job, the run's
  limits raised by the extension and the operator's journal entry, all in one
  atomic change. The ledger is not touched: the step re-runs through it, so an
  effect already confirmed is answered from its record, never sent again.

  Fenced on what the caller read: the status, the cursor and the resumes
  counter (every resume or retry bumps it, so a run that moved on and came
  back to the same status is still refused). Refused, with nothing written,
  when the new limits leave no room (the run would stop again at once) or an
  action of the run waits for a person (needs_human, or a pending approval), or
  its compensation is pending: an original in compensation_required stays in
  the shard's human queue until its compensation has ended the run
  (src/ledger/compensation.ts), and a run retried meanwhile would be at work
  when that compensation lands, the run no longer the one it ends.

  A terminal run's keys carry the retention TTL (includes/expireRun.lua): they
  are made persistent again, ledger records and reservations included, so the
  idempotency keys of confirmed effects outlive the retried run.

  An ended run's journal may be packed (compactRun-5.lua): it is unpacked back
  into the list, before any entry listed after it, in this same change, so the
  step path (which reads the list by position, in the worker and in the
  scripts) never meets a packed journal. The caller read the packed entries
  (src/store/runJournal.ts, readPackedJournal); refused if the packed journal
  is not the one read.

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] journal list
  KEYS[4] events stream  KEYS[5] run's actions set
  KEYS[6..14] BullMQ addStandardJob keys of the retried step's job
  KEYS[15] the subject's latest run (KeySpace.subjectLatest, the run's shard)
  KEYS[16] the run's packed journal (string, KeySpace.run().journalPacked)
  KEYS[17] the shard's human queue (zset, KeySpace.humanQueue: the run's shard, so its slot)

  ARGV[1] expected status  ARGV[2] expected cursor  ARGV[3] expected resumes count
  ARGV[4] the new job id  ARGV[5] now (ms)  ARGV[6] events max length
  ARGV[7] new maxSteps  ARGV[8] new maxTokens  ARGV[9] new maxWallMs  ARGV[10] new deadlineAt (ms)
  ARGV[11] 1 when the limits change (the budget hash's `extensions` is counted)
  ARGV[12] the operator journal entry (JSON)  ARGV[13] the run_retried event (JSON)
  ARGV[14] the status_changed event (JSON)  ARGV[15..17] BullMQ addStandardJob argv
  ARGV[18] the run id  ARGV[19] new maxCost (µ$; 0 = the run has no money budget)
  ARGV[20] sha1 of the packed journal read ('' none)
  ARGV[21..] its entries in their listed form (packEntry), oldest first

  Returns {1, ''} retried, or {code, detail} with nothing written:
    {-3, ''} run missing  {-4, status} not in the expected status
    {-2, ''} the run moved on since it was read (cursor, resumes or its packed journal)
    {-18, steps | tokens | wall_clock | cost} that budget leaves no room
    {-19, action id, 'person' | 'compensation' | 'compensated'} an action waits for a person,
      an original's compensation is pending (compensation_required, still queued), or
      an action was compensated or its effect accepted (compensation_required, settled):
      the run does not go on after it (its step would find the action and park again,
      with nothing left in the human queue for a person to resolve)
    {-23, later run id} a later run of the subject superseded this one (includes/subject.lua)
    {-26, parent run id} the run is a child whose parent's wake took its outcome (includes/outcomeTaken.lua)
    {-25, ''} the run was erased (erasedAt) and the step it would run has its decision journalled
      (decidedStep is the cursor): that step acts on the decision again, whose tool calls' arguments the
      erasure replaced, so a write the run never settled (rejected by the erasure) would go out again as
      another action, with the marker for arguments. A run whose step committed goes on from its next step.

  Keeps the run listing indexes (includes/runIndex.lua) in the same change.
]]
-- @include emitEvents
-- @include expireRun
-- @include outcomeTaken
-- @include runIndex
-- @include subject
-- @include bullmq:addStandardJob

local run = redis.call('HMGET', KEYS[1], 'status', 'cursor', 'resumes')
local status = run[1]
if not status then return { -3, '' } end
if status ~= ARGV[1] then return { -4, status } end
if tonumber(run[2] or '0') ~= tonumber(ARGV[2]) or tonumber(run[3] or '0') ~= tonumber(ARGV[3]) then return { -2, '' } end
local later = laterRunOf(KEYS[1], KEYS[15], ARGV[18])
if later then return { -23, later } end
local parent = outcomeTakenBy(KEYS[1])
if parent then return { -26, parent } end
local erased = redis.call('HMGET', KEYS[1], 'erasedAt', 'decidedStep')
if erased[1] and erased[2] and tonumber(erased[2]) == tonumber(run[2] or '0') then return { -25, '' } end
local packed = redis.call('GET', KEYS[16])
if (packed and redis.sha1hex(packed) or '') ~= (ARGV[20] or '') then return { -2, '' } end

local used = redis.call('HMGET', KEYS[2], 'stepsUsed', 'tokensUsed', 'costUsed')
local maxCost = tonumber(ARGV[19] or '0')
if tonumber(used[1] or '0') >= tonumber(ARGV[7]) then return { -18, 'steps' } end
if tonumber(used[2] or '0') >= tonumber(ARGV[8]) then return { -18, 'tokens' } end
if maxCost > 0 and tonumber(used[3] or '0') >= maxCost then return { -18, 'cost' } end
if tonumber(ARGV[5]) >= tonumber(ARGV[10]) then return { -18, 'wall_clock' } end

local actions = redis.call('SMEMBERS', KEYS[5])
-- The actions set holds the ledger records' keys (ledgerPlan-7.lua); the action id is their last part.
for _, ak in ipairs(actions) do
  local a = redis.call('HMGET', ak, 'state', 'approvalExpiresAt', 'decision')
  local id = string.match(ak, ':action:([^:]+)$') or ''
  local waiting = a[1] == 'needs_human' or (a[1] == 'planned' and a[2] and not a[3])
  if waiting then return { -19, id, 'person' } end
  if a[1] == 'compensation_required' then
    if redis.call('ZSCORE', KEYS[17], id) then return { -19, id, 'compensation' } end
    return { -19, id, 'compensated' }
  end
end

indexRunStatus(KEYS[1], 'running', ARGV[5], 0, status)
redis.call('HSET', KEYS[1], 'status', 'running', 'reason', '', 'jobId', ARGV[4], 'updatedAt', ARGV[5])
-- A cancel refused because the run had finished must not cancel the retried run.
redis.call('HDEL', KEYS[1], 'finishedAt', 'cancelRequested', 'cancelReason')
redis.call('HINCRBY', KEYS[1], 'resumes', 1)
redis.call('HINCRBY', KEYS[1], 'retries', 1)
redis.call('HSET', KEYS[2], 'maxSteps', ARGV[7], 'maxTokens', ARGV[8], 'maxWallMs', ARGV[9], 'deadlineAt', ARGV[10])
if maxCost > 0 then redis.call('HSET', KEYS[2], 'maxCost', ARGV[19]) end
if ARGV[11] == '1' then redis.call('HINCRBY', KEYS[2], 'extensions', 1) end
if packed then
  -- LPUSH puts each argument at the head in turn: the newest first, in chunks Lua's unpack takes.
  local last = #ARGV
  while last >= 21 do
    local first = math.max(21, last - 999)
    local chunk = {}
    for i = last, first, -1 do chunk[#chunk + 1] = ARGV[i] end
    redis.call('LPUSH', KEYS[3], unpack(chunk))
    last = first - 1
  end
  redis.call('DEL', KEYS[16])
end
redis.call('RPUSH', KEYS[3], ARGV[12])

persistRun({ KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5] }, KEYS[5])

emitEvents(KEYS[4], ARGV[6], { 'run_retried', ARGV[13], 'status_changed', ARGV[14] })
local bullKeys = {}
for i = 6, 14 do bullKeys[#bullKeys + 1] = KEYS[i] end
bullmqAddStandardJob(bullKeys, { ARGV[15], ARGV[16], ARGV[17] })
return { 1, '' }
