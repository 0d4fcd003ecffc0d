--[[
  /queue <mode>: set (or clear) the conversation's input policy override.
  Deduped; recorded as a `command.received` entry.

  KEYS[1] dedupe    dedupe key of the command's update
  KEYS[2] log       conversation record
  KEYS[3] meta      conversation meta

  ARGV[1] policy      steer|followup|collect|interrupt|supersede, or '' to clear
  ARGV[2] entry json  the `command.received` entry
  ARGV[3] dedupe ttl  seconds

  Returns { 'duplicate', original seq }
          { 'purged' }      the conversation was purged and its tombstone refuses updates
                            (only the dedupe key is written: seq 0)
          { 'ok', seq }
  Errors  { -5 } bad policy
]]
--- @include "common"
--- @include "dedupe"

local POLICIES = { steer = true, followup = true, collect = true, interrupt = true, supersede = true }
if ARGV[1] ~= '' and not POLICIES[ARGV[1]] then return { ERR_BAD_ARG } end
local seq, refused = dedupe_append(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
if refused then return refused end
if ARGV[1] == '' then redis.call('HDEL', KEYS[3], 'policy') else redis.call('HSET', KEYS[3], 'policy', ARGV[1]) end
return { 'ok', seq }
