--[[
  Releases the key of a wait whose run ended without taking it (cancelled, stopped,
  failed): a compare-and-set on the wait id, so only that wait's record goes, and a
  delivery it never consumed with it. After it the key is free: a delivery is kept
  or starts a follow-up run, a new wait registers.

  KEYS[1] the key's event hash

  ARGV[1] wait id (run:step:call)

  Returns 1 released, 0 the key holds no wait of this id (another wait, a kept
  delivery, a settled wait, or nothing).
]]
local e = redis.call('HMGET', KEYS[1], 'state', 'waitId')
if e[2] ~= ARGV[1] then return 0 end
if e[1] ~= 'waiting' and e[1] ~= 'delivered' then return 0 end
redis.call('DEL', KEYS[1])
return 1
