--[[
  A tenant's daily token budget. Reserve (ARGV[4] = 1) takes an estimate
  before a model attempt and is refused once the day would go past the limit;
  settle (ARGV[4] = 0) records the real spend (the attempt's usage minus its
  reservation) and is never refused: what was spent is recorded even past the
  limit, so the next reservation sees it.

  KEYS[1] tenant-day counter
  ARGV[1] amount (may be negative)  ARGV[2] daily limit (0 = none)  ARGV[3] ttl ms
  ARGV[4] 1 = reserve (enforce the limit), 0 = settle (always applied)

  Returns the new total, or -16 when a reservation would exceed the limit (nothing reserved).
]]
local amount = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
if ARGV[4] == '1' and limit > 0 then
  local current = tonumber(redis.call('GET', KEYS[1]) or '0')
  if current + amount > limit then return -16 end
end
local total = redis.call('INCRBY', KEYS[1], amount)
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return total
