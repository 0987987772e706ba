--[[
  Folds an ended run's ledger history list into its record (src/runs/compact.ts):
  the record's `history` field takes every move so far, packed (src/ledger
  history readers expand it, then read the list for any move made after), and
  the list is deleted. Only if neither changed since they were read: the list by
  its entries, not its length (an erasure rewrites them in place, as many as
  before, and a fold of what was read before it would put the customer's text
  back). The moves and their evidence stay, in the record, for as long as the run
  is kept.

  And lets the action's reservation go (the SET NX of its idempotency key ->
  action id, ledgerPlan-7.lua): a plan reads it only when the action has no
  record, and the record, which names the same key (`idempotencyKey`,
  `reservationKey`), lives as long as the run's keys. Only while the record
  names this reservation and the reservation names this action.

  KEYS[1] action record (hash)  KEYS[2] its history list
  KEYS[3] its reservation (string; the record's `reservationKey`)

  ARGV[1] sha1 of the list's entries read, each as `<bytes>:<entry>` (historyDigest)
  ARGV[2] sha1 of the record's `history` read ('' none)
  ARGV[3] the folded history (every move read, the folded ones first; '' leaves the history)
  ARGV[4] the action id

  Returns 1 folded (or only the reservation let go); 0 changed since read, or the
  record is gone (nothing written).
]]
local h = redis.call('HMGET', KEYS[1], 'state', 'history', 'reservationKey')
if not h[1] then return 0 end
local current = h[2]
local listed = redis.call('LRANGE', KEYS[2], 0, -1)
for i, entry in ipairs(listed) do listed[i] = #entry .. ':' .. entry end
if redis.sha1hex(table.concat(listed)) ~= ARGV[1] then return 0 end
if (current and redis.sha1hex(current) or '') ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'history', ARGV[3])
  redis.call('DEL', KEYS[2])
end
if h[3] == KEYS[3] and redis.call('GET', KEYS[3]) == ARGV[4] then redis.call('DEL', KEYS[3]) end
return 1
