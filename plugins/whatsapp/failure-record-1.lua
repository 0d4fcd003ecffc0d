--[[
  Records one failed reply of a conversation, at most `max` per conversation:
  the count and the write are one step, so concurrent failures cannot pass
  the cap, and a redelivered status (same id) writes its own field again
  even when the cap is reached.

  KEYS[1] failures   the conversation's failed replies (hash: id -> JSON)

  ARGV[1] id         the reply's `wamid`, or its delivery key
  ARGV[2] json       the failure record
  ARGV[3] max        most failures kept

  Returns { 1 } when recorded, { 0 } when the cap was reached
]]
if redis.call('HLEN', KEYS[1]) < tonumber(ARGV[3]) or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  return { 1 }
end
return { 0 }
