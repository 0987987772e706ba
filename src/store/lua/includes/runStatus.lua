--[[
  The run statuses that end a run for good. Held equal to TERMINAL_STATUSES
  (src/runs/status.ts) by test/unit/status.test.ts.
]]
local terminalStatus = { completed = true, failed = true, budget_exceeded = true, cancelled = true }
