--[[
  A run starts waiting for an event on a key (a wait tool's call). One hash per
  (tenant, key): the waiter, or a delivery kept until a wait comes.

  KEYS[1] the key's event hash

  ARGV[1] wait id (run:step:call)  ARGV[2] run id  ARGV[3] the wait's due time (ms)
  ARGV[4] now (ms)  ARGV[5] how long the record is kept past the due time (ms)

  Returns:
   {'delivered', payload}  a delivery was kept for this key (or already given to this wait): consumed now
   {'waiting'}             the wait is registered (again, for the same wait id: idempotent)
   {'busy'}                another wait holds the key
]]
local e = redis.call('HMGET', KEYS[1], 'state', 'waitId', 'payload', 'expiresAt')
local state, waitId, payload, expiresAt = e[1], e[2], e[3], e[4]
local now = tonumber(ARGV[4])

if waitId == ARGV[1] and (state == 'delivered' or state == 'consumed') then return { 'delivered', payload } end
if waitId == ARGV[1] and state == 'waiting' then return { 'waiting' } end
if state == 'pending' and tonumber(expiresAt) > now then
  -- A delivery that came first is this wait's result: consumed by it, once.
  redis.call('HSET', KEYS[1], 'state', 'consumed', 'waitId', ARGV[1], 'runId', ARGV[2])
  return { 'delivered', payload }
end
if state == 'waiting' or state == 'delivered' then return { 'busy' } end

redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'waiting', 'waitId', ARGV[1], 'runId', ARGV[2], 'at', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[3]) + tonumber(ARGV[5]))
return { 'waiting' }
