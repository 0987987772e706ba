--[[
  Whether the server holds, as the step's journalled decision, the very decision a
  delivery acts on: the run's decidedStep is the step and the journal entry at its
  decisionIndex has the sha1 `digest` (of the entry as it was journalled).

  Why the content and not only decidedStep: a failover can take back a decision the
  old master acknowledged, and a delivery that made it may go on writing to the
  promoted replica, where the run has no decision for the step or another one (a
  later delivery asked the model again). An action planned there, or observations
  committed there, would follow a decision the store does not have: the action
  leaves under an identity no later delivery will ask for, and the transcript
  lacks the model's turn, so the model is asked that turn again.
]]
local function holdsDecision(runKey, journalKey, step, digest)
  local run = redis.call('HMGET', runKey, 'decidedStep', 'decisionIndex')
  if run[1] ~= step or not run[2] then return false end
  local entry = redis.call('LINDEX', journalKey, tonumber(run[2]))
  return entry ~= false and redis.sha1hex(entry) == digest
end
