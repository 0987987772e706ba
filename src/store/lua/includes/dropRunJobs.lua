--[[
  A run that ended lets go of its completed step jobs, the ending one included:
  their hashes (the job's data, its return value, BullMQ's bookkeeping) and
  their places in the queue's completed set. Nothing reads them once the run
  has ended: the journal holds what each step did, the fence never relied on a
  job staying, the console lists a job that is gone as removed, and a retry or
  resume adds jobs under new ids (`.r<n>`). Failed jobs stay (removeOnFail:
  an operator inspects them).

  The completed set holds the latest COMPLETED_WINDOW jobs of the queue
  (src/runs/queues.ts): one walk of it, whatever the run's length.

  completedKey: the queue's completed zset; keyPrefix: the queue's key prefix
  (a job's hash is keyPrefix .. jobId); jobId: any step job id of the run
  (`<runId>.s<step>` or `<runId>.s<step>.r<n>`).
]]
local function dropRunJobs(completedKey, keyPrefix, jobId)
  local runJobs = string.match(jobId, '^(.-%.s)%d+')
  if not runJobs then return end
  local n = #runJobs
  for _, id in ipairs(redis.call('ZRANGE', completedKey, 0, -1)) do
    if string.sub(id, 1, n) == runJobs then
      redis.call('ZREM', completedKey, id)
      redis.call('DEL', keyPrefix .. id, keyPrefix .. id .. ':logs')
    end
  end
end
