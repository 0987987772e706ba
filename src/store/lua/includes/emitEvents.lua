--[[
  Appends several run events to the run's stream as ONE entry, capped
  (approximate MAXLEN, which counts entries, not events): the fields repeat
  `type <t1> data <d1> type <t2> data <d2> ...` in the events' order (a stream
  entry may hold a field twice). One XADD costs the server less than one per
  event. Readers expand an entry into its events with src/store/runEvents.ts.

  events: { type, payload, type, payload, ... }; an empty payload is skipped
  (that event did not happen), and no entry is added when every one is empty.
]]
local function emitEvents(eventsKey, maxLen, events)
  local fields = {}
  for i = 1, table.maxn(events), 2 do
    local payload = events[i + 1]
    if payload ~= nil and payload ~= '' then
      fields[#fields + 1] = 'type'
      fields[#fields + 1] = events[i]
      fields[#fields + 1] = 'data'
      fields[#fields + 1] = payload
    end
  end
  if #fields == 0 then return end
  redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', unpack(fields))
end
