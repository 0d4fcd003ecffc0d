--[[
  /model: show, set or clear the conversation's model choice (meta `model`,
  the name of one of `models`; the host checks the name against what the
  sender's profile allows, and a runner checks it again at every run).
  Deduped; recorded as a `command.received` entry.

  KEYS[1] dedupe    dedupe key of the command's update
  KEYS[2] log       conversation record
  KEYS[3] meta      conversation meta

  ARGV[1] op          show|set|clear
  ARGV[2] name        the model's name (op `set`)
  ARGV[3] entry json  the `command.received` entry
  ARGV[4] dedupe ttl  seconds

  Returns { 'duplicate', original seq }
          { 'purged' }      the conversation was purged and its tombstone refuses updates
          { 'ok', seq, the choice after the command ('' for none) }
  Errors  { -5 } bad op or name
]]
--- @include "common"
--- @include "dedupe"

local op, name = ARGV[1], ARGV[2]
if op ~= 'show' and op ~= 'set' and op ~= 'clear' then return { ERR_BAD_ARG } end
if op == 'set' and (name == '' or #name > 64) then return { ERR_BAD_ARG } end
local seq, refused = dedupe_append(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4])
if refused then return refused end
if op == 'set' then redis.call('HSET', KEYS[3], 'model', name) elseif op == 'clear' then redis.call('HDEL', KEYS[3], 'model') end
return { 'ok', seq, redis.call('HGET', KEYS[3], 'model') or '' }
