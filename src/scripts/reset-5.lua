--[[
  /new: start a fresh context. Appends `conversation.reset` (history before it
  is no longer projected) and asks an active run to stop. Deduped.

  KEYS[1] base      conversation key prefix
  KEYS[2] dedupe    dedupe key of the command's update
  KEYS[3] active    active run id
  KEYS[4] log       conversation record
  KEYS[5] meta      conversation meta

  ARGV[1] entry json       the `conversation.reset` entry
  ARGV[2] dedupe ttl       seconds
  ARGV[3] control channel
  ARGV[4] conversation id

  Returns { 'duplicate', original seq } | { 'reset', seq, stopped run id or '' }
]]
--- @include "common"
--- @include "dedupe"

local seen = dedupe_seen(KEYS[2])
if seen then return { 'duplicate', seen } end
local seq = append_entry(KEYS[4], KEYS[5], ARGV[1])
dedupe_mark(KEYS[2], seq, ARGV[2])
redis.call('HSET', KEYS[5], 'reset_seq', seq)

local active = redis.call('GET', KEYS[3])
if not active then return { 'reset', seq, '' } end
local run_key = KEYS[1] .. 'run:' .. active
if not redis.call('HGET', run_key, 'stop') then
  redis.call('HSET', run_key, 'stop', 'stop')
  append_audit(KEYS[4], KEYS[5], 'run.control', active, { seq }, { control = 'stop' })
  redis.call('PUBLISH', ARGV[3], cjson.encode({ conversation = ARGV[4], run = active, kind = 'stop' }))
end
return { 'reset', seq, active }
