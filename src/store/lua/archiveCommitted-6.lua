--[[
  A run's archive row is committed (src/archive/archiver.ts): mark the run
  archived, give its keys the retention TTL and take it off the archive queue,
  only if the run is still the one that was archived: still terminal, ended at
  the same time (a retry that ended again is archived again) and erased at the
  same time (an erasure in between is archived again, over the row) and
  revised as often (a change after its end, includes/expireRun.lua
  reviseEndedRun, in between is archived again, over the row).

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] journal list
  KEYS[4] events stream  KEYS[5] run's actions set  KEYS[6] archive queue (zset)

  ARGV[1] run id  ARGV[2] finishedAt archived  ARGV[3] erasedAt archived ('' none)
  ARGV[4] retention ms  ARGV[5] now (ms)  ARGV[6] revision archived

  Returns 1 marked (TTL set, dequeued); 0 the run changed since it was read
  (left queued: archive it again); 2 the run is at work again (dequeued: its
  next end queues it); -3 run missing (dequeued).
]]
-- @include expireRun
-- @include runStatus

local h = redis.call('HMGET', KEYS[1], 'status', 'finishedAt', 'erasedAt', 'revision')
if not h[1] then
  redis.call('ZREM', KEYS[6], ARGV[1])
  return -3
end
if not terminalStatus[h[1]] then
  redis.call('ZREM', KEYS[6], ARGV[1])
  return 2
end
if (h[2] or '') ~= ARGV[2] or (h[3] or '') ~= ARGV[3] or (tonumber(h[4]) or 0) ~= tonumber(ARGV[6]) then
  return 0
end
redis.call('HSET', KEYS[1], 'archivedAt', ARGV[5])
expireRun({ KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5] }, KEYS[5], ARGV[4])
redis.call('ZREM', KEYS[6], ARGV[1])
return 1
