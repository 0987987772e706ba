--[[
  The owners named by the lock tokens of a queue's active jobs (read only).
  A FleetWorker's lock token is `<base>@<owner>:<n>` (src/worker/ownerWatch.ts),
  owner `<clientId>-<server>` (or `<clientId>` from an older process): the
  connection that holds the job (src/store/owners.ts).
  Tokens of any other shape (another BullMQ user of the queue) are skipped, and
  so are active jobs whose lock is gone (BullMQ's stall check handles those).

  KEYS[1] the queue's active list (BullMQ layout)

  ARGV[1] the queue's key prefix (`<bullPrefix>:<queue>:`); a job's lock key is
          <prefix><jobId>:lock, in the queue's hash slot

  Returns the distinct owners (empty when none).
]]
local active = redis.call('LRANGE', KEYS[1], 0, -1)
local seen = {}
local ids = {}
for _, jobId in ipairs(active) do
  local token = redis.call('GET', ARGV[1] .. jobId .. ':lock')
  if token then
    local owner = string.match(token, '@(%d+[%-%x]*):%d+$')
    if owner and not seen[owner] then
      seen[owner] = true
      ids[#ids + 1] = owner
    end
  end
end
return ids
