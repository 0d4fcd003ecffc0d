--[[
  Move one field of a cursor hash forward, never back: the field holds a
  decimal id that grows with time (a Discord snowflake), compared by length
  and then digit by digit, so ids of any length order as numbers.

  KEYS[1] cursors   hash of cursors (field = a channel id, value = the newest id handled there)

  ARGV[1] field     which cursor
  ARGV[2] id        decimal id just handled

  Returns { 1 } when the cursor moved to id, { 0 } when it already was at or past it
]]
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and (#current > #ARGV[2] or (#current == #ARGV[2] and current >= ARGV[2])) then return { 0 } end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return { 1 }
