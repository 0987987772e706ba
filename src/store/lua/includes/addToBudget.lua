--[[
  Adds a step's usage to the run's budget counters: one HMGET and one HSET
  naming the budget hash once, where an HINCRBY per counter named it once
  each, in the AOF (scripts persist as their effects) and on a replica's
  link. Inside a script the read and the write are one atomic change: an
  increment, as HINCRBY's. A counter whose delta is '' is left as it is.
  Counters are integers (tokens, steps, bytes, µ$) far below 2^53, where a
  Lua number is exact; one that is not falls back to HINCRBY.

  The shape of almost every commit (all four counters moved: a step with
  its model's cost) goes straight to HMGET and HSET as arguments. Gathering the fields in tables grown one at a time and
  unpacking them cost the server about 19,000 instructions a step
  (bench/redisCost.ts), more than the money counter itself; any other shape,
  or a sum past 2^53, takes the loop.

  deltas: { field, delta, field, delta, ... } (delta an integer as a string, or '')
]]
local BUDGET_EXACT = 9007199254740992

-- The counter's new value as a string, or nil when it would pass 2^53 (the loop's HINCRBY then).
local function budgetSum(now, delta)
  local sum = (tonumber(now) or 0) + tonumber(delta)
  if sum < BUDGET_EXACT and sum > -BUDGET_EXACT then return string.format('%d', sum) end
  return nil
end

local function addToBudget(budgetKey, deltas)
  local n = #deltas
  local d1, d2, d3, d4 = deltas[2], deltas[4], deltas[6], deltas[8]
  if n == 8 and d1 ~= '' and d2 ~= '' and d3 ~= '' and d4 ~= '' then
    local now = redis.call('HMGET', budgetKey, deltas[1], deltas[3], deltas[5], deltas[7])
    local s1, s2, s3, s4 = budgetSum(now[1], d1), budgetSum(now[2], d2), budgetSum(now[3], d3), budgetSum(now[4], d4)
    if s1 and s2 and s3 and s4 then
      redis.call('HSET', budgetKey, deltas[1], s1, deltas[3], s2, deltas[5], s3, deltas[7], s4)
      return
    end
  end
  local fields = {}
  for i = 1, n, 2 do
    if deltas[i + 1] ~= '' then fields[#fields + 1] = deltas[i] end
  end
  if #fields == 0 then return end
  local now = redis.call('HMGET', budgetKey, unpack(fields))
  local set = {}
  local f = 0
  for i = 1, n, 2 do
    local delta = deltas[i + 1]
    if delta ~= '' then
      f = f + 1
      local sum = budgetSum(now[f], delta)
      if sum then
        set[#set + 1] = deltas[i]
        set[#set + 1] = sum
      else
        redis.call('HINCRBY', budgetKey, deltas[i], delta)
      end
    end
  end
  if #set > 0 then redis.call('HSET', budgetKey, unpack(set)) end
end
