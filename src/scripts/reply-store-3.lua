--[[
  Store one reply in the conversation's reply stream, once per
  delivery key: a run attempt that died after storing a reply but before its
  outbox recorded it sends it again with the same key, and finds it stored.

  KEYS[1] replies   the conversation's reply stream
  KEYS[2] stored    `<base>reply_stored:<delivery key>` (its stream id, for a while)
  KEYS[3] tombstone `<base>tombstone`: while a purged conversation's tombstone stands, the
                    stream (then holding only the notices sent since the purge) expires with it

  ARGV[1] data json     the reply
  ARGV[2] max length    approximate length cap of the stream (`MAXLEN ~`)
  ARGV[3] ttl s         how long the delivery key is remembered; 0: a reply without a
                        delivery key, stored without dedupe (KEYS[2] is not touched)

  Returns { 'stored', stream id } or { 'duplicate', stream id of the first copy }
]]
local remember = ARGV[3] ~= '0'
if remember then
  local id = redis.call('GET', KEYS[2])
  if id then return { 'duplicate', id } end
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'data', ARGV[1])
if remember then redis.call('SET', KEYS[2], id, 'EX', ARGV[3]) end
-- The tombstone's own expiry, to the millisecond (a relative TTL read and set again could land a ms later).
local ends = redis.call('PEXPIRETIME', KEYS[3])
if ends > 0 then redis.call('PEXPIREAT', KEYS[1], ends) end
return { 'stored', id }
