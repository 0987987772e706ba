--[[
  Compacts an ended run (src/runs/compact.ts): its events packed into one
  string (src/store/runEvents.ts, packEntries), the stream trimmed to no entry
  (it keeps its last id: an event appended later follows the packed ones), its
  journal packed into one string (src/core/journal.ts, packJournal), the list
  deleted (an entry appended later starts a list that follows the packed
  ones: src/store/runJournal.ts), and its spec stored packed (runRecord.ts,
  packSpec). Only if the run is still as it was read: ended at the same time,
  not erased since (an erasure rewrites all three), its stream still ending
  with the same entry and as long, its journal list as long (entries are only
  appended), its packed events and journal the same. The packed events take
  the stream's TTL, the packed journal the list's (or keeps its own when no
  list is left). Readers expand the packed forms: nothing that reads the run
  sees a difference.

  KEYS[1] run hash  KEYS[2] events stream  KEYS[3] packed events (string)
  KEYS[4] journal list  KEYS[5] packed journal (string)

  ARGV[1] finishedAt read  ARGV[2] erasedAt read ('' none)
  ARGV[3] the stream's last entry id read ('' none)  ARGV[4] its entries read (XLEN)
  ARGV[5] sha1 of the packed events read ('' none)
  ARGV[6] every event read, packed ('' leaves the events as they are)
  ARGV[7] sha1 of the spec as read  ARGV[8] the spec's packed form ('' leaves the spec)
  ARGV[9] the journal list's entries read (LLEN)  ARGV[10] sha1 of the packed journal read ('' none)
  ARGV[11] every journal entry read, packed ('' leaves the journal as it is)

  Returns 1 compacted; 0 the run changed since it was read (nothing written).
]]
-- @include runStatus

local h = redis.call('HMGET', KEYS[1], 'status', 'finishedAt', 'erasedAt', 'spec')
if not h[1] or not terminalStatus[h[1]] or h[2] ~= ARGV[1] or (h[3] or '') ~= ARGV[2] then return 0 end
if ARGV[6] ~= '' then
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  local lastId = ''
  if #last > 0 then lastId = last[1][1] end
  if lastId ~= ARGV[3] or redis.call('XLEN', KEYS[2]) ~= tonumber(ARGV[4]) then return 0 end
  local packed = redis.call('GET', KEYS[3])
  if (packed and redis.sha1hex(packed) or '') ~= ARGV[5] then return 0 end
end
if ARGV[8] ~= '' and (not h[4] or redis.sha1hex(h[4]) ~= ARGV[7]) then return 0 end
if ARGV[11] ~= '' then
  if redis.call('LLEN', KEYS[4]) ~= tonumber(ARGV[9]) then return 0 end
  local packed = redis.call('GET', KEYS[5])
  if (packed and redis.sha1hex(packed) or '') ~= ARGV[10] then return 0 end
end
if ARGV[6] ~= '' then
  redis.call('SET', KEYS[3], ARGV[6])
  redis.call('XTRIM', KEYS[2], 'MAXLEN', 0)
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'spec', ARGV[8]) end
if ARGV[11] ~= '' then
  local ttl = redis.call('PTTL', KEYS[4])
  if ttl <= 0 then ttl = redis.call('PTTL', KEYS[5]) end
  redis.call('SET', KEYS[5], ARGV[11])
  redis.call('DEL', KEYS[4])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[5], ttl) end
end
return 1
