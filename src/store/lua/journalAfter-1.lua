--[[
  The journal's entries after the first N a reader holds, with the entry at N (the
  last it holds), in one read: a reader's cache checks that entry against its own
  (src/runs/transcriptCache.ts) before trusting the rest. One script call where a
  pipeline of the two reads cost the worker more than both (ioredis builds a pipeline
  object by copying every command defined on the connection, BullMQ's among them).

  KEYS[1] journal list
  ARGV[1] N, the entries the reader holds (>= 1)

  Returns { the entry at N - 1 (nil when the list is shorter), the entries from N on }.
  Read only.
]]
local n = tonumber(ARGV[1])
return { redis.call('LINDEX', KEYS[1], n - 1), redis.call('LRANGE', KEYS[1], n, -1) }
