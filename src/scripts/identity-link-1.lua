--[[
  Links an account into the identity of another: every account of the
  joining account's identity moves to the target's identity (one person's
  accounts stay together). Both accounts' own ids are their identities until
  they are linked. An approval (the `paired` set) moves with the identity.

  KEYS[1] links     people links hash (account -> identity id)

  ARGV[1] base      people key prefix, ending in ':' (members sets are `<base>members:<identity>`,
                    approved identities the set `<base>paired`)
  ARGV[2] account   the joining account, `<channel>:<user id>`
  ARGV[3] target    the account whose identity it joins

  Returns { 'linked', identity id, the joining account's former identity id }
          { 'same', identity id }  (already one identity)
]]
local links, base, account, target = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
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
