--[[
  Record what became of one outbound message (acknowledged with its platform
  id, not dispatched, a streaming preview), fenced like the claim before it:
  an attempt that lost its run cannot overwrite what the live attempt wrote.

  KEYS[1] outbox   conversation outbox hash (field = delivery key, value = JSON record)
  KEYS[2] run      run record hash (for the fencing check)

  ARGV[1] delivery key
  ARGV[2] token     fencing token, or '' for an unfenced write
  ARGV[3] record    JSON to store
  ARGV[4] ttl       seconds the outbox lives after this write

  Returns { 'ok' }
  Errors  { -1 }, { -2 }, { -3, current token } (fenced writes only)
]]
--- @include "common"

if ARGV[2] ~= '' then
  local _, err = fenced_run(KEYS[2], ARGV[2])
  if err then return err end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return { 'ok' }
