--[[
  Claims a pending approval: binds the decision to the recorded fingerprint,
  moves planned -> authorized (approve) or planned -> rejected (reject), appends
  the history entry, stores the decision on the record and (a person's decision)
  leaves the approvals index, in one atomic change. Two racers: exactly one decides; the other gets
  the first decision back. An approval past its expiry is rejected as expired.

  KEYS[1] action hash  KEYS[2] action history list  KEYS[3] shard approvals zset
  KEYS[4] the action's run hash (its status; an ended run's archive row is
          written again, includes/expireRun.lua reviseEndedRun)

  ARGV[1] action id  ARGV[2] decision: approve | reject
  ARGV[3] fingerprint the approver saw ('' = the expiry sweep, no check)
  ARGV[4] approver (or the sweeper's id)  ARGV[5] now (ms)
  ARGV[6] reason (history `why`)

  The index entry stays until the run has moved on, so a caller that dies
  before its second change is finished by the sweep (expireApprovals) and no
  run is left waiting_approval with nothing to wait for: after an expiry (the
  sweep, or a decision past the expiry) the run is stopped next; after a
  person's decision the entry is re-scored to the decision's time and the run
  is resumed next (the operator route, or the sweep if that resume was lost).
  A void decision leaves the index.

  A person's decision for a run that has finished meanwhile (cancelled while
  parked, say) authorises nothing: the approval is void, rejected with reason
  run_<status>.

  Returns {code, decision JSON}: 1 decided now, 2 decided before (the first
  decision), 3 expired (rejected now with reason approval_expired), 4 void (the
  run has finished: rejected now with reason run_<status>);
  or {-10, ''} no such action, {-14, ''} fingerprint mismatch (nothing changed),
  {-11, state} not planned and no decision recorded.
]]
-- @include appendMove
-- @include runStatus
-- @include expireRun
local h = redis.call('HMGET', KEYS[1], 'state', 'fingerprint', 'decision', 'approvalExpiresAt', 'runId')
local state, fp, prior, expiresAt, runId = h[1], h[2], h[3], h[4], h[5]
if not state then return { -10, '' } end
if ARGV[3] ~= '' and ARGV[3] ~= fp then return { -14, '' } end
if prior then return { 2, prior } end
if state ~= 'planned' then return { -11, state } end

local now = tonumber(ARGV[5])
local code, decision, why, by = 1, ARGV[2], ARGV[6], ARGV[4]
if ARGV[3] ~= '' and expiresAt and now > tonumber(expiresAt) then
  code, decision, why, by = 3, 'reject', 'approval_expired', 'approval_expiry'
end
if ARGV[3] ~= '' then
  local runStatus = redis.call('HGET', KEYS[4], 'status')
  if not runStatus or terminalStatus[runStatus] then
    code, decision, why, by = 4, 'reject', 'run_' .. (runStatus or 'missing'), 'approval_void'
  end
end
local to = 'authorized'
if decision == 'reject' then to = 'rejected' end

local record = cjson.encode({
  actionId = ARGV[1], runId = runId, decision = decision, state = to,
  approver = by, reason = why, fingerprint = fp, decidedAt = ARGV[5],
})
local history = cjson.encode({
  from = 'planned', to = to, at = now, by = by, why = why,
  evidence = { approver = by, decision = decision, fingerprint = fp },
})
local fields = { 'state', to, 'updatedAt', ARGV[5], 'decision', record }
if to == 'rejected' then
  fields[#fields + 1] = 'output'
  fields[#fields + 1] = cjson.encode({ rejected = true, reason = why })
end
redis.call('HSET', KEYS[1], unpack(fields))
appendMove(KEYS[1], KEYS[2], history)
-- Voided after the run's end (a cancel withdrew it, a person decided late): the run's archive row is written again.
reviseEndedRun(KEYS[4], ARGV[5])
if code == 4 or by == 'approval_void' then
  redis.call('ZREM', KEYS[3], ARGV[1])
elseif code == 1 and ARGV[3] ~= '' then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
end
return { code, record }
