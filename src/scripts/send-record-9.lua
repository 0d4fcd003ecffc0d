--[[
  Record a message sent to a conversation from outside a run (the messages
  API, `sendMessage`), deduped by its idempotency key, and take the key's
  send lock so one caller at a time delivers it. A key seen before answers
  the entry it became (a retry delivers what is still unsent, never a second copy),
  or, once its delivery finished, the result kept under the key (`send-result-1.lua`):
  that result lives as long as the key's dedupe, whatever the outbox has pruned since.

  Keys are scoped to their caller (an API token, or the package's
  `sendMessage`), so one token's key never answers another's send. A key
  release 0.1.0 recorded unscoped is honoured while it lives (one dedupe
  window after the upgrade): when KEYS[1] was never seen and KEYS[7] was,
  that key's own result and lock (KEYS[8], KEYS[9], as 0.1.0 named them) are
  used, so a 0.1.0 host, another token and this call share one lock and one
  kept result; the reply then ends with 'unscoped'.

  KEYS[1] dedupe   the key's dedupe key (holds the seq the message became)
  KEYS[2] log      conversation record
  KEYS[3] meta     conversation meta (its seq counter: the conversation exists)
  KEYS[4] lock     the key's send lock
  KEYS[5] tombstone the conversation's purge tombstone (purge-1.lua)
  KEYS[6] result   the key's result hash: `seq`, and `ids` (JSON platform message ids) once delivered
  KEYS[7] dedupe as 0.1.0 named it (the key unscoped)
  KEYS[8] result as 0.1.0 named it
  KEYS[9] lock as 0.1.0 named it

  ARGV[1] entry    `message.sent` entry JSON
  ARGV[2] ttl      dedupe TTL, seconds (the result hash lives as long)
  ARGV[3] lock ms  how long the send lock holds without a release
  ARGV[4] token    the lock holder's token
  ARGV[5] known    '1': refuse a conversation that has no record yet

  Returns { 'recorded', seq }                 new: recorded, lock taken
          { 'done', seq, ids JSON }             seen before and delivered: nothing written, no lock
          { 'duplicate', seq, entry JSON or '', scope } seen before, not known delivered: lock taken (the entry
                                                is '' once it is gone: the caller delivers nothing again);
                                                scope 'unscoped' when the 0.1.0 keys matched, else 'scoped'
          { 'busy', seq }                       seen before and another caller holds the lock
          { 'unknown' }                         ARGV[5] = '1' and the conversation has no record; nothing written
          { 'purged' }                          the conversation was purged and refuses updates, or the key
                                                was refused by a purged conversation (seq 0), or its message
                                                was purged (a tombstone stands); nothing written
]]
--- @include "common"
--- @include "dedupe"

local seen = dedupe_seen(KEYS[1])
local result, lock, scope = KEYS[6], KEYS[4], 'scoped'
if not seen then
  seen = dedupe_seen(KEYS[7])
  if seen then result, lock, scope = KEYS[8], KEYS[9], 'unscoped' end
end
if seen then
  -- Seq 0: refused by a purged conversation (purge_refuses). A tombstone: the message went with the purge.
  if seen == 0 or redis.call('EXISTS', KEYS[5]) == 1 then return { 'purged' } end
  local ids = redis.call('HGET', result, 'ids')
  if ids then return { 'done', seen, ids } end
  if not redis.call('SET', lock, ARGV[4], 'PX', ARGV[3], 'NX') then return { 'busy', seen } end
  local e = redis.call('XRANGE', KEYS[2], seen .. '-0', seen .. '-0')
  return { 'duplicate', seen, (e[1] and e[1][2][2]) or '', scope }
end
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[3]) == 0 then return { 'unknown' } end
if purge_refuses(KEYS[3], KEYS[1], ARGV[2]) then return { 'purged' } end
local seq = append_entry(KEYS[2], KEYS[3], ARGV[1])
dedupe_mark(KEYS[1], seq, ARGV[2])
redis.call('DEL', KEYS[6])
redis.call('HSET', KEYS[6], 'seq', seq)
redis.call('EXPIRE', KEYS[6], ARGV[2])
redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[3])
return { 'recorded', seq }
