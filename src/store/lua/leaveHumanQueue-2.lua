--[[
  Takes a compensated original out of its shard's human queue (src/ledger/ledger.ts, leaveHumanQueue): its
  compensation has ended the run, or was confirmed while the run is at work. A run held for a person while the
  original waited (includes/expireRun.lua) is let go with its retention once nothing else of it waits.

  KEYS[1] shard human-queue zset  KEYS[2] the run's hash

  ARGV[1] action id (zset member)  ARGV[2] the run's retention at its end (retentionAtEnd; '' none)

  Returns 1 (it left the queue) or 0 (it was not queued).
]]
-- @include expireRun

local removed = redis.call('ZREM', KEYS[1], ARGV[1])
releaseHeldRun(KEYS[2], ARGV[2])
return removed
