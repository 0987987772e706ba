--[[
  A model rate limit as a token bucket (requests and tokens per minute), kept
  in one hash; src/flow/rateLimits.ts. Each bucket refills continuously at
  limit / 60 s up to `burst` (a second's worth by default), so no 60 s window
  ever sees more than the limit plus one burst.

  KEYS[1] bucket hash (r: requests, t: tokens, at: ms of the last refill, until: blocked until)
  KEYS[2] usage series hash (5 s slot -> tokens settled), for the console's plot

  ARGV[1] now (ms)  ARGV[2] requests per minute (0 = none)  ARGV[3] tokens per minute (0 = none)
  ARGV[4] burst (ms of refill the bucket holds)
  ARGV[5] op: `reserve` (ARGV[6] = the attempt's estimate), `settle` (ARGV[6] = used minus
          estimate, ARGV[7] = tokens used), `block` (ARGV[6] = ms the provider asked to wait)
  ARGV[7] tokens used (settle)  ARGV[8] series retention (ms)

  Returns for reserve: 0 reserved (one request and the estimate taken), or the ms to wait
  before a reservation could succeed (nothing taken); for settle and block: 0.
  A reservation larger than the bucket holds is let through when the bucket is full
  (it then goes negative and the next ones wait), so no estimate waits for ever.
]]
local now = tonumber(ARGV[1])
local rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local capR, capT = math.max(1, rpm * burst / 60000), math.max(1, tpm * burst / 60000)
local b = redis.call('HMGET', KEYS[1], 'r', 't', 'at', 'until')
local r, t = tonumber(b[1] or capR), tonumber(b[2] or capT)
local at, blockedUntil = tonumber(b[3] or ARGV[1]), tonumber(b[4] or '0')
local elapsed = math.max(0, now - at)
r = math.min(capR, r + elapsed * rpm / 60000)
t = math.min(capT, t + elapsed * tpm / 60000)

local op = ARGV[5]
local result = 0
if op == 'reserve' then
  local need = tonumber(ARGV[6])
  if now < blockedUntil then
    result = blockedUntil - now
  else
    local waitR, waitT = 0, 0
    if rpm > 0 and r < 1 then waitR = math.ceil((1 - r) * 60000 / rpm) end
    if tpm > 0 and t < math.min(need, capT) then waitT = math.ceil((math.min(need, capT) - t) * 60000 / tpm) end
    result = math.max(waitR, waitT)
    if result == 0 then
      if rpm > 0 then r = r - 1 end
      if tpm > 0 then t = t - need end
    end
  end
elseif op == 'settle' then
  if tpm > 0 then t = math.min(capT, t - tonumber(ARGV[6])) end
  local slot = tostring(math.floor(now / 5000) * 5000)
  redis.call('HINCRBY', KEYS[2], slot, tonumber(ARGV[7]))
  redis.call('PEXPIRE', KEYS[2], ARGV[8])
elseif op == 'block' then
  -- A 429 that still came: nothing is sent until the provider's wait is over, and the bucket starts empty then.
  blockedUntil = math.max(blockedUntil, now + tonumber(ARGV[6]))
  r, t = math.min(r, 0), math.min(t, 0)
end
-- The refill time only moves forward: callers' clocks and the moment each read its clock differ (a settle reads it
-- after the call, the next reserve of another process may have read it before), and moving it back would refill
-- the same interval twice.
redis.call('HSET', KEYS[1], 'r', string.format('%.17g', r), 't', string.format('%.17g', t), 'at', string.format('%d', math.max(at, now)), 'until', string.format('%d', blockedUntil))
redis.call('PEXPIRE', KEYS[1], 3600000)
return result
