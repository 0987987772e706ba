--[[
  Admits waiting runs in weighted round-robin (stride scheduling): the tenant
  whose next turn has the lowest pass goes first; each admission moves that
  tenant's pass on by 1 / weight, so a tenant of weight 2 gets two turns to
  another's one. A tenant at its concurrency limit, or whose next run's agent is
  at its limit, is passed over; the fleet limit stops the round. Within a
  line, the lowest place goes first (priority level, then arrival).

  KEYS[1] waiting hash  KEYS[2] held hash  KEYS[3] pending hash  KEYS[4] counts hash
  KEYS[5] turns zset    KEYS[6] passes hash  KEYS[7] settings hash  KEYS[8] admitted hash

  ARGV[1] now (ms)  ARGV[2] at most this many admissions
  ARGV[3] the admitting connection's owner name (pending until its jobs are released)
  ARGV[4] line key prefix (+ tenant)  ARGV[5] default weight
  ARGV[6] default tenant limit (0 = none)  ARGV[7] default agent limit (0 = none)
  ARGV[8] fleet limit (0 = none)
  ARGV[9] configured values (JSON object: `w:<tenant>`, `t:<tenant>`, `a:<agent>` -> number);
          a value set at run time (the settings hash) wins over it, and it over the default

  Returns a flat array {runId, shard, tenant, held, weight, ...} of the runs admitted: each
  holds a slot, counted, and is pending until the caller has released its step job; held is
  its tenant's runs at work after it and weight the tenant's weight (the share its step jobs
  are ordered by, src/flow/stepPriority.ts).
]]
local function num(v, def) return tonumber(v or '') or def end
local fleetLimit = num(ARGV[8], 0)
local configured = cjson.decode(ARGV[9])
local function setting(field, def)
  return num(redis.call('HGET', KEYS[7], field), num(configured[field], def))
end
local out = {}

local function pick()
  local turns = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
  for i = 1, #turns, 2 do
    local tenant = turns[i]
    local limit = setting('t:' .. tenant, num(ARGV[6], 0))
    if limit == 0 or num(redis.call('HGET', KEYS[4], 't:' .. tenant), 0) < limit then
      local line = ARGV[4] .. tenant
      local head = redis.call('ZRANGE', line, 0, 0)[1]
      if not head then
        redis.call('ZREM', KEYS[5], tenant)
      else
        local meta = cjson.decode(redis.call('HGET', KEYS[1], head))
        local agentLimit = setting('a:' .. meta.agent, num(ARGV[7], 0))
        if agentLimit == 0 or num(redis.call('HGET', KEYS[4], 'a:' .. meta.agent), 0) < agentLimit then
          return tenant, tonumber(turns[i + 1]), line, head, meta
        end
      end
    end
  end
  return nil
end

while #out < 5 * num(ARGV[2], 1) do
  if fleetLimit > 0 and num(redis.call('HGET', KEYS[4], 'all'), 0) >= fleetLimit then break end
  local tenant, pass, line, runId, meta = pick()
  if not tenant then break end
  redis.call('ZREM', line, runId)
  redis.call('HDEL', KEYS[1], runId)
  meta.admittedAt = tonumber(ARGV[1])
  redis.call('HSET', KEYS[2], runId, cjson.encode(meta))
  redis.call('HSET', KEYS[3], runId, ARGV[3])
  local held = redis.call('HINCRBY', KEYS[4], 't:' .. tenant, 1)
  redis.call('HINCRBY', KEYS[4], 'a:' .. meta.agent, 1)
  redis.call('HINCRBY', KEYS[4], 'all', 1)
  redis.call('HINCRBY', KEYS[8], tenant, 1)
  local weight = setting('w:' .. tenant, num(ARGV[5], 1))
  local nextPass = string.format('%.17g', pass + 1 / weight)
  redis.call('HSET', KEYS[6], tenant, nextPass, '~vtime', string.format('%.17g', pass))
  if redis.call('ZCARD', line) == 0 then redis.call('ZREM', KEYS[5], tenant) else redis.call('ZADD', KEYS[5], nextPass, tenant) end
  out[#out + 1] = runId
  out[#out + 1] = tostring(meta.shard)
  out[#out + 1] = tenant
  out[#out + 1] = held
  out[#out + 1] = tostring(weight)
end
return out
