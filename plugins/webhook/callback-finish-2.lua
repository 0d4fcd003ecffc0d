--[[
  The webhook callback pump gives a conversation up: a last look for a reply
  after the cursor and the release of the callback lock (only while this
  host holds it: `lock-release`), in one step. The pump drops the
  conversation's pending mark first and marks it again when this look finds a
  reply: one stored before the mark was dropped found the mark there and
  left it, so nothing else would call it back.

  KEYS[1] lock     `<base>callback_lock` (value: the holder's token)
  KEYS[2] replies  `<base>replies`, the conversation's reply stream

  ARGV[1] token    this host's lock token
  ARGV[2] cursor   stream id of the last reply taken ('0-0': none)

  Returns { 1 } when a reply is stored after the cursor, else { 0 }; the lock is released either way (if still this host's)
]]
--- @include "lease"
local more = #redis.call('XRANGE', KEYS[2], '(' .. ARGV[2], '+', 'COUNT', 1)
lease_give_up(KEYS[1], ARGV[1])
if more > 0 then return { 1 } end
return { 0 }
