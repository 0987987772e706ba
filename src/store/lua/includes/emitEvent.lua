--[[ Appends one run event to the run's stream: an entry of its own (emitEvents with one event). ]]
-- @include emitEvents
local function emitEvent(eventsKey, maxLen, eventType, payload)
  emitEvents(eventsKey, maxLen, { eventType, payload })
end
