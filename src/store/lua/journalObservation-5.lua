--[[
  Journals one tool call's observation as soon as the call finished, in a step
  that runs several calls at once and whose decision is already journalled: a
  death before the commit redoes none of the calls journalled here (the next
  delivery finds them after the decision). Fenced like commitStep.

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] journal list
  KEYS[4] events stream  KEYS[5] job lock key

  ARGV[1] lock token  ARGV[2] step  ARGV[3] this job's id
  ARGV[4] observation entry (JSON)  ARGV[5] context bytes delta ('' = the run keeps none)
  ARGV[6] events max length  ARGV[7] observation event (JSON)

  Returns: the journal's length, or a negative code:
   -1 lock lost  -2 stale step  -3 run missing  -4 run not running
   -22 the step's decision is not journalled (an observation never precedes its decision)
]]
-- @include fence
-- @include emitEvent

local fence, decidedStep = checkFence(KEYS[1], KEYS[5], ARGV[1], tonumber(ARGV[2]), ARGV[3])
if fence ~= 0 then return fence end
if decidedStep ~= ARGV[2] then return -22 end

local len = redis.call('RPUSH', KEYS[3], ARGV[4])
if ARGV[5] ~= '' then redis.call('HINCRBY', KEYS[2], 'contextBytes', ARGV[5]) end
emitEvent(KEYS[4], ARGV[6], 'observation', ARGV[7])
return len
