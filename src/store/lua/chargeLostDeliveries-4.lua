--[[
  Charges a step's lost deliveries: each delivery of this job that ended without
  a trace (its worker SIGKILLed, or frozen past its lock: BullMQ's stall check or
  the owner watch moved the job back, counting it in the job's stalled counter
  `stc`) may have made a model call the provider bills, and nothing charged it.
  Each is charged one attempt's estimate (ARGV[4] tokens, ARGV[5] µ$) on the run's
  budget, once: the job hash keeps how many stalls were charged (`lostCharged`,
  a field of ours beside BullMQ's), so a later delivery of the same job charges
  only stalls since. A step whose decision is journalled charges nothing (its
  call was charged with it). Fenced like chargeTokens.

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] job lock key  KEYS[4] job hash

  ARGV[1] lock token  ARGV[2] step  ARGV[3] this job's id
  ARGV[4] tokens per lost delivery  ARGV[5] µ$ per lost delivery ('' or 0 for none)

  Returns the deliveries charged (0 when none), or a negative code:
   -1 lock lost  -2 stale step  -3 run missing  -4 run not running
]]
-- @include fence

local step = tonumber(ARGV[2])
local fence, decidedStep = checkFence(KEYS[1], KEYS[3], ARGV[1], step, ARGV[3])
if fence ~= 0 then return fence end
if tonumber(decidedStep) == step then return 0 end
local job = redis.call('HMGET', KEYS[4], 'stc', 'lostCharged')
local stalls = tonumber(job[1] or '0') or 0
local lost = stalls - (tonumber(job[2] or '0') or 0)
if lost <= 0 then return 0 end
redis.call('HSET', KEYS[4], 'lostCharged', stalls)
local cost = tonumber(ARGV[5]) or 0
if cost > 0 then redis.call('HINCRBY', KEYS[2], 'costUsed', lost * cost) end
redis.call('HINCRBY', KEYS[2], 'tokensUsed', lost * tonumber(ARGV[4]))
return lost
