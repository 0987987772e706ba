--[[
  Creates a run and its first step job in one atomic change.

  KEYS[1] run hash            KEYS[2] budget hash
  KEYS[3] events stream       KEYS[4] shard run index (zset)
  KEYS[5..13] BullMQ addStandardJob keys for step 1's job

  ARGV[1] run id              ARGV[2] now (ms)
  ARGV[3] run fields (JSON object of strings)
  ARGV[4] budget fields (JSON object of strings)
  ARGV[5] created event (JSON)   ARGV[6] events max length
  ARGV[7..9] BullMQ addStandardJob argv

  Returns: 1 created, 0 the run already existed (nothing written).

  Keeps the run listing indexes (includes/runIndex.lua) in the same change.
]]
-- @include emitEvent
-- @include runIndex
-- @include bullmq:addStandardJob

if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end

local function hsetJson(key, json)
  local fields = cjson.decode(json)
  local flat = {}
  for k, v in pairs(fields) do
    flat[#flat + 1] = k
    flat[#flat + 1] = tostring(v)
  end
  redis.call('HSET', key, unpack(flat))
end

hsetJson(KEYS[1], ARGV[3])
hsetJson(KEYS[2], ARGV[4])
indexRunCreated(KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
emitEvent(KEYS[3], ARGV[6], 'run_created', ARGV[5])

local bullKeys = {}
for i = 5, 13 do bullKeys[#bullKeys + 1] = KEYS[i] end
bullmqAddStandardJob(bullKeys, { ARGV[7], ARGV[8], ARGV[9] })
return 1
