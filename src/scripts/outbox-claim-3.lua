--[[
  Claim one outbound message's delivery key before sending it, in one step:
  a message an earlier attempt got acknowledged is reported, not claimed; any
  other is recorded with the given status (`possibly-dispatched` right before
  the send, `not-dispatched` when there is no channel to send through).
  Fenced when a token is given, so an attempt that lost its run cannot send.

  KEYS[1] outbox   conversation outbox hash (field = delivery key, value = JSON record)
  KEYS[2] run      run record hash (for the fencing check)
  KEYS[3] index    the outbox's claim times (sorted set, member = delivery key, score = ms)

  ARGV[1] delivery key
  ARGV[2] token     fencing token, or '' for an unfenced claim
  ARGV[3] record    JSON to store when claiming
  ARGV[4] ttl       seconds the outbox lives after this write (renewed on every claim); a
                    delivery key first claimed longer ago than this is pruned (its run is long
                    over), so a conversation that is never idle that long does not grow forever.
  ARGV[5] keep      most delivery records kept by count (0 or absent: no count bound): beyond the
                    newest this many, acknowledged records go (at most 100 per claim, from the
                    oldest 200, past the records that must stay). Records not
                    acknowledged stay (a retry must still find them), and so do those of the
                    claiming run and of the active run (`<run id>:` keys; an attempt taking the
                    run over skips what they acknowledged).

  Returns { 'claimed', earlier record JSON or '', first claim ms or '' }
                                         when the key was first claimed (its index score; '' once
                                         pruned): an earlier attempt sent under it after that, if at all
          { 'delivered', current record JSON }   acknowledged by an earlier attempt; nothing written
  Errors  { -1 }, { -2 }, { -3, current token } (fenced claims only)
]]
--- @include "common"

-- Records of the runs whose keys start with one of `runs` (run id followed by `:`) are kept.
local function live_run_key(key, runs)
  for _, id in ipairs(runs) do
    if string.sub(key, 1, #id + 1) == id .. ':' then return true end
  end
  return false
end

-- Drops records from the outbox and its index, and the webhook's per-reply marks named by them
-- (purge finds those through the outbox: a mark left behind would outlive a purge).
local function forget(outbox, index, keys)
  local base = string.sub(outbox, 1, -7)
  local marks = {}
  for i, key in ipairs(keys) do marks[i] = base .. 'reply_stored:' .. key end
  redis.call('HDEL', outbox, unpack(keys))
  redis.call('ZREM', index, unpack(keys))
  redis.call('DEL', unpack(marks))
end

-- Drops acknowledged records among `candidates` (the oldest beyond the newest `keep`, by first claim),
-- at most `want` of them.
local function prune_by_count(outbox, index, candidates, want)
  if want <= 0 then return end
  local base = string.sub(outbox, 1, -7)
  local runs = { string.match(KEYS[2], 'run:([^:]+)$') }
  local active = redis.call('GET', base .. 'active')
  if active then runs[#runs + 1] = active end
  -- Records that must stay (not acknowledged, or a live run's) are passed over, not counted: up to 200 of
  -- the oldest are looked at, so a few stuck records at the front do not stop the bound.
  local drop = {}
  for _, key in ipairs(candidates) do
    if #drop >= want then break end
    if not live_run_key(key, runs) then
      local raw = redis.call('HGET', outbox, key)
      local ok, rec = pcall(cjson.decode, raw or '')
      if not raw or (ok and type(rec) == 'table' and rec.status == 'acknowledged') then drop[#drop + 1] = key end
    end
  end
  if #drop > 0 then forget(outbox, index, drop) end
end

-- Prunes the index after a first claim at `now`: delivery keys first claimed more than `ttl` s ago
-- (at most 100 per claim: the work stays bounded, and claims outnumber what ages out), then
-- acknowledged records beyond the newest `keep`. One read of the oldest entries with their
-- scores finds both (aged ones come first); an index too long for the read is counted apart. The
-- read covers the 100 aged and the 200 looked at beyond them.
local function prune(outbox, index, now, ttl, keep)
  local span = keep > 0 and 300 or 100
  local rows = redis.call('ZRANGE', index, 0, span - 1, 'WITHSCORES')
  local n, aged, cutoff = #rows / 2, {}, now - ttl * 1000
  while #aged < math.min(n, 100) and tonumber(rows[2 * #aged + 2]) <= cutoff do aged[#aged + 1] = rows[2 * #aged + 1] end
  if #aged > 0 then forget(outbox, index, aged) end
  if keep <= 0 then return end
  local total = n < span and n or redis.call('ZCARD', index) + #aged
  local over = total - #aged - keep
  if over <= 0 then return end
  local candidates = {}
  for i = #aged + 1, #aged + math.min(over, 200) do candidates[#candidates + 1] = rows[2 * i - 1] end
  prune_by_count(outbox, index, candidates, math.min(over, 100))
end

if ARGV[2] ~= '' then
  local _, err = fenced_run(KEYS[2], ARGV[2])
  if err then return err end
end
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and cjson.decode(current).status == 'acknowledged' then return { 'delivered', current } end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
if not current then
  local index, now = KEYS[3], now_ms()
  redis.call('ZADD', index, now, ARGV[1])
  prune(KEYS[1], index, now, tonumber(ARGV[4]), tonumber(ARGV[5]) or 0)
  redis.call('EXPIRE', index, ARGV[4])
  return { 'claimed', '', tostring(now) }
end
return { 'claimed', current, redis.call('ZSCORE', KEYS[3], ARGV[1]) or '' }
