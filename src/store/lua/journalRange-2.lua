--[[
  A run's journal read by position in one atomic read (src/store/runJournal.ts): its packed
  entries, and the list's entries from START to STOP (LRANGE's indexes). One read, so a
  compaction between two reads cannot hide the entries it moves; one script call where a
  MULTI of the two reads cost the caller more than both (ioredis builds a MULTI by copying
  every command defined on the connection, BullMQ's among them).

  KEYS[1] journal packed   KEYS[2] journal list
  ARGV[1] START   ARGV[2] STOP

  Returns { the packed journal (or nil), the list's entries }. Read only.
]]
return { redis.call('GET', KEYS[1]), redis.call('LRANGE', KEYS[2], ARGV[1], ARGV[2]) }
