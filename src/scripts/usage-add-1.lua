--[[
  Adds to the usage counters of one subject (an identity or a conversation),
  kept as fields of one hash so every counter of the subject shares a slot
  and purge deletes one key. Fields are named `<kind>:<window>` (`t:2026-12-02`
  tokens of a day, `t:2026-12` of a month, `r:2026-12-02T07` runs of an hour,
  `n:<window>` notices sent); a field whose window is not one of the current
  three is deleted, so the hash holds at most a few fields.

  KEYS[1] usage   the subject's usage hash

  ARGV[1] ttl     seconds the hash lives after this write (past the month's end)
  ARGV[2] day     current day window   (YYYY-MM-DD)
  ARGV[3] month   current month window (YYYY-MM)
  ARGV[4] hour    current hour window  (YYYY-MM-DDTHH)
  ARGV[5..] field, increment pairs (increment 0 reads the field)

  Returns { 'ok', value of each field after its increment... }
]]
local live = { [ARGV[2]] = true, [ARGV[3]] = true, [ARGV[4]] = true }
local fields = redis.call('HKEYS', KEYS[1])
for _, f in ipairs(fields) do
  local window = string.sub(f, 3)
  if not live[window] then redis.call('HDEL', KEYS[1], f) end
end
local out = { 'ok' }
for i = 5, #ARGV, 2 do
  out[#out + 1] = redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return out
