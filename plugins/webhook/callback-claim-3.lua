--[[
  The webhook callback pump takes a conversation: its callback lock, when no
  other host holds it (`RedisLease` semantics: `lease-acquire`), and, once
  taken, the cursor and the first replies after it, in the same step.

  KEYS[1] lock     `<base>callback_lock` (value: the holder's token)
  KEYS[2] cursor   `<base>callback_cursor` (stream id of the last reply taken)
  KEYS[3] replies  `<base>replies`, the conversation's reply stream

  ARGV[1] token    this host's lock token
  ARGV[2] ms       how long the lock lives from now
  ARGV[3] count    replies to read after the cursor

  Returns { 1, cursor, entries }   taken; cursor: '0-0' when none is stored; entries: XRANGE of up to `count` replies after it
          { 0, ms left, holder }   another host holds the lock for ms left
]]
--- @include "lease"
local took = lease_take(KEYS[1], ARGV[1], ARGV[2])
if took[1] ~= 1 then return took end
local cursor = redis.call('GET', KEYS[2]) or '0-0'
return { 1, cursor, redis.call('XRANGE', KEYS[3], '(' .. cursor, '+', 'COUNT', ARGV[3]) }
