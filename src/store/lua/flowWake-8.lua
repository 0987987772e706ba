--[[
  A run woken from a wait (its event came, its sleep ended, its children ended)
  asks for a slot: it gave its own back when it parked, and its next step runs
  only with one. It waits like any run, under the same tenant, agent and fleet
  limits, at the front of its tenant's line (src/flow/admission.ts, `wake`, says
  why that is fair).

  The slot is recorded with its generation (ARGV[2]'s `gen`: the step and resume
  of the wake job), so a release sent for an older job (the commit that parked
  the run, its worker slow to send it) cannot free it (flowRelease-5.lua).

  KEYS[1] waiting hash  KEYS[2] held hash  KEYS[3] pending hash  KEYS[4] counts hash
  KEYS[5] turns zset    KEYS[6] passes hash  KEYS[7] settings hash  KEYS[8] admitted hash

  ARGV[1] run id  ARGV[2] the run's JSON (tenant, agent, shard, priority, at, jobId, gen)
  ARGV[3] line key prefix (+ tenant)  ARGV[4] default weight
  ARGV[5] default tenant limit (0 = none)  ARGV[6] default agent limit (0 = none)
  ARGV[7] fleet limit (0 = none)  ARGV[8] configured values (JSON, as flowAdmit's ARGV[9])
  ARGV[9] stride scale  ARGV[10] its place at the front of the line (below every new run's)

  Returns 1 the run holds a slot for this wake (taken now, or admitted while it
  waited), 2 it kept the slot of the step that parked it (whose release had not
  come yet), 0 it waits in its tenant's line (put there now, or before).
]]
-- @include flowTurns

local runId = ARGV[1]
local meta = cjson.decode(ARGV[2])
local held = redis.call('HGET', KEYS[2], runId)
if held then
  local h = cjson.decode(held)
  if flowGenAtLeast(h.gen, meta.gen) then return 1 end
  -- Parked and woken before its worker gave the slot back: the run keeps it (one slot, counted once), now for this
  -- wake, and the late release finds a newer generation and leaves it.
  h.gen = meta.gen
  h.jobId = meta.jobId
  redis.call('HSET', KEYS[2], runId, cjson.encode(h))
  redis.call('HDEL', KEYS[3], runId)
  return 2
end
if redis.call('HEXISTS', KEYS[1], runId) == 1 then return 0 end

local setting = flowSettingReader(KEYS[7], ARGV[8])
local tenant = meta.tenant
local line = ARGV[3] .. tenant
local scale = flowNum(ARGV[9], 1000000)
local function strideOf(t) return flowStride(setting('w:' .. t, flowNum(ARGV[4], 1)), scale) end
flowRenormalise(KEYS[6], KEYS[5], strideOf)
-- No run woken before it waits in its line (those go first), and the limits allow: the slot now, its tenant's turn
-- taken as an admission takes it.
local head = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')
local behindWoken = head[2] ~= nil and tonumber(head[2]) < 0
if not behindWoken and flowUnderLimits(KEYS[4], setting, tenant, meta.agent, flowNum(ARGV[5], 0), flowNum(ARGV[6], 0), flowNum(ARGV[7], 0)) then
  meta.admittedAt = meta.at
  flowTakeSlot(KEYS[2], KEYS[4], KEYS[8], runId, meta)
  flowTakeTurn(KEYS[6], KEYS[5], line, tenant, flowPassOf(KEYS[6], KEYS[5], tenant), strideOf(tenant))
  return 1
end
-- In line, at the front: joining the turns where an idle tenant joins (flowEnqueue-6.lua).
redis.call('HSET', KEYS[1], runId, ARGV[2])
redis.call('ZADD', line, ARGV[10], runId)
if not redis.call('ZSCORE', KEYS[5], tenant) then
  redis.call('ZADD', KEYS[5], string.format('%.0f', flowPassOf(KEYS[6], KEYS[5], tenant)), tenant)
end
return 0
