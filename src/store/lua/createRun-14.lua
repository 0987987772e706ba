--[[
  Creates a run and its first step job in one atomic change, linked to the
  latest run of its subject (follow-ups).

  KEYS[1] run hash            KEYS[2] budget hash
  KEYS[3] events stream       KEYS[4] shard run index (zset)
  KEYS[5] subject's latest run (string; KeySpace.subjectLatest, same shard)
  KEYS[6..14] BullMQ addStandardJob keys for step 1's job

  ARGV[1] run id              ARGV[2] now (ms)
  ARGV[3] run fields (JSON object of strings; `spec` is the spec's JSON)
  ARGV[4] budget fields (JSON object of strings)
  ARGV[5] created event (JSON)   ARGV[6] events max length
  ARGV[7] intake mode: 'event' (one run per event, linked to the subject's
          latest run) or 'subject' (no event named: the subject's latest run
          is the run, when one exists)
  ARGV[8] the subject record's TTL (ms)
  ARGV[9..11] BullMQ addStandardJob argv
  ARGV[12] '' (step 1's job goes to the queue), or the ms step 1's job starts at unless admitted before (flow
           control: the job waits in the delayed set for its admission, src/flow/admission.ts)
  ARGV[13] step 1's job id (its hash is the queue's prefix, from KEYS[6], and this id, as BullMQ names it)

  Returns: {1, previousRunId or ''} created (linked when previousRunId is set);
           {0, runId} the run already existed (the same event again; nothing written);
           {2, latestRunId} mode 'subject' and the subject has a latest run: that run
           (nothing written).

  The previous run (same shard: every run of a subject lives on the subject's
  home shard) gets `nextRunId` and a `follow_up` event; the new run's hash and
  spec get `previousRunId`. A latest run whose keys expired links nothing.
  Keeps the run listing indexes (includes/runIndex.lua) and the run's search
  indexes (the run field `searchKeys`, includes/searchIndex.lua) in the same
  change.
]]
-- @include searchIndex
-- @include emitEvent
-- @include runIndex
-- @include bullmq:addStandardJob

if redis.call('EXISTS', KEYS[1]) == 1 then return { 0, ARGV[1] } end

local runKeyPrefix = string.match(KEYS[1], '^(.*:run:)[^:]+$')
local previous = redis.call('GET', KEYS[5])
if previous and redis.call('EXISTS', runKeyPrefix .. previous) == 0 then previous = nil end
if previous and ARGV[7] == 'subject' then return { 2, previous } end

local fields = cjson.decode(ARGV[3])
if previous then
  fields['previousRunId'] = previous
  -- Run ids are r_ and hex digits: spliced into the spec's JSON object as its first member.
  fields['spec'] = '{"previousRunId":"' .. previous .. '",' .. string.sub(fields['spec'], 2)
end

local function hsetFields(key, t)
  local flat = {}
  for k, v in pairs(t) do
    flat[#flat + 1] = k
    flat[#flat + 1] = tostring(v)
  end
  if #flat > 0 then redis.call('HSET', key, unpack(flat)) end
end

hsetFields(KEYS[1], fields)
-- The counters every commit increments go first: a small hash is one listpack, searched from its start, and pairs()
-- would put them anywhere.
local budget = cjson.decode(ARGV[4])
local counters = {}
for _, f in ipairs({ 'stepsUsed', 'tokensUsed', 'contextBytes' }) do
  if budget[f] ~= nil then
    counters[f] = budget[f]
    budget[f] = nil
  end
end
hsetFields(KEYS[2], counters)
hsetFields(KEYS[2], budget)
indexRunCreated(KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
if fields['searchKeys'] then searchIndexAdd(KEYS[1], ARGV[1], ARGV[2], cjson.decode(fields['searchKeys'])) end
emitEvent(KEYS[3], ARGV[6], 'run_created', ARGV[5])
redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[8])
if previous then
  local previousKey = runKeyPrefix .. previous
  redis.call('HSET', previousKey, 'nextRunId', ARGV[1])
  emitEvent(previousKey .. ':events', ARGV[6], 'follow_up', cjson.encode({ nextRunId = ARGV[1] }))
end

local bullKeys = {}
for i = 6, 14 do bullKeys[#bullKeys + 1] = KEYS[i] end
bullmqAddStandardJob(bullKeys, { ARGV[9], ARGV[10], ARGV[11] })
-- Deferred for its admission in the same change, so no worker can take the job before it is admitted. A job BullMQ
-- put in the paused list (the queue paused) is left there.
if ARGV[12] ~= '' and redis.call('LREM', KEYS[6], 1, ARGV[13]) == 1 then
  local startsAt = tonumber(ARGV[12])
  local jobKey = string.sub(KEYS[6], 1, #KEYS[6] - #'wait') .. ARGV[13]
  -- BullMQ's delayed score: the timestamp times 0x1000 (its low bits order jobs of one ms).
  redis.call('ZADD', KEYS[11], startsAt * 0x1000, ARGV[13])
  redis.call('HSET', jobKey, 'delay', startsAt - tonumber(redis.call('HGET', jobKey, 'timestamp') or startsAt))
end
return { 1, previous or '' }
