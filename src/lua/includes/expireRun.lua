--[[ Retention: a finished run's keys expire after retentionMs. ]]
local function expireRun(keys, retentionMs)
  if tonumber(retentionMs) <= 0 then return end
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, retentionMs) end
end
