--[[
  The /status command: dedupe its update and take the snapshot in one step,
  so a retried update after a failure still gets its answer and a repeated
  one gets none. Writes nothing but the dedupe key.

  KEYS[1] base      conversation key prefix
  KEYS[2] active    active run id
  KEYS[3] pending   seqs waiting for a successor
  KEYS[4] meta      conversation meta
  KEYS[5] dedupe    `<base>dedupe:<update key>`

  ARGV[1] ttl       seconds the update is remembered

  Returns { 'duplicate' }
          { 'purged' }   the conversation was purged with mode `refuse` and its tombstone
                         stands (purge-1.lua): no snapshot, the refusal is the answer
          { 'status', <the snapshot's fields (see includes/snapshot.lua)> }
]]
--- @include "snapshot"

if not redis.call('SET', KEYS[5], '0', 'NX', 'EX', ARGV[1]) then return { 'duplicate' } end
-- Like a message, /status gets the refusal (includes/dedupe.lua); `restart` lets the next update start afresh.
if redis.call('HGET', KEYS[1] .. 'tombstone', 'mode') == 'refuse' then return { 'purged' } end
local s = snapshot(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
table.insert(s, 1, 'status')
return s
