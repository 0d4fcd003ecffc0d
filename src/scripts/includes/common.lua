--[[
  Helpers shared by every script: the Redis clock, record appends, run fencing
  and id lists. Included with `--- @include "common"`.

  Error convention: a script returns a table whose first element is a
  negative integer on refusal (see src/scripts/results.ts), or a status
  string on success.
]]
local ERR_NOT_FOUND = -1
local ERR_ENDED = -2
local ERR_STALE = -3
local ERR_LEASE_HELD = -4
local ERR_BAD_ARG = -5
local ERR_CONFLICT = -6
local ERR_TOO_LARGE = -7
local ERR_SCRIPT = -8

-- Milliseconds since the epoch on the Redis clock (one clock for every process).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Appends one JSON entry to the conversation record; returns its seq.
-- A script that appends for a platform update or a command must honour a purge's tombstone first
-- (`purge_refuses`, includes/dedupe.lua); the others are fenced by keys purge deletes (a run hash,
-- approvals). ingest-2n.lua relies on it: a meta holding a seq means no tombstone stands.
local function append_entry(log_key, meta_key, json)
  local seq = redis.call('HINCRBY', meta_key, 'seq', 1)
  redis.call('XADD', log_key, seq .. '-0', 'e', json)
  return seq
end

-- Clears the /compact request (meta `compact_requested` holds its seq) if it
-- is at or before `upto`, the request the run read before compacting (or
-- finding nothing to compact); a newer one stays. Returns whether it cleared.
local function clear_compact_request(meta_key, upto)
  local requested = tonumber(redis.call('HGET', meta_key, 'compact_requested') or 0)
  if requested > 0 and requested <= tonumber(upto) then
    redis.call('HDEL', meta_key, 'compact_requested')
    return true
  end
  return false
end

-- Compare-and-set precondition on one conversation state field: nil when
-- `expect` ('any' | 'absent' | 'equals') holds, else the conflict error.
local function state_expect(state_key, field, expect, expected)
  if expect == 'any' then return nil end
  local cur = redis.call('HGET', state_key, field)
  if expect == 'absent' and cur then return { ERR_CONFLICT, cur } end
  if expect == 'equals' and cur ~= expected then return { ERR_CONFLICT, cur or '' } end
  return nil
end

-- Appends an audit entry built from a Lua table; `seqs` must not be empty.
local function append_audit(log_key, meta_key, kind, run_id, seqs, extra)
  local entry = { v = 1, kind = kind, at = now_ms(), run = run_id, seqs = seqs }
  if extra then for k, v in pairs(extra) do entry[k] = v end end
  return append_entry(log_key, meta_key, cjson.encode(entry))
end

-- A comma-separated id list (false / '' when empty) with `id` added at the end.
local function append_id(csv, id)
  if csv and csv ~= '' then return csv .. ',' .. id end
  return tostring(id)
end

