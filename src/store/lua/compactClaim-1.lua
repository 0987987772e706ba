--[[
  Claims the oldest runs of a shard's compaction queue for one compactor
  (src/runs/compactor.ts): each entry due (its score, the ms of the run's end or
  of a lapsed claim, at most now) is given the score now + lease, so another
  compactor passes it by until the claim lapses. A compactor that dies holding
  a claim leaves the run to the next pass after the lease.

  KEYS[1] compaction queue (zset: run id -> ms)
  ARGV[1] now (ms)  ARGV[2] lease (ms)  ARGV[3] most runs claimed

  Returns { the queue's lowest score before the claim ('' empty), then run id,
  claim score, the run's cursor ('' gone), ... }: the lowest score says how long
  the oldest waiting run has waited (a claim's lies ahead of now); the cursor
  says how many steps the run took, which chooses how it is read
  (src/runs/compact.ts SCRIPT_READ_MAX_STEPS). The run hash is named from the
  queue's name, as includes/runIndex.lua names the queue from the run's.
]]
local lowest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local until_ = tonumber(ARGV[1]) + tonumber(ARGV[2])
local base = string.match(KEYS[1], '^(.*):compact%-queue$')
local claimed = { lowest[2] or '' }
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], until_, id)
  claimed[#claimed + 1] = id
  claimed[#claimed + 1] = tostring(until_)
  claimed[#claimed + 1] = redis.call('HGET', base .. ':run:' .. id, 'cursor') or ''
end
return claimed
