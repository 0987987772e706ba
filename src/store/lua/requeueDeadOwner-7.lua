--[[
  Moves back to wait every active job whose lock token names a Redis
  connection that no longer exists (the process that held it died: the kernel closed its
  connection), as BullMQ's own stall check would move a job whose lock expired,
  without waiting for the lock to expire. A job is moved only while its lock
  still names that owner (`<base>@<owner>:<n>`, src/store/owners.ts): a job
  another worker has taken meanwhile, or whose lock expired, is left alone, so a
  live owner is never robbed. An owner names its server too, so it is never
  reused, even after a restart or a failover.

  What it updates, like moveStalledJobsToWait: the lock is deleted, the job is
  removed from the active list and the stalled set, its stalled counter `stc`
  is incremented (past the maximum the job is marked to fail on its next fetch,
  `defa`, with BullMQ's own reason, so a step that keeps killing its workers ends
  needs_human / stalled_too_often), it is pushed to the head of the wait list
  (RPUSH: the next one taken; a paused queue keeps it there too, as in BullMQ 6),
  the queue's marker wakes a blocked worker unless the queue is paused or at its
  global concurrency, and the queue's event stream gets `waiting` (prev active)
  and `stalled`.

  KEYS[1] active list   KEYS[2] wait list   KEYS[3] stalled set
  KEYS[4] meta hash     KEYS[5] marker zset KEYS[6] event stream
  KEYS[7] the owner watch's last scan of the queue (activeOwners-2.lua): let go
          once a job moved, so the next pass scans again and the other watchers
          do not look for the same owner's jobs while it is kept

  ARGV[1] the queue's key prefix (`<bullPrefix>:<queue>:`)
  ARGV[2] the vanished owner
  ARGV[3] max stalled count (MAX_STALLED_COUNT)

  Returns the ids of the jobs moved (empty when none).
]]
local prefix = ARGV[1]
local deadOwner = ARGV[2]
local maxStalled = tonumber(ARGV[3])

local meta = redis.call('HMGET', KEYS[4], 'paused', 'concurrency', 'opts.maxLenEvents')
local maxEvents = meta[3] or 10000

local moved = {}
local active = redis.call('LRANGE', KEYS[1], 0, -1)
for _, jobId in ipairs(active) do
  local jobKey = prefix .. jobId
  local lockKey = jobKey .. ':lock'
  local token = redis.call('GET', lockKey)
  if token and string.match(token, '@(%d+[%-%x]*):%d+$') == deadOwner then
    redis.call('DEL', lockKey)
    redis.call('SREM', KEYS[3], jobId)
    redis.call('LREM', KEYS[1], 1, jobId)
    if redis.call('HINCRBY', jobKey, 'stc', 1) > maxStalled then
      redis.call('HSET', jobKey, 'defa', 'job stalled more than allowable limit')
    end
    -- A paused queue, or one at its global concurrency, takes no job now: no marker then (BullMQ's isQueuePausedOrMaxed).
    local held = meta[1] or (meta[2] and redis.call('LLEN', KEYS[1]) >= tonumber(meta[2]))
    redis.call('RPUSH', KEYS[2], jobId)
    if not held then redis.call('ZADD', KEYS[5], 0, '0') end
    redis.call('XADD', KEYS[6], 'MAXLEN', '~', maxEvents, '*', 'event', 'waiting', 'jobId', jobId, 'prev', 'active')
    redis.call('XADD', KEYS[6], 'MAXLEN', '~', maxEvents, '*', 'event', 'stalled', 'jobId', jobId)
    moved[#moved + 1] = jobId
  end
end
if #moved > 0 then redis.call('DEL', KEYS[7]) end
return moved
