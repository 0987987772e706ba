--[[
  The wake job of a wait for an event settles it: the delivery it got, or its
  timeout. A compare-and-set on the key's state: a delivery and a timeout never
  both win, and a settled wait answers the same on every call (a redelivered wake job).

  KEYS[1] the key's event hash

  ARGV[1] wait id  ARGV[2] now (ms)  ARGV[3] the wait's due time (ms)

  Returns {'delivered', payload}, {'timed_out'}, or {'early'} (the wait still runs: not due, nothing delivered).
]]
local e = redis.call('HMGET', KEYS[1], 'state', 'waitId', 'payload')
local state, waitId, payload = e[1], e[2], e[3]

if waitId == ARGV[1] then
  if state == 'delivered' or state == 'consumed' then
    redis.call('HSET', KEYS[1], 'state', 'consumed')
    return { 'delivered', payload }
  end
  if state == 'timed_out' then return { 'timed_out' } end
  if state == 'waiting' then
    if tonumber(ARGV[2]) < tonumber(ARGV[3]) then return { 'early' } end
    redis.call('HSET', KEYS[1], 'state', 'timed_out')
    return { 'timed_out' }
  end
end
-- The record is gone (expired) or another wait holds the key: this wait got nothing.
return { 'timed_out' }
