--[[
  /new: start a fresh context. Appends `conversation.reset` (history before it
  is no longer projected), deletes the stored tool artifacts and asks an active run to stop. Deduped.

  KEYS[1] base      conversation key prefix
  KEYS[2] dedupe    dedupe key of the command's update
  KEYS[3] active    active run id
  KEYS[4] log       conversation record
  KEYS[5] meta      conversation meta

  ARGV[1] entry json       the `conversation.reset` entry
  ARGV[2] dedupe ttl       seconds
  ARGV[3] control channel
  ARGV[4] conversation id

  Returns { 'duplicate', original seq }
          { 'purged' }      the conversation was purged and its tombstone refuses updates
                            (only the dedupe key is written: seq 0)
          { 'reset', seq, stopped run id or '' }
]]
--- @include "common"
--- @include "dedupe"
--- @include "stop"

local seq, refused = dedupe_append(KEYS[2], KEYS[4], KEYS[5], ARGV[1], ARGV[2])
if refused then return refused end
redis.call('HSET', KEYS[5], 'reset_seq', seq)
-- Large tool results belong to the history that is no longer projected.
redis.call('DEL', KEYS[1] .. 'artifacts')

local active = redis.call('GET', KEYS[3])
if not active then return { 'reset', seq, '' } end
local run_key = KEYS[1] .. 'run:' .. active
if not redis.call('HGET', run_key, 'stop') then
  request_stop(run_key, KEYS[4], KEYS[5], active, seq, 'stop', ARGV[3], ARGV[4])
end
return { 'reset', seq, active }
