--[[ Appends one run event to the run's stream, capped (approximate MAXLEN). ]]
local function emitEvent(eventsKey, maxLen, eventType, payload)
  if payload == nil or payload == '' then return end
  redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'type', eventType, 'data', payload)
end
