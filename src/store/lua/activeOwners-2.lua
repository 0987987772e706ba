--[[
  The owners named by the lock tokens of a queue's active jobs.
  A FleetWorker's lock token is `<base>@<owner>:<n>` (src/worker/ownerWatch.ts),
  owner `<clientId>-<server>` (or `<clientId>` from an older process): the
  connection that holds the job (src/store/owners.ts).
  Tokens of any other shape (another BullMQ user of the queue) are skipped, and
  so are active jobs whose lock is gone (BullMQ's stall check handles those).

  Every worker of the fleet asks this of the same queue every pass, and the
  scan reads one lock per active job: done by each, it would cost the server
  workers x active jobs reads a pass, which grows with the square of the fleet
  (20 workers of concurrency 20: 400 locks read 200 times a second). So the
  scan's answer is kept for one pass's period and the passes within it read
  that: one scan a period, whatever the fleet's size. An owner that takes its
  first job within the period is found by the next scan; every owner the
  answer names stays checked by each pass.

  KEYS[1] the queue's active list (BullMQ layout)
  KEYS[2] the queue's last scan (a string: the owners, space-separated), in the queue's hash slot

  ARGV[1] the queue's key prefix (`<bullPrefix>:<queue>:`); a job's lock key is
          <prefix><jobId>:lock, in the queue's hash slot
  ARGV[2] how long a scan's answer is kept (ms); 0: always scan, keep nothing

  Returns the distinct owners (empty when none).
]]
local ttl = tonumber(ARGV[2])
local ids = {}
if ttl > 0 then
  local kept = redis.call('GET', KEYS[2])
  if kept then
    for owner in string.gmatch(kept, '%S+') do ids[#ids + 1] = owner end
    return ids
  end
end
local active = redis.call('LRANGE', KEYS[1], 0, -1)
local seen = {}
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
if ttl > 0 then redis.call('SET', KEYS[2], table.concat(ids, ' '), 'PX', ttl) end
return ids
