--[[
  Admits waiting runs in weighted round-robin (stride scheduling, includes/flowTurns.lua):
  the tenant whose next turn has the lowest pass goes first; each admission moves that
  tenant's pass on by its stride (scale / weight, a whole number), so a tenant of weight 2
  gets two turns to another's one. A tenant at its concurrency limit, or whose next run's
  agent is at its limit, is passed over; the fleet limit stops the round. Within a line,
  the lowest place goes first (a woken run waiting for its slot, then priority level, then
  arrival).

  KEYS[1] waiting hash  KEYS[2] held hash  KEYS[3] pending hash  KEYS[4] counts hash
  KEYS[5] turns zset    KEYS[6] passes hash  KEYS[7] settings hash  KEYS[8] admitted hash

  ARGV[1] now (ms)  ARGV[2] at most this many admissions
  ARGV[3] the admitting connection's owner name (pending until its jobs are released)
  ARGV[4] line key prefix (+ tenant)  ARGV[5] default weight
  ARGV[6] default tenant limit (0 = none)  ARGV[7] default agent limit (0 = none)
  ARGV[8] fleet limit (0 = none)
  ARGV[9] configured values (JSON object: `w:<tenant>`, `t:<tenant>`, `a:<agent>` -> number);
          a value set at run time (the settings hash) wins over it, and it over the default
  ARGV[10] stride scale (a weight's stride is scale / weight)
  ARGV[11] a run its caller has just created, or '': admitted by another process before it existed (pending, its
           job not found then), it is returned first, for its creator to release its job (src/flow/admission.ts)

  Returns a flat array {runId, shard, tenant, held, weight, jobId, ...} of the runs admitted:
  each holds a slot, counted, and is pending until the caller has released its job (jobId:
  a woken run's wake job, '' for a new run's step 1 job); held is its tenant's runs at work
  after it and weight the tenant's weight (the share its step jobs are ordered by,
  src/flow/stepPriority.ts). ARGV[11]'s run, when returned, has held and weight '' (not read here).
]]
-- @include flowTurns

local fleetLimit = flowNum(ARGV[8], 0)
local tenantDefault = flowNum(ARGV[6], 0)
local agentDefault = flowNum(ARGV[7], 0)
local scale = flowNum(ARGV[10], 1000000)
local setting = flowSettingReader(KEYS[7], ARGV[9])
local function weightOf(tenant) return setting('w:' .. tenant, flowNum(ARGV[5], 1)) end
local function strideOf(tenant) return flowStride(weightOf(tenant), scale) end
local out = {}

local function pick()
  local turns = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
  for i = 1, #turns, 2 do
    local tenant = turns[i]
    local line = ARGV[4] .. tenant
    local head = redis.call('ZRANGE', line, 0, 0)[1]
    if not head then
      redis.call('ZREM', KEYS[5], tenant)
    else
      local meta = cjson.decode(redis.call('HGET', KEYS[1], head))
      if flowUnderLimits(KEYS[4], setting, tenant, meta.agent, tenantDefault, agentDefault, 0) then
        return tenant, tonumber(turns[i + 1]), line, head, meta
      end
    end
  end
  return nil
end

if ARGV[11] ~= '' and redis.call('HEXISTS', KEYS[3], ARGV[11]) == 1 then
  local raw = redis.call('HGET', KEYS[2], ARGV[11])
  if raw then
    local meta = cjson.decode(raw)
    out = { ARGV[11], tostring(meta.shard), meta.tenant, '', '', meta.jobId or '' }
  end
end

flowRenormalise(KEYS[6], KEYS[5], strideOf)
while #out < 6 * flowNum(ARGV[2], 1) do
  if fleetLimit > 0 and flowNum(redis.call('HGET', KEYS[4], 'all'), 0) >= fleetLimit then break end
  local tenant, pass, line, runId, meta = pick()
  if not tenant then break end
  redis.call('ZREM', line, runId)
  redis.call('HDEL', KEYS[1], runId)
  meta.admittedAt = tonumber(ARGV[1])
  local held = flowTakeSlot(KEYS[2], KEYS[4], KEYS[8], runId, meta)
  redis.call('HSET', KEYS[3], runId, ARGV[3])
  flowTakeTurn(KEYS[6], KEYS[5], line, tenant, pass, strideOf(tenant))
  redis.call('HSET', KEYS[6], '~vtime', string.format('%.0f', pass))
  out[#out + 1] = runId
  out[#out + 1] = tostring(meta.shard)
  out[#out + 1] = tenant
  out[#out + 1] = held
  out[#out + 1] = tostring(weightOf(tenant))
  out[#out + 1] = meta.jobId or ''
end
return out
