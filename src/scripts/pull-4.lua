--[[
  Pull steering at a turn boundary: atomically take all (or the first) seqs
  from the run's steering list, record `steering.injected`, and return the
  message entries. Fenced. Nothing is pulled once a stop was requested: those
  messages go to the successor run when this one finishes.

  KEYS[1] run      run record hash
  KEYS[2] steer    the run's steering list
  KEYS[3] log      conversation record
  KEYS[4] meta     conversation meta
  ARGV[1] token    fencing token
  ARGV[2] mode     'all' | 'one'
  ARGV[3] run id

  Returns { 'ok', n, seq1, json1, seq2, json2, ..., compaction requested seq or '' }
          (the last element is meta `compact_requested`: the boundary's /compact
          check rides on the pull instead of costing a round trip of its own)
  Errors  { -1 }, { -2 }, { -3, current token }
]]
--- @include "common"

local f, err = fenced_run(KEYS[1], ARGV[1], 'stop')
if err then return err end
local requested = redis.call('HGET', KEYS[4], 'compact_requested') or ''
if f[3] then return { 'ok', 0, requested } end
local seqs = pop_steering(KEYS[2], ARGV[2])
if #seqs == 0 then return { 'ok', 0, requested } end
append_audit(KEYS[3], KEYS[4], 'steering.injected', ARGV[3], seqs)
local out = read_entries(KEYS[3], seqs, { 'ok', #seqs })
out[#out + 1] = requested
return out
