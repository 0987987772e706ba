--[[
  Takes runs off their shard's compaction queue once their compaction is done
  (src/runs/compactor.ts), each only if its entry is still the claim the
  compactor took: a run that ended again meanwhile (a retry) has its end's score
  and stays queued for that end. One call for a pass's batch of runs.

  KEYS[1] compaction queue (zset)
  ARGV[1] run id  ARGV[2] its claim's score  (ARGV[3], ARGV[4]: the next run's, ...)

  Returns, for each run in order, 1 dequeued or 0 left queued.
]]
local out = {}
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
