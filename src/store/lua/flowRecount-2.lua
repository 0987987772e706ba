--[[
  Recomputes flow control's slot counters from the slots really held: a write
  lost in a failover, or any drift, must not leave a tenant counted at its limit
  with no run at work (nothing admitted, ever) or counted below what it holds.
  Every `t:<tenant>`, `a:<agent>` and `all` counter that differs from the held
  hash is set to the number of slots held (a counter of nobody to 0).

  KEYS[1] held hash  KEYS[2] counts hash

  Returns a flat array {field, counted, held, ...} of the counters repaired
  (empty when every counter was right).
]]
local real = { all = 0 }
local held = redis.call('HGETALL', KEYS[1])
for i = 2, #held, 2 do
  local ok, meta = pcall(cjson.decode, held[i])
  if ok and type(meta) == 'table' and meta.tenant and meta.agent then
    local t, a = 't:' .. meta.tenant, 'a:' .. meta.agent
    real[t] = (real[t] or 0) + 1
    real[a] = (real[a] or 0) + 1
    real.all = real.all + 1
  end
end
local out = {}
local counted = redis.call('HGETALL', KEYS[2])
local seen = {}
for i = 1, #counted, 2 do
  local field, n = counted[i], tonumber(counted[i + 1]) or 0
  seen[field] = true
  local want = real[field] or 0
  if n ~= want then
    redis.call('HSET', KEYS[2], field, want)
    out[#out + 1] = field
    out[#out + 1] = tostring(n)
    out[#out + 1] = tostring(want)
  end
end
for field, want in pairs(real) do
  if not seen[field] and want ~= 0 then
    redis.call('HSET', KEYS[2], field, want)
    out[#out + 1] = field
    out[#out + 1] = '0'
    out[#out + 1] = tostring(want)
  end
end
return out
