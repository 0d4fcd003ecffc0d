--[[
  /compact: ask for a manual compaction. Deduped; recorded as
  `command.received`; sets `compact_requested` in meta (the running run
  compacts at its next turn boundary). When the conversation is idle, a
  run of its own (cause `compact`, no inputs) is created and returned for
  enqueueing.

  KEYS[1] base      conversation key prefix
  KEYS[2] dedupe    dedupe key of the command's update
  KEYS[3] active    active run id
  KEYS[4] log       conversation record
  KEYS[5] meta      conversation meta

  ARGV[1] entry json       the `command.received` entry
  ARGV[2] dedupe ttl       seconds
  ARGV[3] run id           id to use if a compaction run is created
  ARGV[4] conversation id

  Returns { 'duplicate', original seq }
          { 'purged' }                          the conversation was purged and its tombstone refuses
                                                updates (only the dedupe key is written: seq 0)
          { 'requested', seq, active run id }   applied by the active run at its next boundary
          { 'new-run', seq, run id }            idle: a compaction run was created
]]
--- @include "common"
--- @include "dedupe"

local seq, refused = dedupe_append(KEYS[2], KEYS[4], KEYS[5], ARGV[1], ARGV[2])
if refused then return refused end
redis.call('HSET', KEYS[5], 'compact_requested', seq)

local active = redis.call('GET', KEYS[3])
if active then return { 'requested', seq, active } end
create_run(KEYS[1], KEYS[3], ARGV[3], ARGV[4], {}, 'compact', now_ms())
return { 'new-run', seq, ARGV[3] }
