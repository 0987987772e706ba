--[[
  The search indexes of a run (KeySpace.searchIndex, src/runs/search.ts): one
  zset per term (tenant + subject key, tenant + search field value; and the
  same under the any-tenant `*`), run id -> ms of its creation, on the run's
  shard. The run hash field `searchKeys` (JSON array) names them, written by
  createRun.

  An index lives as long as its runs: `<index>:live` counts the runs in it
  whose keys have no TTL yet: not ended, or ended and held for their archive
  row (includes/expireRun.lua). While any is counted, the index has no TTL;
  when the last one is let go, the index gets the retention (or keeps a
  longer TTL it already has), so it expires with its runs. The run hash field
  `searchLive` says whether the run is counted, so a run counts once however
  many scripts move it (a retry of a parked run that never ended, or of an
  ended run still held, counts nothing again). A reader drops the entry of a
  run whose keys have expired.
]]

local function searchKeysOf(runKey)
  local raw = redis.call('HGET', runKey, 'searchKeys')
  if not raw or raw == '' then return {} end
  return cjson.decode(raw)
end

-- A run created (or brought back to work by a retry): it is live in each index.
local function searchIndexLive(runKey, keys)
  if #keys == 0 or redis.call('HGET', runKey, 'searchLive') == '1' then return end
  redis.call('HSET', runKey, 'searchLive', '1')
  for _, k in ipairs(keys) do
    redis.call('PERSIST', k)
    redis.call('INCR', k .. ':live')
  end
end

local function searchIndexAdd(runKey, runId, now, keys)
  for _, k in ipairs(keys) do redis.call('ZADD', k, now, runId) end
  searchIndexLive(runKey, keys)
end

-- A run's keys got their retention (it ended, or its archive row was committed): an index whose runs all have
-- expires after the retention.
local function searchIndexEnded(runKey, retentionMs)
  if redis.call('HGET', runKey, 'searchLive') ~= '1' then return end
  -- A negative retention is the same retention held until the run's archive row exists (includes/expireRun.lua): the
  -- run stays counted, so its entries outlive an archive that lags past the retention and an erasure by a search
  -- value still finds the run (archiveCommitted-6.lua lets it go here with the retention).
  local retention = tonumber(retentionMs) or 0
  if retention < 0 then return end
  redis.call('HDEL', runKey, 'searchLive')
  for _, k in ipairs(searchKeysOf(runKey)) do
    if redis.call('DECR', k .. ':live') <= 0 then
      redis.call('DEL', k .. ':live')
      if retention > 0 and redis.call('PTTL', k) < retention then redis.call('PEXPIRE', k, retention) end
    end
  end
end
