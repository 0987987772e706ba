--[[
  Folds an ended run's ledger history list into its record (src/runs/compact.ts):
  the record's `history` field takes every move so far, packed (src/ledger
  history readers expand it, then read the list for any move made after), and
  the list is deleted. Only if neither changed since they were read. The moves
  and their evidence stay, in the record, for as long as the run is kept.

  KEYS[1] action record (hash)  KEYS[2] its history list

  ARGV[1] the list's length read  ARGV[2] sha1 of the record's `history` read ('' none)
  ARGV[3] the folded history (every move read, the folded ones first)

  Returns 1 folded; 0 changed since read, or the record is gone (nothing written).
]]
local h = redis.call('HMGET', KEYS[1], 'state', 'history')
if not h[1] then return 0 end
local current = h[2]
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[1]) then return 0 end
if (current and redis.sha1hex(current) or '') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'history', ARGV[3])
redis.call('DEL', KEYS[2])
return 1
