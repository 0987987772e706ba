--[[
  Appends one move to an action's history list. The list of an ended run's
  action is folded into its record and deleted (foldHistory-3.lua): a move
  made after that (an operator's compensation) starts the list again, with the
  record's TTL, so it expires with the run.
]]
local function appendMove(actionKey, historyKey, move)
  if redis.call('RPUSH', historyKey, move) == 1 then
    local ttl = redis.call('PTTL', actionKey)
    if ttl > 0 then redis.call('PEXPIRE', historyKey, ttl) end
  end
end
