--[[
  Stores a conversation's schedule, refusing it past the per-conversation cap.
  The count and the write are one step, so two creations racing for the last
  place cannot both get it.

  KEYS[1] schedules  the conversation's schedules (hash: schedule id -> JSON)
  KEYS[2] tombstone  left by purge: a purged conversation takes no schedule

  ARGV[1] id         schedule id
  ARGV[2] json       the schedule
  ARGV[3] max        most schedules the conversation may have

  Returns { 'ok', count after }
          { 'limit', count }   the conversation already has `max` schedules
          { 'purged' }         the conversation was purged
]]
if redis.call('EXISTS', KEYS[2]) == 1 then return { 'purged' } end
local count = redis.call('HLEN', KEYS[1])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and count >= tonumber(ARGV[3]) then return { 'limit', count } end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return { 'ok', redis.call('HLEN', KEYS[1]) }
