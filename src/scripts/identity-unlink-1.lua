--[[
  Takes one account out of its identity: it becomes its own identity again.
  When the account's own id was the identity id, the accounts left behind
  move to the identity of the first of them (sorted), so they do not share
  an identity with the account that left. One account left alone is no
  link: its entry goes.

  KEYS[1] links     people links hash (account -> identity id)

  ARGV[1] base      people key prefix, ending in ':'
  ARGV[2] account   `<channel>:<user id>`

  Returns { 'unlinked', former identity id }
          { 'none' }  (the account was not linked)
]]
local links, base, account = KEYS[1], ARGV[1], ARGV[2]
local id = redis.call('HGET', links, account)
if not id then return { 'none' } end
local members = base .. 'members:' .. id
redis.call('HDEL', links, account)
redis.call('SREM', members, account)
local rest = redis.call('SMEMBERS', members)
local heir = id
if id == account and #rest > 0 then
  table.sort(rest)
  heir = rest[1]
end
redis.call('DEL', members)
if #rest == 1 and rest[1] == heir then
  redis.call('HDEL', links, heir)
elseif #rest > 0 then
  local heir_members = base .. 'members:' .. heir
  for _, m in ipairs(rest) do
    redis.call('HSET', links, m, heir)
    redis.call('SADD', heir_members, m)
  end
end
return { 'unlinked', id }
