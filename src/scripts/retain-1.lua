--[[
  Retention of one conversation, after a run ended (both parts are off unless
  configured):

  - record trim: entries before the compaction checkpoint's `covers_until`
    are removed once they are more than `entries` entries behind the newest,
    or older than `ms`. Never trimmed: `covers_until` itself and everything
    after it (a run's prompt is the summary plus the record after it, and a
    run validates the checkpoint by that entry), nor any message a live run
    or a waiting message needs (the active run's inputs, urgent and steering
    seqs, pending). Without a checkpoint of this conversation in the schema
    this build reads, nothing is trimmed.
  - idle expiry: when no run is active and nothing waits, every key of the
    conversation expires in `idle ttl` seconds (keys with a shorter TTL keep
    it); the next run created for it makes them persistent again
    (includes/common.lua `create_run`, from the set `<base>idle_keys` of
    the keys that had no TTL of their own).

  KEYS[1] base     conversation key prefix `<p>:{c:<id>}:`

  ARGV[1] entries        trim entries more than this many behind the newest (0: off)
  ARGV[2] ms             trim entries older than this (0: off)
  ARGV[3] idle ttl       seconds (0: off)
  ARGV[4] conversation id
  ARGV[5] checkpoint     state key of the compaction checkpoint
  ARGV[6..] key suffixes of the conversation (src/redis/keys.ts CONVERSATION_KEY_SUFFIXES and the
            plugins' declared keys)

  Returns { 'ok', entries trimmed, 1 when idle expiry was set else 0 }
]]
--- @include "common"

local base = KEYS[1]
local keep_entries, keep_ms, idle = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local log_key, meta_key, active_key, pending_key = base .. 'log', base .. 'meta', base .. 'active', base .. 'pending'
local now = now_ms()
local active = redis.call('GET', active_key)

-- Lowest of `bound` and `seqs` (numbers or numeric strings).
local function lower(bound, seqs)
  for _, s in ipairs(seqs) do
    local n = tonumber(s)
    if n and n < bound then bound = n end
  end
  return bound
end

local function trim()
  local raw = redis.call('HGET', base .. 'state', ARGV[5])
  if not raw then return 0 end
  local ok, cp = pcall(cjson.decode, raw)
  if not ok or type(cp) ~= 'table' or cp.schema_version ~= 1 or cp.conversation_id ~= ARGV[4] then return 0 end
  local bound = tonumber(cp.covers_until)
  if not bound then return 0 end
  if active then
    bound = lower(bound, split_ids(redis.call('GET', base .. 'inputs:' .. active)))
    bound = lower(bound, split_ids(redis.call('HGET', base .. 'run:' .. active, 'urgent')))
    bound = lower(bound, redis.call('LRANGE', base .. 'steer:' .. active, 0, -1))
  end
  bound = lower(bound, redis.call('LRANGE', pending_key, 0, -1))

  local cut = 0
  if keep_entries > 0 then cut = tonumber(redis.call('HGET', meta_key, 'seq') or 0) - keep_entries + 1 end
  if keep_ms > 0 and cut < bound then
    -- The oldest entries first, at most 100 per call: later calls go on where this one stopped.
    local from = cut > 0 and (cut .. '-0') or '-'
    local page = redis.call('XRANGE', log_key, from, '(' .. bound .. '-0', 'COUNT', 100)
    for _, e in ipairs(page) do
      local okj, entry = pcall(cjson.decode, e[2][2])
      if not (okj and type(entry) == 'table' and tonumber(entry.at) and tonumber(entry.at) < now - keep_ms) then break end
      cut = tonumber(string.match(e[1], '^(%d+)')) + 1
    end
  end
  if cut > bound then cut = bound end
  if cut <= 1 then return 0 end
  return redis.call('XTRIM', log_key, 'MINID', cut .. '-0')
end

local trimmed = 0
if keep_entries > 0 or keep_ms > 0 then trimmed = trim() end

local expiring = 0
if idle > 0 and not active and redis.call('LLEN', pending_key) == 0 then
  local ms = idle * 1000
  local idle_keys = base .. 'idle_keys'
  local function expire(key)
    local t = redis.call('PTTL', key)
    if t == -1 or t > ms then redis.call('PEXPIRE', key, ms) end
    return t
  end
  for i = 6, #ARGV do
    -- A key that had no TTL of its own is named in `idle_keys`: a new run makes it persistent again.
    if ARGV[i] ~= 'idle_keys' and expire(base .. ARGV[i]) == -1 then redis.call('SADD', idle_keys, ARGV[i]) end
  end
  -- Ended runs' hashes kept for good (an ended-run TTL of 0) are restored by a new run like the other keys.
  for _, id in ipairs(redis.call('ZRANGE', base .. 'runs', 0, -1)) do
    if expire(base .. 'run:' .. id) == -1 then redis.call('SADD', idle_keys, 'run:' .. id) end
  end
  expire(idle_keys)
  expiring = 1
end
return { 'ok', trimmed, expiring }
