--[[
  Moves a ledger record from one state to the next by compare-and-set, with
  its evidence appended to the history. Two racers: exactly one wins.

  KEYS[1] action hash  KEYS[2] action history list
  KEYS[3] shard open-actions zset  KEYS[4] shard human-queue zset (needs_human, and
          compensation_required until its compensation has ended the run)
  KEYS[5] the run's events stream (an `effect` event per move)
  KEYS[6] the run's hash (its cancelRequested flag)

  ARGV[1] expected current state  ARGV[2] new state  ARGV[3] now (ms)
  ARGV[4] history entry (JSON: from, to, at, by, why, evidence)
  ARGV[5] fields to set (JSON object of strings, may be '{}')
  ARGV[6] 1 to count a dispatch attempt  ARGV[7] action id (zset member)
  ARGV[8] events max length  ARGV[9] effect event (JSON)
  ARGV[10] 1 to refuse the move when the run's cancel is recorded (a dispatch
           on the model's behalf: checked here, in the same atomic change as
           the compare-and-set, so no cancel slips between a read and the move)
  ARGV[11] the run's retention at its end (src/store/archiveQueue.ts,
           retentionAtEnd; '' none): a move that ends the last wait of an
           ended run held for a person lets the run go with it
           (includes/expireRun.lua, releaseHeldRun)

  A move of an ended run's action (settled after the run's end) has the run's
  archive row written again (includes/expireRun.lua, reviseEndedRun).

  Returns 1, or -10 no such action, -11 state is not the expected one
  (the current state is then in the second element), -12 move not allowed,
  -17 the run's cancel is recorded and ARGV[10] is 1 (nothing changed; the
  second element is the state, the third the cancel's reason).
]]
-- @include ledgerMoves
-- @include emitEvent
-- @include appendMove
-- @include expireRun

local current = redis.call('HGET', KEYS[1], 'state')
if not current then return { -10, '' } end
if current ~= ARGV[1] then return { -11, current } end
local allowed = ledgerMoves[current]
if not allowed or not allowed[ARGV[2]] then return { -12, current } end
if ARGV[10] == '1' then
  local cancel = redis.call('HMGET', KEYS[6], 'cancelRequested', 'cancelReason')
  if cancel[1] == '1' then return { -17, current, cancel[2] or '' } end
end

local fields = cjson.decode(ARGV[5])
local flat = { 'state', ARGV[2], 'updatedAt', ARGV[3] }
for k, v in pairs(fields) do
  flat[#flat + 1] = k
  flat[#flat + 1] = v
end
redis.call('HSET', KEYS[1], unpack(flat))
if ARGV[6] == '1' then redis.call('HINCRBY', KEYS[1], 'attempts', 1) end
appendMove(KEYS[1], KEYS[2], ARGV[4])

local to = ARGV[2]
if to == 'dispatched' or to == 'outcome_unknown' then
  redis.call('ZADD', KEYS[3], ARGV[3], ARGV[7])
else
  redis.call('ZREM', KEYS[3], ARGV[7])
end
-- An original in compensation_required stays in the human queue until its compensation is confirmed and the run
-- ended (src/ledger/compensation.ts removes it then): a compensation that does not finish keeps a person's attention,
-- and the reconciler's sweep of this queue drives it.
if to == 'needs_human' or to == 'compensation_required' then
  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[7])
else
  redis.call('ZREM', KEYS[4], ARGV[7])
end
emitEvent(KEYS[5], ARGV[8], 'effect', ARGV[9])
reviseEndedRun(KEYS[6], ARGV[3])
if not waitingStates[to] and to ~= 'compensation_required' then releaseHeldRun(KEYS[6], ARGV[11]) end
return { 1, to }
