--[[
  One run at work per subject: only the subject's latest run may come back to
  work (retry, resume after a person's decision, version continue). A later run
  of the subject supersedes every earlier one: it was created while they were
  not at work (a follow-up waits while its previous run is queued or running),
  and letting an earlier run go on now would put two runs to work on one subject.

  The later run is the run's `nextRunId` (createRun links a follow-up to its
  previous run), else the subject's latest run (KeySpace.subjectLatest) when it
  is another run: a run created after the link could not be made (the subject
  record had expired while this run was parked).
]]
local function laterRunOf(runKey, latestKey, runId)
  local nextRunId = redis.call('HGET', runKey, 'nextRunId')
  if nextRunId then return nextRunId end
  local latest = redis.call('GET', latestKey)
  if latest and latest ~= runId then return latest end
  return nil
end
