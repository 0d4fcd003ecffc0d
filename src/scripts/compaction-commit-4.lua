--[[
  Commit a compaction in one step, fenced: the checkpoint (compare-and-set
  against the one the compaction started from), the `compaction` record entry
  (which satisfies the /compact the compaction read) and, when it changed, the
  circuit breaker. A crash can no longer leave a checkpoint without its entry.

  KEYS[1] run      run record hash
  KEYS[2] state    conversation state hash
  KEYS[3] log      conversation record
  KEYS[4] meta     conversation meta

  ARGV[1] token            fencing token
  ARGV[2] checkpoint field state key of the checkpoint
  ARGV[3] checkpoint json
  ARGV[4] expect           'absent' | 'equals' (the checkpoint the compaction read)
  ARGV[5] expected         that checkpoint's JSON ('equals')
  ARGV[6] max bytes        size cap of a state value
  ARGV[7] entry json       the `compaction` entry
  ARGV[8] breaker field    state key of the circuit breaker
  ARGV[9] breaker json     its new value, or '' to leave it
  ARGV[10] request seq     the /compact the compaction read (0: none); it and older ones are
                           satisfied, one that arrived while it summarized stays

  Returns { 'ok', seq of the compaction entry }
  Errors  { -1 }, { -2 }, { -3, current token }, { -6, current checkpoint or '' } CAS conflict,
          { -7, max bytes } value too large
]]
--- @include "common"

local _, err = fenced_run(KEYS[1], ARGV[1])
if err then return err end
local max = tonumber(ARGV[6])
if #ARGV[3] > max or #ARGV[9] > max then return { ERR_TOO_LARGE, max } end
local conflict = state_expect(KEYS[2], ARGV[2], ARGV[4], ARGV[5])
if conflict then return conflict end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local seq = append_entry(KEYS[3], KEYS[4], ARGV[7])
clear_compact_request(KEYS[4], ARGV[10])
if ARGV[9] ~= '' then redis.call('HSET', KEYS[2], ARGV[8], ARGV[9]) end
return { 'ok', seq }
