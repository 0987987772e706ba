--[[
  Appends several run events to the run's stream as ONE entry, capped
  (approximate MAXLEN, which counts entries, not events): the fields repeat
  `type <t1> data <d1> type <t2> data <d2> ...` in the events' order (a stream
  entry may hold a field twice). One XADD costs the server less than one per
  event. Readers expand an entry into its events with src/store/runEvents.ts.

  events: { type, payload, type, payload, ... }; an empty payload is skipped
  (that event did not happen), and no entry is added when every one is empty.

  The cap is named only when the stream has reached it: below it there is
  nothing to trim, and the AOF (which persists the XADD with its cap as an
  exact MAXLEN) and a replica's link carry the entry alone.

  The shape of almost every step (a read-only step's commit that stays
  running: started, decision, committed, all three present) goes straight to
  XADD as arguments. Gathering the fields in a table grown one field at a time
  and unpacking it costs the server about as much again as the XADD itself
  (bench/redisCost.ts); any other shape, the step that ends a run among them,
  takes the loop.
]]
local function emitEvents(eventsKey, maxLen, events)
  local n = table.maxn(events)
  local a, b, c = events[2], events[4], events[6]
  if n == 6 and a and a ~= '' and b and b ~= '' and c and c ~= '' then
    if redis.call('XLEN', eventsKey) < tonumber(maxLen) then
      redis.call('XADD', eventsKey, '*', 'type', events[1], 'data', a, 'type', events[3], 'data', b, 'type', events[5], 'data', c)
    else
      redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'type', events[1], 'data', a,
        'type', events[3], 'data', b, 'type', events[5], 'data', c)
    end
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
  if redis.call('XLEN', eventsKey) < tonumber(maxLen) then
    redis.call('XADD', eventsKey, '*', unpack(fields))
  else
    redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', unpack(fields))
  end
end

--[[
  A step's three events (step_started, decision, step_committed, every one
  present: the commit of a step that stays running) as one field of one
  entry, `step <started>\30<decision>\30<committed>` (the payloads are JSON,
  which never holds a raw control character, so the record separator cannot
  occur in one). Three type and three data fields cost the server half as
  much again as the entry itself: every field is an argument the XADD parses,
  the listpack stores and the AOF and a replica's link carry. Readers expand
  it into its three events (src/store/runEvents.ts).

  The cap is checked on every STEP_EVENTS_CAP_EVERY-th step only: an XLEN is
  a call of its own, and between two checks the stream grows by at most that
  many entries of its commits (the cap is approximate in any case: Redis
  trims whole nodes).
]]
local STEP_EVENTS_CAP_EVERY = 8

local function emitStepEvents(eventsKey, maxLen, step, started, decision, committed)
  local value = started .. '\30' .. decision .. '\30' .. committed
  if step % STEP_EVENTS_CAP_EVERY ~= 0 or redis.call('XLEN', eventsKey) < tonumber(maxLen) then
    redis.call('XADD', eventsKey, '*', 'step', value)
  else
    redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'step', value)
  end
end
