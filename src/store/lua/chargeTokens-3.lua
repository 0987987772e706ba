--[[
  Charges tokens a step spent without reaching a decision (its failed model
  attempts' billed usage) when the step is handed back at SIGTERM: what was
  spent stays spent, and the next delivery's checks see it. Fenced like commitStep.

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] job lock key

  ARGV[1] lock token  ARGV[2] step  ARGV[3] this job's id  ARGV[4] tokens
  ARGV[5] their cost in µ$ ('' or 0 for none), charged with the tokens

  Returns the run's new tokensUsed, or a negative code:
   -1 lock lost  -2 stale step  -3 run missing  -4 run not running
]]
-- @include fence

local fence = checkFence(KEYS[1], KEYS[3], ARGV[1], tonumber(ARGV[2]), ARGV[3])
if fence ~= 0 then return fence end
if ARGV[5] and ARGV[5] ~= '' and ARGV[5] ~= '0' then redis.call('HINCRBY', KEYS[2], 'costUsed', ARGV[5]) end
return redis.call('HINCRBY', KEYS[2], 'tokensUsed', ARGV[4])
