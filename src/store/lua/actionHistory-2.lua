--[[
  An action's ledger history in one atomic read (src/store/ledgerHistory.ts readHistory): the
  moves folded into its record and the moves of its list. One read, so a fold between two
  reads cannot hide the moves it empties the list of; one script call where a MULTI of the
  two reads cost the caller more than both (ioredis builds a MULTI by copying every command
  defined on the connection, BullMQ's among them).

  KEYS[1] the action record (hash)   KEYS[2] its history list
  ARGV[1] the record's field holding the folded moves

  Returns { the folded moves (or nil), the list's moves }. Read only.
]]
return { redis.call('HGET', KEYS[1], ARGV[1]), redis.call('LRANGE', KEYS[2], 0, -1) }
