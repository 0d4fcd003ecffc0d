--[[
  A lease (a lock with a lifetime) held by one owner at a time: the key holds
  the owner id and expires with the lease (`RedisLease`). Included with
  `--- @include "lease"` by `lease-acquire` and `lock-release`, and by a plugin
  script that takes or gives up a lease in the same step as other keys of the
  lease key's slot.
]]
-- Takes the lease when it is free, or extends it when `owner` holds it, for `ms` from now.
-- Returns { 1, ms } when `owner` holds it, { 0, ms left, holder id } when another owner does.
local function lease_take(key, owner, ms)
  local holder = redis.call('GET', key)
  if holder == false or holder == owner then
    redis.call('SET', key, owner, 'PX', ms)
    return { 1, tonumber(ms) }
  end
  return { 0, redis.call('PTTL', key), holder }
end

-- Whether `owner` holds the lease.
local function lease_held(key, owner)
  return redis.call('GET', key) == owner
end

-- Gives the lease up when `owner` still holds it (it may have expired and been taken by another); true when it did.
local function lease_give_up(key, owner)
  if not lease_held(key, owner) then return false end
  redis.call('DEL', key)
  return true
end
