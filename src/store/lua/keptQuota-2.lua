--[[
  A tenant's room for deliveries kept on keys no run waits on (POST /v1/events):
  at most ARGV[5] kept at a time and ARGV[6] payload bytes, so one tenant's sender
  cannot fill the memory every tenant's runs live in. A reservation is taken
  before a delivery is kept and lives until the keep ends (the record holds the
  payload until then, consumed or not); one not kept after all is given back.

  KEYS[1] zset: reservation -> when its keep ends  KEYS[2] string: bytes reserved

  ARGV[1] 'reserve' | 'release'  ARGV[2] the reservation (`<id>:<bytes>`)
  ARGV[3] its bytes  ARGV[4] when the keep ends (ms)  ARGV[5] max kept
  ARGV[6] max bytes  ARGV[7] now (ms)

  Returns {'ok'}, or {'count' | 'bytes', when the oldest keep ends (ms)} refused (nothing written).
]]
if ARGV[1] == 'release' then
  if redis.call('ZREM', KEYS[1], ARGV[2]) == 1 then redis.call('DECRBY', KEYS[2], ARGV[3]) end
  return { 'ok' }
end

-- Keeps that ended give their room back.
local ended = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[7])
if #ended > 0 then
  local freed = 0
  for _, m in ipairs(ended) do freed = freed + tonumber(string.match(m, ':(%d+)$') or '0') end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[7])
  redis.call('DECRBY', KEYS[2], freed)
end

local count = redis.call('ZCARD', KEYS[1])
local bytes = tonumber(redis.call('GET', KEYS[2]) or '0')
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2] or ARGV[4]
if count + 1 > tonumber(ARGV[5]) then return { 'count', oldest } end
if bytes + tonumber(ARGV[3]) > tonumber(ARGV[6]) then return { 'bytes', oldest } end

redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[3])
-- Nothing outlives the last keep: a tenant that stops sending leaves no keys.
redis.call('PEXPIREAT', KEYS[1], ARGV[4], 'GT')
redis.call('PEXPIREAT', KEYS[1], ARGV[4], 'NX')
redis.call('PEXPIREAT', KEYS[2], ARGV[4], 'GT')
redis.call('PEXPIREAT', KEYS[2], ARGV[4], 'NX')
return { 'ok' }
