--[[
  Flow control: the step 1 job createRun just added goes from the queue's wait
  list to its delayed set, until the run's deadline; admission promotes it
  (src/flow/admission.ts). Sent in the same MULTI as createRun, so no worker can
  take the job in between. Only for the run this very request created: the run
  hash must carry the request's admission token (an existing run does not).

  KEYS[1] run hash  KEYS[2] the queue's wait list  KEYS[3] the queue's delayed zset
  KEYS[4] the job's hash (BullMQ internal layout)

  ARGV[1] admission token  ARGV[2] job id  ARGV[3] ms the job starts at if never admitted

  Returns 1 deferred, 0 not this request's run (nothing written), -1 the job was not waiting.
]]
if redis.call('HGET', KEYS[1], 'admissionToken') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'admissionToken')
if redis.call('LREM', KEYS[2], 1, ARGV[2]) == 0 then return -1 end
-- BullMQ's delayed score: the timestamp times 0x1000 (its low bits order jobs of one ms).
redis.call('ZADD', KEYS[3], tonumber(ARGV[3]) * 0x1000, ARGV[2])
redis.call('HSET', KEYS[4], 'delay', tonumber(ARGV[3]) - tonumber(redis.call('HGET', KEYS[4], 'timestamp') or ARGV[3]))
return 1
