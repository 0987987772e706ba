--[[
  Fence shared by every script that writes a step's outcome.
  Succeeds only if the caller still holds the BullMQ lock of the step's job
  (lock key == token), that job is the run's current job (run.jobId), and the
  run's cursor is still the caller's step.
  Returns 0 when the fence holds, else a negative code (see src/store/codes.ts).
]]
-- Also returns the run's decidedStep, cancelRequested, cancelReason, status and reason (one HMGET for all).
local function checkFence(runKey, lockKey, token, step, jobId)
  if redis.call('GET', lockKey) ~= token then return -1 end
  local run = redis.call('HMGET', runKey, 'cursor', 'status', 'jobId', 'decidedStep', 'cancelRequested', 'cancelReason',
    'reason')
  if not run[1] then return -3 end
  if tonumber(run[1]) ~= step or run[3] ~= jobId then return -2 end
  if run[2] ~= 'running' and run[2] ~= 'queued' then return -4 end
  return 0, run[4], run[5], run[6], run[2], run[7] or ''
end
