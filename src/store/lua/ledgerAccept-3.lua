--[[
  An operator's finding `accept` on an original whose compensation settled
  without delivering (its service refused it, or it was never sent): the
  effect stands. The finding is appended to the original's history as a move
  from compensation_required to itself (the state is terminal: it does not
  change) and the original leaves the shard's human queue, in one atomic
  change, only while it is compensation_required, linked to the compensation
  named, and still queued: a repeated or concurrent request records nothing
  twice. The compensation's own state is read by the caller: a settled one
  (confirmed, rejected) never moves again.

  The caller ends the run before (src/operations/resolve.ts): a crash between
  leaves the original queued, and a repeated request finishes it.

  KEYS[1] action hash  KEYS[2] action history list  KEYS[3] shard human-queue zset

  ARGV[1] action id (zset member)  ARGV[2] the compensation's action id
  ARGV[3] history entry (JSON: from, to, at, by, why, evidence)
  ARGV[4] the run's retention at its end ('' none): the run, held for a person
          while the original waited (includes/expireRun.lua), is let go with it
          once nothing else of it waits (releaseHeldRun; its hash is named from
          the human queue's key and the record's runId, like includes/runIndex.lua's)
  ARGV[5] now (ms): the run, ended, has its archive row written again with the
          finding (includes/expireRun.lua, reviseEndedRun)

  Returns {1, ''} recorded and left the queue, {2, ''} not in the queue (nothing
  written: accepted before), {-10, ''} no such action, {-11, state} not
  compensation_required with that compensation (the state found).
]]
-- @include appendMove
-- @include expireRun

local a = redis.call('HMGET', KEYS[1], 'state', 'compensatedBy', 'runId')
if not a[1] then return { -10, '' } end
if a[1] ~= 'compensation_required' or a[2] ~= ARGV[2] then return { -11, a[1] } end
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then return { 2, '' } end
appendMove(KEYS[1], KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[1])
if a[3] then
  local runKey = string.match(KEYS[3], '^(.*):human%-queue$') .. ':run:' .. a[3]
  reviseEndedRun(runKey, ARGV[5])
  releaseHeldRun(runKey, ARGV[4])
end
return { 1, '' }
