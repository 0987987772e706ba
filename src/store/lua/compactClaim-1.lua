--[[
  Claims the oldest runs of a shard's compaction queue for one compactor
  (src/runs/compactor.ts): each entry due (its score, the ms of the run's end or
  of a lapsed claim, at most now) is given the score now + lease, so another
  compactor passes it by until the claim lapses. A compactor that dies holding
  a claim leaves the run to the next pass after the lease.

  KEYS[1] compaction queue (zset: run id -> ms)
  ARGV[1] now (ms)  ARGV[2] lease (ms)  ARGV[3] most runs claimed

  Returns { the queue's lowest score before the claim ('' empty), then run id,
  claim score, ... }: the lowest score says how long the oldest waiting run has
  waited (a claim's lies ahead of now).
]]
local lowest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local until_ = tonumber(ARGV[1]) + tonumber(ARGV[2])
local claimed = { lowest[2] or '' }
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], until_, id)
  claimed[#claimed + 1] = id
  claimed[#claimed + 1] = tostring(until_)
end
return claimed
