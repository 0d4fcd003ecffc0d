--[[
  Give a lease up, only when the caller still holds it.

  KEYS[1] lease  string key
  ARGV[1] owner  id of the caller

  Returns 1 released, 0 held by someone else (or nobody)
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
