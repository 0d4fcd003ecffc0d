--[[
  Forgets an identity's links: every account linked into it becomes its own
  identity again, and its approval (`<base>paired`) is withdrawn.

  KEYS[1] links     people links hash (account -> identity id)

  ARGV[1] base      people key prefix, ending in ':'
  ARGV[2] identity  identity id

  Returns { 'purged', account, account, ... }  (the accounts that were linked into it)
]]
local links, base, id = KEYS[1], ARGV[1], ARGV[2]
local members = base .. 'members:' .. id
local accounts = redis.call('SMEMBERS', members)
for _, m in ipairs(accounts) do redis.call('HDEL', links, m) end
redis.call('DEL', members)
redis.call('SREM', base .. 'paired', id)
local out = { 'purged' }
for _, m in ipairs(accounts) do out[#out + 1] = m end
return out
