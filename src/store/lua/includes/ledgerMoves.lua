--[[ Allowed ledger moves (mirrors src/ledger/states.ts ALLOWED_MOVES). ]]
local ledgerMoves = {
  planned = { authorized = true, rejected = true },
  authorized = { dispatched = true, rejected = true },
  dispatched = { confirmed = true, outcome_unknown = true },
  outcome_unknown = { confirmed = true, safe_retry = true, compensation_required = true, needs_human = true },
  safe_retry = { dispatched = true, rejected = true },
  needs_human = { confirmed = true, safe_retry = true, compensation_required = true },
}
