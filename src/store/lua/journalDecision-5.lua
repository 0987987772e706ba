--[[
  Journals a step's model decision (and charges its usage) before any tool
  with an outside effect runs. Fenced like commitStep.

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] journal list
  KEYS[4] events stream  KEYS[5] job lock key

  ARGV[1] lock token  ARGV[2] step  ARGV[3] tokens delta  ARGV[4] context bytes delta ('' = the run keeps none)
  ARGV[5] decision entry (JSON)  ARGV[6] now (ms)  ARGV[7] events max length
  ARGV[8] decision event (JSON)  ARGV[9] this job's id
  ARGV[10] step-started event (JSON; '' when already emitted; else stored before the decision, in one stream entry)
  ARGV[11] cost delta in µ$ (the decision's attempts' cost; '' or 0 for none), charged with the tokens

  Returns: journal index of the decision, or a negative code:
   -1 lock lost  -2 stale step  -3 run missing  -4 run not running  -5 decision already journalled

  Keeps the run listing indexes (includes/runIndex.lua) in the same change.
]]
-- @include fence
-- @include emitEvents
-- @include runIndex

local step = tonumber(ARGV[2])
local fence, decidedStep, _, _, fromStatus = checkFence(KEYS[1], KEYS[5], ARGV[1], step, ARGV[9])
if fence ~= 0 then return fence end
if decidedStep == ARGV[2] then return -5 end

local len = redis.call('RPUSH', KEYS[3], ARGV[5])
redis.call('HINCRBY', KEYS[2], 'tokensUsed', ARGV[3])
if ARGV[4] ~= '' then redis.call('HINCRBY', KEYS[2], 'contextBytes', ARGV[4]) end
if ARGV[11] and ARGV[11] ~= '' and ARGV[11] ~= '0' then redis.call('HINCRBY', KEYS[2], 'costUsed', ARGV[11]) end
indexRunStatus(KEYS[1], 'running', ARGV[6], 0, fromStatus)
redis.call('HSET', KEYS[1], 'decidedStep', ARGV[2], 'decisionIndex', len - 1, 'status', 'running', 'updatedAt', ARGV[6])
emitEvents(KEYS[4], ARGV[7], { 'step_started', ARGV[10], 'decision', ARGV[8] })
return len - 1
