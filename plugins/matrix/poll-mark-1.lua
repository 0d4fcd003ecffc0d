--[[
  Rewrites the entry of a poll that is still kept (the choice taken, with
  the text its end shows), and writes nothing when it is gone (answered,
  expired or purged): a purged conversation's hash is never made again.

  KEYS[1] polls    the conversation's polls (hash: poll event id -> JSON)

  ARGV[1] poll id
  ARGV[2] entry    JSON

  Returns { 1 } when rewritten, { 0 } when the poll is no longer kept
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return { 0 } end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return { 1 }
