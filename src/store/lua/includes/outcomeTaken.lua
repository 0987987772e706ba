--[[
  A child run whose parent's wake took its outcome (takeChildOutcome-1.lua marked it `outcomeTakenBy`) never comes
  back to work (retry, resume after a person's decision, version continue): the wake charged the parent what the
  child had spent then, and what it spent after would be charged to nobody. The mark is on the child's own slot, so
  the script that would put it back to work reads it atomically with its change, where the parent (another shard)
  cannot be read. The parent's run id, or nil.
]]
local function outcomeTakenBy(runKey)
  local parent = redis.call('HGET', runKey, 'outcomeTakenBy')
  if parent then return parent end
  return nil
end
