--[[
  Move fields of a cursor hash forward, never back: a field holds a decimal id
  that grows with time (a Discord snowflake), compared by length and then
  digit by digit, so ids of any length order as numbers.

  KEYS[1] cursors   hash of cursors (field = a channel id, value = the newest id handled there)

  ARGV[1] field     which cursor
  ARGV[2] id        decimal id just handled
  ARGV[3], ARGV[4], … more field / id pairs

  Returns { n }: how many cursors moved (the others already were at or past their id)
]]
local moved = 0
for i = 1, #ARGV - 1, 2 do
  local field, id = ARGV[i], ARGV[i + 1]
  local current = redis.call('HGET', KEYS[1], field)
  if not (current and (#current > #id or (#current == #id and current >= id))) then
    redis.call('HSET', KEYS[1], field, id)
    moved = moved + 1
  end
end
return { moved }
