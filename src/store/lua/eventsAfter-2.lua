--[[
  A run's events from a position in one atomic read (src/store/runEvents.ts readEventsAfter):
  its packed entries, and up to COUNT stream entries from START. One read, so a compaction
  between two reads cannot hide the entries it moves; one script call where a MULTI of the
  two reads cost the caller more than both (ioredis builds a MULTI by copying every command
  defined on the connection, BullMQ's among them).

  KEYS[1] events packed   KEYS[2] events stream
  ARGV[1] START (XRANGE's: an id, `(id` after it, or `-`)   ARGV[2] COUNT

  Returns { the packed events (or nil), the stream's entries }. Read only.
]]
return { redis.call('GET', KEYS[1]), redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', ARGV[2]) }
