--[[
  Marks a conversation's callbacks pending and wakes the channel's pumps, in
  one command. The mark is due now unless the conversation already has one
  (a host working on it, or a retry time): its replies stay in order either way.

  KEYS[1] pending  `callbacks_due:<channel>`, conversations scored by when they are due

  ARGV[1] conversation  the conversation id
  ARGV[2] wake          pub/sub channel of the pumps' wake-ups

  Returns { 1 }
]]
redis.call('ZADD', KEYS[1], 'NX', 0, ARGV[1])
redis.call('PUBLISH', ARGV[2], '1')
return { 1 }
