--[[
  What the step's commit has already read or written, for its copies of BullMQ's
  completion and add (src/store/bullmqInternals.ts, STEP_JOB_EDITS), which would
  make the same call again: a call from a script costs the server far more than
  the read or write it makes.

  - The job's lock: the commit's fence read it holding the commit's token
    (includes/fence.lua), and nothing in the commit writes it before the
    completion's removeLock reads it again to compare the same token. Any other
    lock is read.
  - The queue's marker: once the commit's add set it (member "0", score 0: a job
    is ready), the fetch of the worker's next job setting it again changes
    nothing. Any other marker, or one not set yet, is set.
  - The queue's settings (its meta hash: paused, concurrency, the rate limit's
    max and duration): the add reads two of them and the fetch all four; read
    once, the four, and nothing in the commit writes them.

  beginCommitMemo runs at the commit's top, past its fence, before any of
  BullMQ's code: what an earlier commit left (one that stopped on an error) is
  never read.
]]
local commitMemo = { lockKey = false, token = false, marked = false, metaKey = false, meta = false }

local function beginCommitMemo(lockKey, token)
  commitMemo.lockKey = lockKey
  commitMemo.token = token
  commitMemo.marked = false
  commitMemo.metaKey = false
  commitMemo.meta = false
end

-- Answers once: the read it stands in for is followed by the lock's removal.
local function lockTokenOf(lockKey)
  if lockKey ~= commitMemo.lockKey then return redis.call('GET', lockKey) end
  commitMemo.lockKey = false
  return commitMemo.token
end

local function markQueue(markerKey)
  if markerKey == commitMemo.marked then return end
  redis.call('ZADD', markerKey, 0, '0')
  commitMemo.marked = markerKey
end

-- HMGET's reply for the queue's paused, concurrency, max and duration.
local function queueMetaOf(metaKey)
  if metaKey ~= commitMemo.metaKey then
    commitMemo.meta = redis.call('HMGET', metaKey, 'paused', 'concurrency', 'max', 'duration')
    commitMemo.metaKey = metaKey
  end
  return commitMemo.meta
end
