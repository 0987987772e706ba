--[[
  Records an approval request for a planned action: its expiry on the record
  and in the shard's approvals index. Idempotent: a re-park (redelivered or
  resumed step) keeps the first expiry.

  KEYS[1] action hash  KEYS[2] shard approvals zset

  ARGV[1] action id  ARGV[2] expiry (ms)

  Returns the recorded expiry (ms), or -10 no such action, -11 the action is
  no longer planned (the current state is then in the second element).
]]
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return { -10, '' } end
if state ~= 'planned' then return { -11, state } end
local existing = redis.call('HGET', KEYS[1], 'approvalExpiresAt')
if existing then return { tonumber(existing), state } end
redis.call('HSET', KEYS[1], 'approvalExpiresAt', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return { tonumber(ARGV[2]), state }
