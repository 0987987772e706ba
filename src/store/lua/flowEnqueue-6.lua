--[[
  Puts a run in its tenant's line (flow control, src/flow/admission.ts). A run
  already waiting or holding a slot is left alone (the same intake twice).

  KEYS[1] waiting hash  KEYS[2] held hash  KEYS[3] turns zset
  KEYS[4] passes hash   KEYS[5] the tenant's line (zset; KeySpace.flowLine)
  KEYS[6] settings hash (a tenant's own limit at run time: `m:<tenant>`, flowConfigure-2.lua)

  ARGV[1] run id  ARGV[2] tenant  ARGV[3] the run's JSON (tenant, agent, shard, priority, at)
  ARGV[4] the run's place in its line (lower first: priority level, then arrival)
  ARGV[5] the most runs a tenant's line may hold (FLOW_TENANT_MAX_WAITING; 0: no limit), unless the
          tenant has its own (`m:<tenant>` in the settings hash); '' puts the run in line whatever it holds

  Returns 1 put in line, 0 already known (nothing written), or { -1, the limit
  that held } when the tenant's line is full (nothing written: the intake is
  refused, the run is not created).

  The limit is checked after "already known": the same intake again is answered
  as before, whatever the line holds now.

  A tenant that joins the turns starts at the latest turn served (`~vtime`) or
  its own pass if later: an idle tenant saves no credit, a busy one keeps its debt.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
if ARGV[5] ~= '' then
  local most = tonumber(redis.call('HGET', KEYS[6], 'm:' .. ARGV[2]) or ARGV[5])
  if most > 0 and redis.call('ZCARD', KEYS[5]) >= most then return { -1, most } end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[5], ARGV[4], ARGV[1])
if not redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  local own = tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
  local vtime = tonumber(redis.call('HGET', KEYS[4], '~vtime') or '0')
  redis.call('ZADD', KEYS[3], string.format('%.17g', math.max(own, vtime)), ARGV[2])
end
return 1
