--[[
  Creates or replaces one schedule's definition, within the tenant's cap.

  KEYS[1] the schedules' definitions hash (KeySpace.schedules): '<tenant>:<id>' -> definition JSON

  ARGV[1] field: '<tenant>:<id>'   ARGV[2] the definition (JSON)
  ARGV[3] the tenant's field prefix: '<tenant>:' (a tenant name holds no ':')
  ARGV[4] the most schedules one tenant may hold

  Returns 0: replaced one of the tenant's; 1: created; 2: refused, the tenant holds ARGV[4] already (nothing
  written).

  Counting and writing in one script: two PUTs at once cannot both take the last place.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  return 0
end
local held, prefix, cap = 0, ARGV[3], tonumber(ARGV[4])
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(field, 1, #prefix) == prefix then
    held = held + 1
    if held >= cap then return 2 end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
