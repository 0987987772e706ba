--[[
  Appends several run events to the run's stream as ONE entry, capped
  (approximate MAXLEN, which counts entries, not events): the fields repeat
  `type <t1> data <d1> type <t2> data <d2> ...` in the events' order (a stream
  entry may hold a field twice). One XADD costs the server less than one per
  event. Readers expand an entry into its events with src/store/runEvents.ts.

  events: { type, payload, type, payload, ... }; an empty payload is skipped
  (that event did not happen), and no entry is added when every one is empty.

  When every event happened (a read-only step's commit: started, decision,
  committed; and the step that ends a run: the status change too), the fields go
  straight to XADD as arguments. Gathering them in a table grown one field at a
  time and unpacking it costs the server about as much again as the XADD itself
  (1.5 % of a read-only step's Redis instructions: bench/redisCost.ts).
]]
local function emitEvents(eventsKey, maxLen, events)
  local n = table.maxn(events)
  local a, b, c, d = events[2], events[4], events[6], events[8]
  local abc = a and a ~= '' and b and b ~= '' and c and c ~= ''
  if n == 6 and abc then
    redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'type', events[1], 'data', a,
      'type', events[3], 'data', b, 'type', events[5], 'data', c)
    return
  elseif n == 8 and abc and d and d ~= '' then
    redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'type', events[1], 'data', a,
      'type', events[3], 'data', b, 'type', events[5], 'data', c, 'type', events[7], 'data', d)
    return
  end
  local fields = {}
  for i = 1, n, 2 do
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
