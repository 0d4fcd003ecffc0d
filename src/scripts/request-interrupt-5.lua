--[[
  A control command that asks the active run to stop: `interrupt` (partial
  answer kept, marked cut off), `supersede` (partial answer excluded from the
  prompt) or `stop` (/stop: interrupt with no new input). Deduped like any
  update; publishes on the control channel so the owning runner aborts.

  KEYS[1] base      conversation key prefix
  KEYS[2] dedupe    dedupe key of the command's update
  KEYS[3] active    active run id
  KEYS[4] log       conversation record
  KEYS[5] meta      conversation meta

  ARGV[1] kind             interrupt|supersede|stop
  ARGV[2] entry json       the `command.received` entry
  ARGV[3] dedupe ttl       seconds
  ARGV[4] control channel
  ARGV[5] conversation id

  Returns { 'duplicate', original seq }
          { 'purged' }                                 the conversation was purged and its tombstone refuses
                                                       updates (only the dedupe key is written: seq 0)
          { 'idle', seq }                              no active run
          { 'requested', seq, run id, kind, run state } (kind is the first request's when one was already made)
  Errors  { -5 } bad kind
]]
--- @include "common"
--- @include "dedupe"
--- @include "stop"

local KINDS = { interrupt = true, supersede = true, stop = true }
if not KINDS[ARGV[1]] then return { ERR_BAD_ARG } end

local seq, refused = dedupe_append(KEYS[2], KEYS[4], KEYS[5], ARGV[2], ARGV[3])
if refused then return refused end

local active = redis.call('GET', KEYS[3])
if not active then return { 'idle', seq } end
local run_key = KEYS[1] .. 'run:' .. active
local f = redis.call('HMGET', run_key, 'state', 'stop')
if f[2] then return { 'requested', seq, active, f[2], f[1] } end
request_stop(run_key, KEYS[4], KEYS[5], active, seq, ARGV[1], ARGV[4], ARGV[5])
return { 'requested', seq, active, ARGV[1], f[1] }
