--[[
  Appends one batch of a model attempt's streamed text to the run's event
  stream, while the caller still owns the step. Fenced like commitStep: a
  worker that lost the step's lock (evicted, stalled, superseded) writes
  nothing, and a step whose decision is journalled is never streamed again.

  The run hash remembers which delivery streamed the step last (streamStep,
  streamDelivery). The first batch of another delivery of the same step is
  preceded by a `step_restarted` event (the text streamed before is void), so
  a client discards the partial answer before the new text arrives. A call
  with an empty event is a marker: a later delivery that reached its answer
  without writing text (tool calls only) still announces the restart, and
  writes nothing when no other delivery streamed the step. The batch's events
  (step_started, step_restarted, text_delta, those that happen) share one
  stream entry (includes/emitEvents.lua).

  KEYS[1] run hash  KEYS[2] events stream  KEYS[3] job lock key

  ARGV[1] lock token  ARGV[2] step  ARGV[3] this job's id
  ARGV[4] delivery key (`<job instance>-<job attempt>.<model attempt>`; the part after '-' is what events show)
  ARGV[5] events max length
  ARGV[6] text_delta event (JSON; '' for the marker)
  ARGV[7] step-started event (JSON; '' when this delivery already emitted it)

  Returns 1 (0 when a step_restarted event was emitted), or a negative code:
   -1 lock lost  -2 stale step  -3 run missing  -4 run not running  -5 decision already journalled
]]
-- @include fence
-- @include emitEvents

local step = tonumber(ARGV[2])
local fence, decidedStep = checkFence(KEYS[1], KEYS[3], ARGV[1], step, ARGV[3])
if fence ~= 0 then return fence end
if decidedStep == ARGV[2] then return -5 end

local last = redis.call('HMGET', KEYS[1], 'streamStep', 'streamDelivery')
local streamedHere = last[1] == ARGV[2]
if ARGV[6] == '' and not streamedHere then return 1 end

local reply = 1
local restarted = ''
if last[2] ~= ARGV[4] or not streamedHere then
  if streamedHere then
    -- Same job attempt, another model attempt: the attempt failed; else the step was delivered again.
    local sameJob = string.match(last[2], '^[^.]+') == string.match(ARGV[4], '^[^.]+')
    restarted = cjson.encode({
      step = step, reason = sameJob and 'attempt_failed' or 'redelivered',
      previous = string.match(last[2], '-([^-]*)$'), delivery = string.match(ARGV[4], '-([^-]*)$'),
    })
    reply = 0
  end
  redis.call('HSET', KEYS[1], 'streamStep', ARGV[2], 'streamDelivery', ARGV[4])
end
emitEvents(KEYS[2], ARGV[5], { 'step_started', ARGV[7], 'step_restarted', restarted, 'text_delta', ARGV[6] })
return reply
