--[[
  Takes back the newest message id one message kept, when the host did not
  take that message in: only while the key still holds that message's id, so
  a message of the same sender that came later and was taken in keeps its own.

  KEYS[1] last      string: the conversation's newest message id

  ARGV[1] id        the id this message kept
  ARGV[2] ttl       0: delete it; else its lifetime is cut to at most this many seconds

  Returns { n }: 1 when the key held the id and was deleted or cut, else 0
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return { 0 } end
local ttl = tonumber(ARGV[2])
if ttl == 0 then return { redis.call('DEL', KEYS[1]) } end
return { redis.call('EXPIRE', KEYS[1], ttl, 'LT') }
