--[[
  Purge a conversation: delete its record, meta, runs (hash, steering, inputs),
  pending, state (checkpoint included), outbox, files kept for download and the other keys listed by
  the caller (plugins' keys among them), in one step, and leave a tombstone. Refused while a run is
  active unless `stop` is set: then the run is told to stop on the control
  channel, and its keys go with the rest, so every later write of it (fenced
  by its run hash) is refused.

  Run ids come from the run index `<base>runs` and the active run, so the
  script's work does not grow with the record. Dedupe keys stay: they hold only the seq an update became, expire
  within the dedupe TTL (the tombstone lives at least as long), and keep a
  redelivered pre-purge update a duplicate instead of a new message.

  KEYS[1] base     conversation key prefix `<p>:{c:<id>}:` (every key derives from it)

  ARGV[1] stop           '1': stop an active run and purge; '0': refuse while one is active
  ARGV[2] mode           what a later update gets: 'refuse' | 'restart' (kept in the tombstone)
  ARGV[3] tombstone ttl  seconds
  ARGV[4] control channel
  ARGV[5] conversation id
  ARGV[6] update key     of the /purge command that asked, or '': a redelivery of it answers
                         duplicate (its dedupe key, seq 0, is set when the purge is done)
  ARGV[7] dedupe ttl     seconds
  ARGV[8..] key suffixes of the conversation (src/redis/keys.ts CONVERSATION_KEY_SUFFIXES and the
            plugins' declared keys)

  Returns { 'duplicate' }  the command's update was seen before; nothing written
          { 'purged', keys deleted, stopped run id or '', last seq }
          { 'already_purged' }   nothing left, a tombstone stands
          { 'not_found' }        nothing stored for the conversation
          { 'active', run id }   a run is active and `stop` was not set; nothing written
  Errors  { -5 } bad mode
]]
--- @include "common"

local base, stop, mode = KEYS[1], ARGV[1], ARGV[2]
if mode ~= 'refuse' and mode ~= 'restart' then return { ERR_BAD_ARG } end
local active_key, meta_key, log_key, tombstone = base .. 'active', base .. 'meta', base .. 'log', base .. 'tombstone'

local dedupe_key = ARGV[6] ~= '' and (base .. 'dedupe:' .. ARGV[6])
if dedupe_key and redis.call('EXISTS', dedupe_key) == 1 then return { 'duplicate' } end
local function done(reply)
  if dedupe_key then redis.call('SET', dedupe_key, 0, 'EX', ARGV[7]) end
  return reply
end

local active = redis.call('GET', active_key)
if active and stop ~= '1' then return { 'active', active } end

local keys = {}
for i = 8, #ARGV do keys[#keys + 1] = base .. ARGV[i] end
if redis.call('EXISTS', unpack(keys)) == 0 then
  if redis.call('EXISTS', tombstone) == 1 then return done({ 'already_purged' }) end
  return done({ 'not_found' })
end

local last_seq = tonumber(redis.call('HGET', meta_key, 'seq') or 0)
-- A tombstone standing from an earlier purge (restart mode lifts it): seqs continue after the highest.
local earlier = tonumber(redis.call('HGET', tombstone, 'seq') or 0)
if earlier > last_seq then last_seq = earlier end

local runs = {}
local function add_run(id) if id and id ~= '' then runs[id] = true end end
for _, id in ipairs(redis.call('ZRANGE', base .. 'runs', 0, -1)) do add_run(id) end
add_run(active)

if active and redis.call('EXISTS', base .. 'run:' .. active) == 1 then
  -- Tells the owning runner to abort now rather than at its next fenced write.
  redis.call('PUBLISH', ARGV[4], cjson.encode({ conversation = ARGV[5], run = active, kind = 'stop' }))
else
  active = false
end

-- The reply stream's per-reply marks are named by the outbox's delivery keys.
for _, key in ipairs(redis.call('HKEYS', base .. 'outbox')) do keys[#keys + 1] = base .. 'reply_stored:' .. key end
-- Files kept for signed download are named by their index (src/plugin/files.ts).
for _, id in ipairs(redis.call('ZRANGE', base .. 'files', 0, -1)) do keys[#keys + 1] = base .. 'file:' .. id end
for id in pairs(runs) do
  keys[#keys + 1] = base .. 'run:' .. id
  keys[#keys + 1] = base .. 'steer:' .. id
  keys[#keys + 1] = base .. 'inputs:' .. id
end
local deleted = 0
for i = 1, #keys, 500 do
  deleted = deleted + redis.call('DEL', unpack(keys, i, math.min(i + 499, #keys)))
end

redis.call('DEL', tombstone)
redis.call('HSET', tombstone, 'mode', mode, 'seq', last_seq, 'at', now_ms())
redis.call('EXPIRE', tombstone, ARGV[3])
return done({ 'purged', deleted, active or '', last_seq })
