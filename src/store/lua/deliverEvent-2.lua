--[[
  Delivers an event on a key (POST /v1/events, an agent's webhook): to the wait
  that holds the key, at most once, or kept for a wait to come until its own expiry.

  KEYS[1] the key's event hash  KEYS[2] the sender's event id record on the same tag (unused without an event id)

  ARGV[1] payload (JSON)  ARGV[2] now (ms)  ARGV[3] how long a kept delivery waits for a wait (ms; 0: never
  kept, the sender handles the event otherwise, as an agent's webhook does by starting a run, or as
  POST /v1/events does after reserving room for a kept delivery)
  ARGV[4] the sender's event id ('' for none): the same event again is answered as the first time, never a
  second delivery: by the record KEYS[2] for ARGV[5] ms after a delivery resumed a wait or was kept, and, after
  its delivery to this wait, by the id kept on the key (a webhook retried after an error it did not see the end of)
  ARGV[5] how long the event id record is kept (ms)
  ARGV[6] '1': a key a wait holds (waiting, or delivered and not consumed yet) is answered {'held'}, nothing
  written, for the caller to check the holder's run first (releaseIfHolderEnded, src/runs/waits.ts: its run is on
  another slot) and call again with ''; a key no wait holds, the common case, is answered at once

  Returns:
   {'resumed', runId, waitId}    the waiting run gets this payload (its wake job is then promoted)
   {'kept', expiresAt}           no wait holds the key: kept until expiresAt
   {'no_wait'}                   ARGV[3] is 0 and no wait holds the key (or its wait has a delivery already): nothing written
   {'duplicate'}                 the wait already got a delivery it has not consumed yet, or one is kept already
   {'seen', kind, x, y}          the event id was delivered before: its answer then ('resumed' runId waitId | 'kept' expiresAt)
   {'held'}                      ARGV[6] is '1' and a wait holds the key: nothing written
]]
if ARGV[4] ~= '' then
  local seen = redis.call('GET', KEYS[2])
  if seen then
    local kind, x, y = string.match(seen, '^(%a+) (%S*) ?(%S*)$')
    return { 'seen', kind, x, y }
  end
end

local e = redis.call('HMGET', KEYS[1], 'state', 'waitId', 'runId', 'expiresAt', 'eventId')
local state, waitId, runId, expiresAt, eventId = e[1], e[2], e[3], e[4], e[5]
local now = tonumber(ARGV[2])

if ARGV[6] == '1' and (state == 'waiting' or state == 'delivered') and runId and waitId then return { 'held' } end

local function remember(answer)
  if ARGV[4] ~= '' then redis.call('SET', KEYS[2], answer, 'PX', ARGV[5]) end
end

if state == 'waiting' then
  redis.call('HSET', KEYS[1], 'state', 'delivered', 'payload', ARGV[1], 'deliveredAt', ARGV[2], 'eventId', ARGV[4])
  remember('resumed ' .. runId .. ' ' .. waitId)
  return { 'resumed', runId, waitId }
end
if ARGV[4] ~= '' and eventId == ARGV[4] and (state == 'delivered' or state == 'consumed') then
  return { 'resumed', runId, waitId }
end
if tonumber(ARGV[3]) == 0 then return { 'no_wait' } end
if state == 'delivered' then return { 'duplicate' } end
if state == 'pending' and tonumber(expiresAt) > now then return { 'duplicate' } end

local until_ = now + tonumber(ARGV[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'payload', ARGV[1], 'expiresAt', until_)
redis.call('PEXPIREAT', KEYS[1], until_)
remember('kept ' .. until_)
return { 'kept', until_ }
