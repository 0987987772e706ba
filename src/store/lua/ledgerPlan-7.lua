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

  Returns {status, state, repeats}: status 'new' | 'existing' | 'repeat'
  ('repeat' = the same write requested again from another step/call: a loop signal),
  or -13 when the reservation is held by another action, or -24 when this server does
  not hold that decision as the step's journalled one (nothing is planned: the action
  must not leave; see includes/journalledDecision.lua).
]]
-- @include emitEvent
-- @include journalledDecision

if ARGV[8] ~= '' and not holdsDecision(KEYS[6], KEYS[7], ARGV[4], ARGV[8]) then return -24 end

local existing = redis.call('HGET', KEYS[1], 'state')
if existing then
  local step = redis.call('HGET', KEYS[1], 'step')
  local callId = redis.call('HGET', KEYS[1], 'callId')
  if step == ARGV[4] and callId == ARGV[5] then
    return { 'existing', existing, tonumber(redis.call('HGET', KEYS[1], 'repeats') or '0') }
  end
  local repeats = redis.call('HINCRBY', KEYS[1], 'repeats', 1)
  return { 'repeat', existing, repeats }
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
return { 'new', 'planned', 0 }
