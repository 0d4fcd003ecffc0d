--[[
  Keeps one of the bot's reactions in a conversation's record of them, and
  forgets the oldest past `max`, so the record stays bounded however many
  messages the conversation has. A field kept again moves to the newest.

  KEYS[1] reactions  hash: `<message id>:<emoji type>` -> the reaction's reaction_id
  KEYS[2] order      sorted set: the hash's fields, scored in the order they were kept

  ARGV[1] field      `<message id>:<emoji type>`
  ARGV[2] id         the reaction's reaction_id
  ARGV[3] max        most fields kept (at least 1)

  Returns { n }: how many of the oldest fields were forgotten
]]
local newest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], (tonumber(newest[2]) or 0) + 1, ARGV[1])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[3])
if over <= 0 then
  return { 0 }
end
local oldest = redis.call('ZRANGE', KEYS[2], 0, over - 1)
redis.call('HDEL', KEYS[1], unpack(oldest))
redis.call('ZREM', KEYS[2], unpack(oldest))
return { #oldest }
