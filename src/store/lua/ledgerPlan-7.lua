--[[
  Looks an action up by its id, or plans it: creates the ledger record in
  state `planned` and takes the SET NX reservation on its idempotency key.

  KEYS[1] action hash  KEYS[2] action history list
  KEYS[3] reservation key (idempotency key)  KEYS[4] run's actions set
  KEYS[5] the run's events stream (an `effect` event when the action is planned)
  KEYS[6] the run's hash  KEYS[7] the run's journal (the decision the action follows)

  ARGV[1] action id  ARGV[2] record fields (JSON object of strings)
  ARGV[3] history entry (JSON)  ARGV[4] step  ARGV[5] call id
  ARGV[6] events max length  ARGV[7] effect event (JSON)
  ARGV[8] sha1 of the journalled decision entry that asked for the action ('' for an
          action planned outside a step: an operator's compensation)

  One call of a step's journalled decision is one action, whatever its id computes
  to now. The id comes from the tool's `identity` function, which is code: a deploy or
  a version continue between two deliveries of a step can change it, and the step's
  journalled decision then asks again, under a new id, for the write it asked for
  before. A call (step and call id) the run planned an action for already gets that
  action, never a second one with a second idempotency key.

  Returns {status, state, repeats, actionId}: status 'new' | 'existing' | 'repeat'
  ('repeat' = the same write requested again from another step/call: a loop signal),
  actionId the action the call has (ARGV[1], or the one this call planned under
  another id); or -13 when the reservation is held by another action, or -24 when this
  server does not hold that decision as the step's journalled one (nothing is planned:
  the action must not leave; see includes/journalledDecision.lua).
]]
-- @include emitEvent
-- @include journalledDecision

if ARGV[8] ~= '' and not holdsDecision(KEYS[6], KEYS[7], ARGV[4], ARGV[8]) then return -24 end

-- The action this call (step, call id) planned before under another id, if any: {state, repeats, actionId}.
local function plannedByCall(actionsKey, step, callId)
  for _, ak in ipairs(redis.call('SMEMBERS', actionsKey)) do
    local a = redis.call('HMGET', ak, 'step', 'callId', 'state', 'repeats', 'actionId')
    if a[1] == step and a[2] == callId and a[3] and a[5] then return { a[3], tonumber(a[4] or '0'), a[5] } end
  end
end

local existing = redis.call('HMGET', KEYS[1], 'state', 'step', 'callId', 'repeats')
if existing[1] and existing[2] == ARGV[4] and existing[3] == ARGV[5] then
  return { 'existing', existing[1], tonumber(existing[4] or '0'), ARGV[1] }
end
-- A call without an id names no call: it has no action but its own.
local before = ARGV[5] ~= '' and plannedByCall(KEYS[4], ARGV[4], ARGV[5])
if before then return { 'existing', before[1], before[2], before[3] } end
if existing[1] then
  local repeats = redis.call('HINCRBY', KEYS[1], 'repeats', 1)
  return { 'repeat', existing[1], repeats, ARGV[1] }
end

local holder = redis.call('GET', KEYS[3])
if holder and holder ~= ARGV[1] then return -13 end
redis.call('SET', KEYS[3], ARGV[1])

local fields = cjson.decode(ARGV[2])
local flat = {}
for k, v in pairs(fields) do
  flat[#flat + 1] = k
  flat[#flat + 1] = v
end
redis.call('HSET', KEYS[1], unpack(flat))
redis.call('HSET', KEYS[1], 'state', 'planned', 'repeats', 0, 'attempts', 0, 'reservationKey', KEYS[3])
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('SADD', KEYS[4], KEYS[1])
emitEvent(KEYS[5], ARGV[6], 'effect', ARGV[7])
return { 'new', 'planned', 0, ARGV[1] }