-- Comma-separated id lists (run inputs, urgent seqs) <-> Lua arrays of numbers.
local function split_ids(csv)
  local out = {}
  if csv and csv ~= '' then
    for s in string.gmatch(csv, '[^,]+') do out[#out + 1] = tonumber(s) end
  end
  return out
end

local function join_ids(ids)
  return table.concat(ids, ',')
end

-- Loads a run's fencing fields (and any further fields named, in the same read) and checks the
-- caller's token. Returns { state, token, ... } or nil, err_table on refusal.
local function fenced_run(run_key, token, ...)
  local f = redis.call('HMGET', run_key, 'state', 'token', ...)
  if not f[1] then return nil, { ERR_NOT_FOUND } end
  if tostring(f[2]) ~= tostring(token) then return nil, { ERR_STALE, tonumber(f[2]) or 0 } end
  if f[1] == 'ended' then return nil, { ERR_ENDED } end
  if f[1] ~= 'running' then return nil, { ERR_STALE, tonumber(f[2]) or 0 } end
  return f, nil
end

-- Creates a queued run record with the given input seqs and makes it active.
-- The inputs live in `<base>inputs:<run id>`, a comma-separated string that
-- messages joining the queued run APPEND to (constant work per join).
local function create_run(base, active_key, run_id, conversation_id, inputs, cause, at)
  local run_key = base .. 'run:' .. run_id
  redis.call('HSET', run_key,
    'id', run_id, 'conversation', conversation_id, 'state', 'queued',
    'token', 0, 'attempt', 0, 'created_at', at, 'cause', cause)
  if #inputs > 0 then redis.call('SET', base .. 'inputs:' .. run_id, join_ids(inputs)) end
  redis.call('SET', active_key, run_id)
  -- The conversation's run index (what purge deletes); `+inf` until the run ends and its keys get a TTL.
  redis.call('ZADD', base .. 'runs', 'inf', run_id)
  -- An idle conversation may have been set to expire (retain-1.lua); a live one never expires under a run.
  -- `idle_keys` names the keys that were persistent before (plugins' declared keys among them).
  if redis.call('PTTL', base .. 'meta') >= 0 then
    for _, suffix in ipairs(redis.call('SMEMBERS', base .. 'idle_keys')) do
      redis.call('PERSIST', base .. suffix)
    end
    redis.call('DEL', base .. 'idle_keys')
  end
  return run_key
end

-- An ended run's keys expire after `ttl` seconds (0: kept), and its index entry
-- with them; index entries of runs already expired are pruned. Ended runs
-- beyond the newest `keep` (0: no bound) go now, their hashes with them: a
-- conversation that never goes quiet would otherwise hold every run of the
-- last `ttl`. The live run is never counted (its score is `+inf`). `now` in ms.
-- The index is kept by one command after the `ZADD` when the bound is small
-- (`prune_run_index`), by two otherwise.
local RUN_INDEX_READ_MAX = 100

-- Drops the ended runs in `over` (their hashes with them) and the expired entries in `gone` from the index.
local function drop_from_run_index(base, index, gone, over)
  if #over > 0 then
    local keys = {}
    for i, id in ipairs(over) do keys[i] = base .. 'run:' .. id; gone[#gone + 1] = id end
    redis.call('DEL', unpack(keys))
  end
  if #gone > 0 then redis.call('ZREM', index, unpack(gone)) end
end

-- One read of the oldest ended runs (expired ones come first: the score is the expiry) finds both
-- the expired entries and those beyond the newest `keep`, at most 100 of the latter per run end:
-- the work stays bounded, and each end adds one. Expired entries past the read go at a later end.
local function prune_run_index(base, index, now, keep)
  local rows = redis.call('ZRANGEBYSCORE', index, '-inf', '(+inf', 'WITHSCORES', 'LIMIT', 0, keep + 100)
  local gone, over = {}, {}
  local n = #rows / 2
  while #gone < n and tonumber(rows[2 * #gone + 2]) <= now do gone[#gone + 1] = rows[2 * #gone + 1] end
  local expired = #gone
  for i = expired + 1, expired + math.min(n - expired - keep, 100) do over[#over + 1] = rows[2 * i - 1] end
  drop_from_run_index(base, index, gone, over)
end

local function expire_ended_run(base, run_key, run_id, ttl, now, keep)
  ttl = tonumber(ttl) or 0
  if ttl <= 0 then return end
  redis.call('EXPIRE', run_key, ttl)
  local index = base .. 'runs'
  redis.call('ZADD', index, now + ttl * 1000, run_id)
  keep = tonumber(keep) or 0
  if keep > 0 and keep <= RUN_INDEX_READ_MAX then return prune_run_index(base, index, now, keep) end
  redis.call('ZREMRANGEBYSCORE', index, '-inf', now)
  if keep <= 0 then return end
  local over = redis.call('ZCOUNT', index, '-inf', '(+inf') - keep
  if over <= 0 then return end
  drop_from_run_index(base, index, {}, redis.call('ZRANGEBYSCORE', index, '-inf', '(+inf', 'LIMIT', 0, math.min(over, 100)))
end

-- Reads entries of the given seqs; returns a flat list seq, json, seq, json...
local function read_entries(log_key, seqs, out)
  for i = 1, #seqs do
    local id = seqs[i] .. '-0'
    local r = redis.call('XRANGE', log_key, id, id)
    out[#out + 1] = seqs[i]
    if r[1] then out[#out + 1] = r[1][2][2] else out[#out + 1] = '' end
  end
  return out
end

-- Pops steering seqs of a run: all of them, or only the first.
local function pop_steering(steer_key, mode)
  local seqs = {}
  if mode == 'one' then
    local s = redis.call('LPOP', steer_key)
    if s then seqs[1] = tonumber(s) end
  else
    local all = redis.call('LRANGE', steer_key, 0, -1)
    if #all > 0 then
      redis.call('DEL', steer_key)
      for i = 1, #all do seqs[i] = tonumber(all[i]) end
    end
  end
  return seqs
end
