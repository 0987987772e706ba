--[[
  Retention: a finished run's keys expire after retentionMs, its ledger
  records (hash, history, reservation) included. All share the run's hash tag.
]]
local function expireRun(keys, actionsKey, retentionMs)
  if tonumber(retentionMs) <= 0 then return end
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, retentionMs) end
  for _, ak in ipairs(redis.call('SMEMBERS', actionsKey)) do
    redis.call('PEXPIRE', ak, retentionMs)
    redis.call('PEXPIRE', ak .. ':history', retentionMs)
    local reservation = redis.call('HGET', ak, 'reservationKey')
    if reservation then redis.call('PEXPIRE', reservation, retentionMs) end
  end
end
