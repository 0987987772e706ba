--[[
  The run listing indexes (GET /v1/runs), kept by every script that changes a
  run's status, in the same atomic change. Per shard, three sorted sets per
  status, run id -> ms of the run's last status change:
    <prefix>:{N}:runs-by:status:<status>
    <prefix>:{N}:runs-by:tenant:<tenant>:<status>
    <prefix>:{N}:runs-by:agent:<agent>:<status>
  (KeySpace.runsByStatus / runsByTenant / runsByAgent name the same keys). The
  names derive from the run hash key `<prefix>:{N}:run:<id>`, so they share the
  run's hash tag and Redis Cluster slot. The status is the last part of every
  name, so a tenant or agent name cannot make two names meet.

  A finished run's keys expire after the retention: the entries of a terminal
  status older than that are trimmed whenever a run enters that status (and a
  reader drops an entry whose run is gone).

  With an archive (ARCHIVE_URL), callers pass the retention negated
  (src/store/archiveQueue.ts, retentionAtEnd): a run entering a terminal status
  then joins its shard's archive queue `<prefix>:{N}:archive-queue` (run id ->
  ms of its end; KeySpace.archiveQueue names the same key), and expireRun sets
  no TTL: the archiver sets it once the run's archive row is committed
  (archiveCommitted-6.lua).

  Every run entering a terminal status also joins its shard's compaction queue
  `<prefix>:{N}:compact-queue` (run id -> ms of its end; KeySpace.compactQueue),
  which the reconciler's compactor drains (src/runs/compactor.ts): a run's end
  asks for its compaction in the same change that ends it, so no process's death
  leaves a run uncompacted.
]]
-- @include runStatus

local function runIndexKeys(runKey, tenant, agent, status)
  local base = string.match(runKey, '^(.*):run:[^:]+$') .. ':runs-by:'
  return { base .. 'status:' .. status, base .. 'tenant:' .. tenant .. ':' .. status, base .. 'agent:' .. agent .. ':' .. status }
end

local function runIndexAdd(runKey, runId, tenant, agent, status, now, retentionMs)
  local retention = tonumber(retentionMs) or 0
  local shardBase = string.match(runKey, '^(.*):run:[^:]+$')
  if retention < 0 then
    retention = -retention
    if terminalStatus[status] then redis.call('ZADD', shardBase .. ':archive-queue', now, runId) end
  end
  if terminalStatus[status] then
    -- The compaction queue: the reconciler's compactor shrinks the run (src/runs/compactor.ts). Entries older than
    -- the retention are trimmed here, so a fleet that runs no compactor keeps a queue no longer than its runs.
    local queue = shardBase .. ':compact-queue'
    redis.call('ZADD', queue, now, runId)
    if retention > 0 then redis.call('ZREMRANGEBYSCORE', queue, '-inf', '(' .. (tonumber(now) - retention)) end
  end
  for _, k in ipairs(runIndexKeys(runKey, tenant, agent, status)) do
    redis.call('ZADD', k, now, runId)
    if terminalStatus[status] and retention > 0 then
      redis.call('ZREMRANGEBYSCORE', k, '-inf', '(' .. (tonumber(now) - retention))
    end
  end
end

-- A run just created (its hash written): indexed under its status.
local function indexRunCreated(runKey, now)
  local h = redis.call('HMGET', runKey, 'status', 'tenant', 'agent')
  runIndexAdd(runKey, string.match(runKey, ':run:([^:]+)$'), h[2] or '', h[3] or '', h[1], now, 0)
end

-- The version queue (KeySpace.versionQueue): runs parked needs_human with a
-- reason `version_mismatch...`, run id -> ms of the park.
local function versionQueueKey(runKey)
  return string.match(runKey, '^(.*):run:[^:]+$') .. ':version-queue'
end

-- Call BEFORE the run hash's status is written: moves the run from its
-- current status's indexes to `to`'s. A no-op when the status does not change.
-- `from`: the run's current status when the caller has already read it (the
-- fence has), so a step that stays `running` costs no read here; nil reads it.
-- `reason`: the reason being written (only the commit passes it): a park
-- `needs_human` / `version_mismatch...` enters the version queue; any change
-- out of needs_human (continue, cancel, resume) leaves it.
local function indexRunStatus(runKey, to, now, retentionMs, from, reason)
  if from == nil then from = redis.call('HGET', runKey, 'status') end
  if from == to then return end
  local h = redis.call('HMGET', runKey, 'tenant', 'agent')
  local runId = string.match(runKey, ':run:([^:]+)$')
  if from == 'needs_human' then redis.call('ZREM', versionQueueKey(runKey), runId) end
  if to == 'needs_human' and reason and string.sub(reason, 1, 16) == 'version_mismatch' then
    redis.call('ZADD', versionQueueKey(runKey), now, runId)
  end
  local tenant, agent = h[1] or '', h[2] or ''
  if from then
    for _, k in ipairs(runIndexKeys(runKey, tenant, agent, from)) do redis.call('ZREM', k, runId) end
  end
  runIndexAdd(runKey, runId, tenant, agent, to, now, retentionMs)
end
