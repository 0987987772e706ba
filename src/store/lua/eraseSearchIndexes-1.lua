--[[
  An erasure takes an ended run out of its search indexes (src/archive/erasure.ts, queued in its MULTI): the
  run's entries, and the run hash's `search` (the values) and `searchKeys` (the index names, each a digest of a
  value). A run still counted in its indexes (held for its archive row, includes/searchIndex.lua) is let go of
  them first, as its archive commit would have: the last one counted gives an index the retention. Without that,
  the count would stay for ever (the commit finds no `searchKeys` to let go) and the index would never expire.

  KEYS[1] run hash
  ARGV[1] run id  ARGV[2] retention ms

  Returns 1.
]]
-- @include searchIndex

searchIndexEnded(KEYS[1], ARGV[2])
for _, k in ipairs(searchKeysOf(KEYS[1])) do redis.call('ZREM', k, ARGV[1]) end
redis.call('HDEL', KEYS[1], 'search', 'searchKeys')
return 1
