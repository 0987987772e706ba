--[[
  A parent's wake takes a child's outcome: the child's run is marked `outcomeTakenBy` (the parent's run id) before
  the parent's wake (wakeRun-5.lua, on the parent's own slot) journals the outcome and charges the child's spend.
  Marked only while the child counts as ended (terminal, or needs_human), in the same change as that read, so a
  retry, a resume or a continue of the child (which refuse a marked run: includes/outcomeTaken.lua) lands either
  before (the child is at work again: not marked, the parent waits on) or after (refused): never between the parent's
  read of the outcome and its commit. At the parent's deadline (ARGV[2] = '1') the child is marked whatever its
  status: the parent takes what it has then (`child_timed_out` for a child at work).

  If the parent's wake dies after this mark, its redelivery marks again (the same) and commits; a parent that ended
  meanwhile has moved on anyway. The mark is never taken back: a wake that finds another child back at work after it
  marked this one waits on, and takes this one's outcome (no operator can put it back to work any more) when that
  child ends.

  KEYS[1] the child's run hash

  ARGV[1] the parent's run id  ARGV[2] '1' at the parent's deadline, else '0'

  Returns 1 marked (or marked before), 0 not marked: the child is at work and the deadline has not come,
  -3 the child's run is gone (its outcome is `child_missing`; nothing to mark).
]]
-- @include runStatus

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -3 end
if ARGV[2] ~= '1' and not terminalStatus[status] and status ~= 'needs_human' then return 0 end
redis.call('HSET', KEYS[1], 'outcomeTakenBy', ARGV[1])
return 1
