--[[
  Reserves tokens from a tenant's daily budget before a model call, or
  settles a reservation after it (negative amounts give back).

  KEYS[1] tenant-day counter
  ARGV[1] amount (may be negative)  ARGV[2] daily limit (0 = none)  ARGV[3] ttl ms

  Returns the new total, or -16 when the reservation would exceed the limit (nothing reserved).
]]
local amount = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if amount > 0 and limit > 0 and current + amount > limit then return -16 end
local total = redis.call('INCRBY', KEYS[1], amount)
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return total
