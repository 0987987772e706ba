--[[
  Retention: a finished run's keys expire after retentionMs, its ledger
  records (hash, history, reservation) included; a retried run's keys are
  made persistent again. All share the run's hash tag. A retention of 0 or
  less sets no TTL: a negative one means the run waits for its archive row
  (includes/runIndex.lua), after which archiveCommitted-6.lua sets it.
  The run's search indexes (includes/searchIndex.lua) follow: they expire once
  their last run has got its TTL (a run held for its archive row keeps them). `keys` are the run hash, budget, journal and events
  stream, in that order, and more; an ended run's packed events and packed
  journal (KeySpace.run().eventsPacked, `<events>-packed`, and journalPacked,
  `<journal>-packed`) are named from the stream's and the list's keys here, and
  an action's folded history lives in its record.
]]
-- @include searchIndex
local function eachRunKey(keys, actionsKey, fn)
  for _, k in ipairs(keys) do fn(k) end
  fn(keys[3] .. '-packed')
  fn(keys[4] .. '-packed')
  for _, ak in ipairs(redis.call('SMEMBERS', actionsKey)) do
    fn(ak)
    fn(ak .. ':history')
    local reservation = redis.call('HGET', ak, 'reservationKey')
    if reservation then fn(reservation) end
  end
end

local function expireRun(keys, actionsKey, retentionMs)
  searchIndexEnded(keys[1], retentionMs)
  if tonumber(retentionMs) <= 0 then return end
  eachRunKey(keys, actionsKey, function(k) redis.call('PEXPIRE', k, retentionMs) end)
end

local function persistRun(keys, actionsKey)
  searchIndexLive(keys[1], searchKeysOf(keys[1]))
  eachRunKey(keys, actionsKey, function(k) redis.call('PERSIST', k) end)
end
