--[[
  Release a lock (a lease taken with `lease-acquire`), only if it still holds
  this token (it may have expired and been taken by someone else).

  KEYS[1] lock   the lock key

  ARGV[1] token  the holder's token

  Returns { 1 } when released, { 0 } when the lock was not (or no longer) ours
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return { 1 }
end
return { 0 }
