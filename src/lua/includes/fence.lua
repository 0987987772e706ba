--[[
  Fence shared by every script that writes a step's outcome.
  Succeeds only if the caller still holds the BullMQ lock of the step's job
  (KEYS lock == token) and the run's cursor is still the caller's step.
  Returns 0 when the fence holds, else a negative code (see src/redis/codes.ts).
]]
local function checkFence(runKey, lockKey, token, step)
  if redis.call('GET', lockKey) ~= token then return -1 end
  local cursor = redis.call('HGET', runKey, 'cursor')
  if not cursor then return -3 end
  if tonumber(cursor) ~= step then return -2 end
  local status = redis.call('HGET', runKey, 'status')
  if status ~= 'running' and status ~= 'queued' then return -4 end
  return 0
end
