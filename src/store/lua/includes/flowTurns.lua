--[[
  Flow control's limits and turns, shared by the scripts that give a run a slot
  (flowAdmit, flowWake; src/flow/admission.ts).

  Turns are stride scheduling in whole numbers: a tenant's pass moves on by its
  stride, round(scale / weight), at each slot it takes; the tenant with the
  lowest pass goes next. The scale comes from src/core/flowWeight.ts (weights
  from 0.001 to 1000: strides of 1,000 to 10^9). Whole numbers add exactly in
  Lua's doubles below 2^53; once the virtual time (the pass last served,
  `~vtime`) or any turn passes 2^50, every pass is moved down by the virtual
  time, keeping each tenant's lead (at most one stride of its own). Passes left
  near 1e300 by a weight of 1e-300 (accepted before weights were bounded), where
  adding a stride changed nothing, are repaired the same way.
]]
local FLOW_RENORMALISE_AT = 1125899906842624 -- 2^50

local function flowNum(v, def) return tonumber(v or '') or def end

-- A setting: the value set at run time (settings hash), else the configured one, else the default.
local function flowSettingReader(settingsKey, configuredJson)
  local configured = cjson.decode(configuredJson)
  return function(field, def)
    return flowNum(redis.call('HGET', settingsKey, field), flowNum(configured[field], def))
  end
end

-- A weight's stride, bounded by the weights' bounds (a weight stored before they existed included).
local function flowStride(weight, scale)
  local most = scale * 1000
  if not weight or weight <= 0 then return most end
  local s = math.floor(scale / weight + 0.5)
  if s < 1 then return 1 end
  if s > most then return most end
  return s
end

-- Whether a tenant, the run's agent and the fleet are under their limits (0 = none).
local function flowUnderLimits(countsKey, setting, tenant, agent, tenantDefault, agentDefault, fleetLimit)
  if fleetLimit > 0 and flowNum(redis.call('HGET', countsKey, 'all'), 0) >= fleetLimit then return false end
  local limit = setting('t:' .. tenant, tenantDefault)
  if limit > 0 and flowNum(redis.call('HGET', countsKey, 't:' .. tenant), 0) >= limit then return false end
  local agentLimit = setting('a:' .. agent, agentDefault)
  return agentLimit == 0 or flowNum(redis.call('HGET', countsKey, 'a:' .. agent), 0) < agentLimit
end

-- Every pass moved down by the virtual time when it has grown past 2^50 (see above).
local function flowRenormalise(passesKey, turnsKey, strideOf)
  local base = flowNum(redis.call('HGET', passesKey, '~vtime'), 0)
  local highest = redis.call('ZRANGE', turnsKey, -1, -1, 'WITHSCORES')[2]
  if base < FLOW_RENORMALISE_AT and flowNum(highest, 0) < FLOW_RENORMALISE_AT then return end
  local function lead(tenant, pass)
    local l = math.floor(tonumber(pass) - base)
    if l < 0 then return 0 end
    return math.min(l, strideOf(tenant))
  end
  local passes = redis.call('HGETALL', passesKey)
  for i = 1, #passes, 2 do
    if passes[i] ~= '~vtime' then
      redis.call('HSET', passesKey, passes[i], string.format('%.0f', lead(passes[i], passes[i + 1])))
    end
  end
  redis.call('HSET', passesKey, '~vtime', '0')
  local turns = redis.call('ZRANGE', turnsKey, 0, -1, 'WITHSCORES')
  for i = 1, #turns, 2 do
    redis.call('ZADD', turnsKey, string.format('%.0f', lead(turns[i], turns[i + 1])), turns[i])
  end
end

-- The pass a tenant takes its next slot at: its turn's when it is in the turns, else where it would join them.
local function flowPassOf(passesKey, turnsKey, tenant)
  local turn = redis.call('ZSCORE', turnsKey, tenant)
  if turn then return tonumber(turn) end
  return math.max(flowNum(redis.call('HGET', passesKey, tenant), 0), flowNum(redis.call('HGET', passesKey, '~vtime'), 0))
end

-- A tenant took a slot at `pass`: its pass moves on by its stride; it stays in the turns while its line has runs.
local function flowTakeTurn(passesKey, turnsKey, line, tenant, pass, stride)
  local nextPass = string.format('%.0f', pass + stride)
  redis.call('HSET', passesKey, tenant, nextPass)
  if redis.call('ZCARD', line) == 0 then
    redis.call('ZREM', turnsKey, tenant)
  else
    redis.call('ZADD', turnsKey, nextPass, tenant)
  end
end

-- A run takes a slot: held (its JSON), counted for its tenant, its agent and the fleet.
local function flowTakeSlot(heldKey, countsKey, admittedKey, runId, meta)
  redis.call('HSET', heldKey, runId, cjson.encode(meta))
  local held = redis.call('HINCRBY', countsKey, 't:' .. meta.tenant, 1)
  redis.call('HINCRBY', countsKey, 'a:' .. meta.agent, 1)
  redis.call('HINCRBY', countsKey, 'all', 1)
  redis.call('HINCRBY', admittedKey, meta.tenant, 1)
  return held
end

-- Slot generations ({step, resume} of the job a slot was taken for): is `a` at least as new as `b`? None is oldest.
local function flowGenAtLeast(a, b)
  if not b then return true end
  if not a then return false end
  if a[1] ~= b[1] then return a[1] > b[1] end
  return a[2] >= b[2]
end
