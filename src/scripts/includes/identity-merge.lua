--[[
  Merges two identities, for identity-link and access-link. Included with
  `--- @include "identity-merge"`.

  merge_identity(links, base, account, target): every account of `account`'s
  identity moves to the identity of `target` (one person's accounts stay
  together); an approval (the set `<base>paired`) moves with the identity.
  Both accounts' own ids are their identities until they are linked.

  Returns { 'linked', identity id, the joining account's former identity id }
          { 'same', identity id }  (already one identity)
]]
local function merge_identity(links, base, account, target)
  local into = redis.call('HGET', links, target) or target
  local from = redis.call('HGET', links, account) or account
  if from == into then return { 'same', into } end

  local into_members = base .. 'members:' .. into
  redis.call('HSET', links, target, into)
  redis.call('SADD', into_members, target)

  local from_members = base .. 'members:' .. from
  local moving = redis.call('SMEMBERS', from_members)
  if #moving == 0 then moving = { account } end
  for _, m in ipairs(moving) do
    redis.call('HSET', links, m, into)
    redis.call('SADD', into_members, m)
  end
  redis.call('DEL', from_members)
  local paired = base .. 'paired'
  if redis.call('SREM', paired, from) == 1 then redis.call('SADD', paired, into) end
  return { 'linked', into, from }
end
