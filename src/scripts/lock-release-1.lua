--[[
  Release a lock (a lease taken with `lease-acquire`), only if it still holds
  this token (it may have expired and been taken by someone else).

  KEYS[1] lock   the lock key

  ARGV[1] token  the holder's token

  Returns { 1 } when released, { 0 } when the lock was not (or no longer) ours
]]
--- @include "lease"
if lease_give_up(KEYS[1], ARGV[1]) then return { 1 } end
return { 0 }
