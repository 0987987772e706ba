--[[
  What an ended run's compaction reads (src/runs/compact.ts), in one atomic read: the
  fields of the run hash it is fenced on, the event stream and its packed entries,
  the run's action records, the journal list and its packed entries. One script call
  where a MULTI of six reads cost the worker more than all of them (ioredis builds a
  pipeline object by copying every command defined on the connection, BullMQ's among
  them, for each MULTI).

  KEYS[1] run hash       KEYS[2] events stream   KEYS[3] events packed
  KEYS[4] actions set    KEYS[5] journal list    KEYS[6] journal packed

  ARGV: the run hash fields to read (runRecord.ts ENDED_RUN_FIELDS)

  Returns { the fields (HMGET), the stream's entries (XRANGE), the packed events (or
  nil), the action keys (SMEMBERS), the journal's entries (LRANGE), the packed journal
  (or nil) }. Read only.
]]
return {
  redis.call('HMGET', KEYS[1], unpack(ARGV)),
  redis.call('XRANGE', KEYS[2], '-', '+'),
  redis.call('GET', KEYS[3]),
  redis.call('SMEMBERS', KEYS[4]),
  redis.call('LRANGE', KEYS[5], 0, -1),
  redis.call('GET', KEYS[6]),
}
