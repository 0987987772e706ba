--[[
  Changes a tenant's weight, concurrency limit or waiting limit, or an agent's
  limit, at run time, and records who changed it (the next admission, or for a
  waiting limit the next run put in line, reads it).

  KEYS[1] settings hash  KEYS[2] audit list

  ARGV[1] field (`w:<tenant>`, `t:<tenant>`, `m:<tenant>`, `a:<agent>`)  ARGV[2] value ('' = back to the default)
  ARGV[3] the change's record (JSON: who, what, from, to, at)  ARGV[4] audit length kept

  Returns the previous value ('' when it was the default).
]]
local previous = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local record = cjson.decode(ARGV[3])
record.from = previous
redis.call('LPUSH', KEYS[2], cjson.encode(record))
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[4]) - 1)
return previous
