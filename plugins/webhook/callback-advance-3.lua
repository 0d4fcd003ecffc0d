--[[
  The webhook callback pump's progress on one conversation, only while this
  host still holds the conversation's callback lock: record the last reply
  the receiver took (when given), keep the lock for `ms` more and read the
  replies after the cursor (when asked), so the next POST needs no read of its
  own. A host whose lock ran out and was taken changes nothing and stops.

  KEYS[1] lock     `<base>callback_lock` (value: the holder's token)
  KEYS[2] cursor   `<base>callback_cursor` (stream id of the last reply taken)
  KEYS[3] replies  `<base>replies`, the conversation's reply stream

  ARGV[1] token    this host's lock token
  ARGV[2] id       stream id of the reply just taken, or '' to keep the cursor
  ARGV[3] ms       how long the lock lives from now
  ARGV[4] count    replies to read after the (new) cursor; 0 reads none

  Returns { 1, entries }  done; entries: XRANGE of up to `count` replies after the cursor (none when `count` is 0)
          { 0 }           the lock is not (or no longer) this host's
]]
--- @include "lease"
if not lease_held(KEYS[1], ARGV[1]) then return { 0 } end
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if tonumber(ARGV[4]) == 0 then return { 1, {} } end
local cursor = ARGV[2]
if cursor == '' then cursor = redis.call('GET', KEYS[2]) or '0-0' end
return { 1, redis.call('XRANGE', KEYS[3], '(' .. cursor, '+', 'COUNT', ARGV[4]) }
