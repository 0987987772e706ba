--[[
  The guard of a same-key replay of an action driven for the model (src/ledger/reconcile.ts): a replay is a
  request that may be the first the service ever sees (the previous owner died after `dispatched`, before its
  request left), so, like the move to `dispatched` (ledgerTransition-6.lua, ARGV[10]), it is refused once the
  run's cancel is recorded. The action's state and the run's cancel are read in one atomic step: the replay leaves
  only for an action still `outcome_unknown` of a run whose cancel was not recorded when it was checked. Writes
  nothing.

  KEYS[1] action hash  KEYS[2] the run's hash (its cancelRequested flag)

  ARGV[1] expected state (outcome_unknown)

  Returns {1, state}, or -10 no such action, -11 state is not the expected one (the current state is then in the
  second element), -17 the run's cancel is recorded (the second element is the state, the third the cancel's
  reason).
]]

local current = redis.call('HGET', KEYS[1], 'state')
if not current then return { -10, '' } end
if current ~= ARGV[1] then return { -11, current } end
local cancel = redis.call('HMGET', KEYS[2], 'cancelRequested', 'cancelReason')
if cancel[1] == '1' then return { -17, current, cancel[2] or '' } end
return { 1, current }
