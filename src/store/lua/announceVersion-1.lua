--[[
  A worker announces (or renews) one agent version it serves, in the agent's
  registry of served versions, and drops the announcements that lapsed.

  KEYS[1] the agent's registry zset (KeySpace.agentVersions)

  ARGV[1] member: JSON {w: worker id, v: version, t: tools hash, n: tool names}
  ARGV[2] now (ms)  ARGV[3] ttl (ms): the announcement lapses at now + ttl

  Returns the number of live announcements after the change.

  The key itself expires ttl after the last announcement of any worker, so an
  agent no worker serves any more leaves nothing behind.
]]
local expiresAt = tonumber(ARGV[2]) + tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
redis.call('ZADD', KEYS[1], expiresAt, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('ZCARD', KEYS[1])
