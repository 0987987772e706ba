--[[
  Takes a run off its shard's compaction queue once its compaction is done
  (src/runs/compactor.ts), only if the entry is still the claim the compactor
  took: a run that ended again meanwhile (a retry) has its end's score and
  stays queued for that end.

  KEYS[1] compaction queue (zset)
  ARGV[1] run id  ARGV[2] the claim's score

  Returns 1 dequeued, 0 left queued.
]]
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
