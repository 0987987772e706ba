--[[
  Retention: a finished run's keys expire after retentionMs, its ledger
  records (hash, history, reservation) included; a retried run's keys are
  made persistent again. All share the run's hash tag. A retention of 0 or
  less sets no TTL: a negative one means the run waits for its archive row
  (includes/runIndex.lua), after which archiveCommitted-6.lua sets it.
  The run's search indexes (includes/searchIndex.lua) follow: they expire once
  their last run has got its TTL (a run held for its archive row keeps them). `keys` are the run hash, budget, journal and events
  stream, in that order, and more; an ended run's packed events and packed
  journal (KeySpace.run().eventsPacked, `<events>-packed`, and journalPacked,
  `<journal>-packed`) are named from the stream's and the list's keys here, and
  an action's folded history lives in its record.

  Held for a person: a run that ends while one of its actions waits (its
  outcome unknown: dispatched, outcome_unknown, needs_human; or it is in the
  shard's human queue, `<prefix>:{N}:human-queue`, named from the run hash's
  key like includes/runIndex.lua's keys) gets no TTL at all, and its hash
  `retentionHeld` is set: the record, its history, the run's tenant, subject,
  spec and journal are what the human-queue item and a person's finding read,
  and the reconciler's sweep what it settles an open action with. Nothing
  of it expires while it waits. The move that ends the last wait
  (ledgerTransition-6.lua, ledgerAccept-3.lua, leaveHumanQueue-2.lua) lets
  the run go with the retention then (releaseHeldRun). The run stays counted
  in its search indexes meanwhile, so an erasure by a search value finds it.

  Changed after its end: a run's archive row is a copy of the run as it was
  read, and a run ended held for a person changes after that copy (the move
  that settles its action, the person's finding in its journal). Every script
  that writes to a run that may have ended without ending it (ledger moves,
  an approval voided, an operator's journal entry) calls reviseEndedRun in the
  same atomic change, so the row is written again (src/archive/archiver.ts).
]]
-- @include searchIndex
-- @include runStatus
local function eachRunKey(keys, actionsKey, fn)
  for _, k in ipairs(keys) do fn(k) end
  fn(keys[3] .. '-packed')
  fn(keys[4] .. '-packed')
  -- The run's child runs and hand-offs (src/runs/children.ts, KeySpace.run's `children` and `handoffs`): the
  -- hand-offs are what keeps a hand-off asked again from starting a second child, so they live as the run does,
  -- not only until the deadline they were listed with (a retry may extend it).
  fn(keys[1] .. ':children')
  fn(keys[1] .. ':handoffs')
  for _, ak in ipairs(redis.call('SMEMBERS', actionsKey)) do
    fn(ak)
    fn(ak .. ':history')
    local reservation = redis.call('HGET', ak, 'reservationKey')
    if reservation then fn(reservation) end
  end
end

local waitingStates = { dispatched = true, outcome_unknown = true, needs_human = true }

-- Whether an action of the run waits: its outcome not known yet, or in the shard's human queue.
local function runWaits(runKey, actionsKey)
  local human = string.match(runKey, '^(.*):run:[^:]+$') .. ':human-queue'
  for _, ak in ipairs(redis.call('SMEMBERS', actionsKey)) do
    local a = redis.call('HMGET', ak, 'state', 'actionId')
    if a[1] and waitingStates[a[1]] then return true end
    if a[2] and redis.call('ZSCORE', human, a[2]) then return true end
  end
  return false
end

-- A run's keys with a TTL of their own before its end (listed with the parent's deadline, src/runs/children.ts):
-- kept as the rest of the run is while it is held for a person or waits for its archive row (the archive copies its
-- children from them).
local function persistRunLinks(runKey)
  redis.call('PERSIST', runKey .. ':children')
  redis.call('PERSIST', runKey .. ':handoffs')
end

local function expireRun(keys, actionsKey, retentionMs)
  if runWaits(keys[1], actionsKey) then
    redis.call('HSET', keys[1], 'retentionHeld', '1')
    persistRunLinks(keys[1])
    return
  end
  redis.call('HDEL', keys[1], 'retentionHeld')
  searchIndexEnded(keys[1], retentionMs)
  if tonumber(retentionMs) <= 0 then
    persistRunLinks(keys[1])
    return
  end
  eachRunKey(keys, actionsKey, function(k) redis.call('PEXPIRE', k, retentionMs) end)
end

local function runKeysOf(runKey)
  return { runKey, runKey .. ':budget', runKey .. ':journal', runKey .. ':events', runKey .. ':actions' }
end

-- The shard's archive queue (includes/runIndex.lua) and the run's id, named from the run hash's key.
local function archiveQueueOf(runKey)
  return string.match(runKey, '^(.*):run:[^:]+$') .. ':archive-queue', string.match(runKey, ':run:([^:]+)$')
end

-- A change to an ended run (see above). A run with an archive row, or queued for one, gets its `revision` counted
-- up: the row's version after the run's end and erasure times, and a fence of archiveCommitted-6.lua, so a copy read
-- before the change is never marked as the run's last. An archived run goes back on its shard's archive queue (scored
-- by the change: the archive's lag counts from it) and its keys lose their TTL until the new row is committed, as at
-- its end. A run at work, or ended without an archive (never queued nor archived), is left.
local function reviseEndedRun(runKey, now)
  local h = redis.call('HMGET', runKey, 'status', 'archivedAt')
  if not terminalStatus[h[1]] then return end
  local queue, runId = archiveQueueOf(runKey)
  local queued = redis.call('ZSCORE', queue, runId)
  if not queued and (tonumber(h[2]) or 0) == 0 then return end
  redis.call('HINCRBY', runKey, 'revision', 1)
  if queued then return end
  redis.call('ZADD', queue, now, runId)
  eachRunKey(runKeysOf(runKey), runKey .. ':actions', function(k) redis.call('PERSIST', k) end)
end

-- A run held for a person (expireRun) whose last wait has ended: its keys get the retention now. A negative
-- retention (an archive is configured): the retention itself when the run's archive row is committed and current
-- (archived, and not queued again by a change since: reviseEndedRun), else nothing yet (archiveCommitted-6.lua sets
-- it once the row is written). Anything else (not held, at work again, still waiting) is left.
local function releaseHeldRun(runKey, retentionMs)
  if retentionMs == nil or retentionMs == '' then return end
  local h = redis.call('HMGET', runKey, 'retentionHeld', 'status', 'archivedAt')
  if h[1] ~= '1' or not terminalStatus[h[2]] then return end
  local actionsKey = runKey .. ':actions'
  if runWaits(runKey, actionsKey) then return end
  local retention = tonumber(retentionMs) or 0
  if retention < 0 and (tonumber(h[3]) or 0) > 0 then
    local queue, runId = archiveQueueOf(runKey)
    if not redis.call('ZSCORE', queue, runId) then retention = -retention end
  end
  expireRun(runKeysOf(runKey), actionsKey, retention)
end

local function persistRun(keys, actionsKey)
  redis.call('HDEL', keys[1], 'retentionHeld')
  searchIndexLive(keys[1], searchKeysOf(keys[1]))
  eachRunKey(keys, actionsKey, function(k) redis.call('PERSIST', k) end)
end
