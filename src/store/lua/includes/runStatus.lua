--[[
  The run statuses that end a run for good. Held equal to TERMINAL_STATUSES
  (src/core/status.ts) by test/unit/status.test.ts.
]]
local terminalStatus = { completed = true, failed = true, budget_exceeded = true, cancelled = true }
