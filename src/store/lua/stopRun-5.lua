--[[
  Ends a parked run by an operator or a sweep (cancel, approval expiry), only
  from an expected status; optionally records cancelRequested first so a
  running run is cancelled by its next commit (commitStep-23.lua).

  KEYS[1] run hash  KEYS[2] budget hash  KEYS[3] journal list
  KEYS[4] events stream  KEYS[5] run's actions set

  ARGV[1] expected statuses (space-separated)  ARGV[2] new (terminal) status
  ARGV[3] reason  ARGV[4] now (ms)  ARGV[5] events max length
  ARGV[6] retention ms  ARGV[7] 1 to set cancelRequested
  ARGV[8] the cancel's reason (who asked), kept with the flag (the first request's stays)

  Returns {1, status} ended, {0, status} not in an expected status (only
  cancelRequested was set, if asked), or {-3, ''} run missing.

  Keeps the run listing indexes (includes/runIndex.lua) in the same change.
]]
-- @include emitEvent
-- @include expireRun
-- @include runIndex

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return { -3, '' } end
if ARGV[7] == '1' then
  redis.call('HSET', KEYS[1], 'cancelRequested', '1')
  redis.call('HSETNX', KEYS[1], 'cancelReason', ARGV[8])
end

local expected = false
for s in string.gmatch(ARGV[1], '%S+') do
  if s == status then expected = true end
end
if not expected then return { 0, status } end

indexRunStatus(KEYS[1], ARGV[2], ARGV[4], ARGV[6])
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'reason', ARGV[3], 'updatedAt', ARGV[4], 'finishedAt', ARGV[4])
emitEvent(KEYS[4], ARGV[5], 'status_changed', cjson.encode({ status = ARGV[2], reason = ARGV[3] }))
expireRun({ KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5] }, KEYS[5], ARGV[6])
return { 1, ARGV[2] }
