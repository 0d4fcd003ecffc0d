--[[
  Whether an account's identity was approved (paired), with the identity id:
  one round trip for a message on a pairing channel.

  KEYS[1] links     people links hash (account -> identity id)

  ARGV[1] base      people key prefix, ending in ':' (approved identities: the set `<base>paired`)
  ARGV[2] account   `<channel>:<user id>`

  Returns { identity id, 1 when approved else 0 }
]]
local id = redis.call('HGET', KEYS[1], ARGV[2]) or ARGV[2]
return { id, redis.call('SISMEMBER', ARGV[1] .. 'paired', id) }
