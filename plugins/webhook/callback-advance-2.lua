--[[
  The webhook callback pump's progress on one conversation, only while this
  host still holds the conversation's callback lock: record the last reply
  the receiver took (when given) and keep the lock for `ms` more. A host whose
  lock ran out and was taken changes nothing and stops.

  KEYS[1] lock     `<base>callback_lock` (value: the holder's token)
  KEYS[2] cursor   `<base>callback_cursor` (stream id of the last reply taken)

  ARGV[1] token    this host's lock token
  ARGV[2] id       stream id of the reply just taken, or '' to keep the cursor
  ARGV[3] ms       how long the lock lives from now

  Returns { 1 } when done, { 0 } when the lock is not (or no longer) this host's
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return { 0 } end
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return { 1 }
