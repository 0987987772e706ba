--[[
  Records what a person did to a run (src/runs/store.ts, recordOperatorAction):
  the `operator` journal entry and the `operator_action` event, in one atomic
  change. Called after the action itself took effect, on a run at work or one
  that ended. An ended run's journal may be packed (compactRun-5.lua: the list
  gone, its entries in `<journal>-packed`): the entry then starts a new list,
  which takes the run's TTL, so it expires with the rest of the run. An ended
  run has its archive row written again with the entry (includes/expireRun.lua,
  reviseEndedRun: its keys then have no TTL until the row is committed).

  KEYS[1] run hash  KEYS[2] journal list  KEYS[3] events stream

  ARGV[1] the operator journal entry (JSON), also the event's payload
  ARGV[2] events max length  ARGV[3] now (ms)

  Returns the journal list's length.
]]
-- @include emitEvent
-- @include expireRun

reviseEndedRun(KEYS[1], ARGV[3])
local len = redis.call('RPUSH', KEYS[2], ARGV[1])
emitEvent(KEYS[3], ARGV[2], 'operator_action', ARGV[1])
if len == 1 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
return len
