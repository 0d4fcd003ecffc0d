--[[
  Update dedupe. Included with `--- @include "dedupe"` after "common".
  The dedupe key lives in the conversation's slot and holds the seq the update
  became, for `ttl` seconds.
]]
-- Returns the original seq when the update was seen before, else nil.
local function dedupe_seen(dedupe_key)
  local d = redis.call('GET', dedupe_key)
  if d then return tonumber(d) end
  return nil
end

local function dedupe_mark(dedupe_key, seq, ttl)
  redis.call('SET', dedupe_key, seq, 'EX', ttl)
end

-- A purged conversation keeps a tombstone `<base>tombstone` {mode, seq} for a
-- while (purge-1.lua). Returns its mode ('refuse' | 'restart'; false when none
-- stands) and the purged record's last seq.
local function tombstone_of(meta_key)
  local t = redis.call('HMGET', string.sub(meta_key, 1, -5) .. 'tombstone', 'mode', 'seq')
  return t[1], tonumber(t[2]) or 0
end

-- Lifts a `restart` tombstone: the seq counter continues after the purged record's last seq
-- (seqs are never reused), and the reply stream, which was to expire with the tombstone
-- (reply-store-3.lua), is kept again.
local function lift_tombstone(meta_key, last_seq)
  local base = string.sub(meta_key, 1, -5)
  redis.call('HSETNX', meta_key, 'seq', last_seq)
  redis.call('DEL', base .. 'tombstone')
  redis.call('PERSIST', base .. 'replies')
end

-- For an update the dedupe check found new: under a `refuse` tombstone it is
-- refused, its dedupe key set to 0 (a redelivery is a duplicate) and nothing
-- else written, and this returns true; a `restart` tombstone is lifted.
local function purge_refuses(meta_key, dedupe_key, ttl)
  local mode, last_seq = tombstone_of(meta_key)
  if not mode then return false end
  if mode == 'restart' then
    lift_tombstone(meta_key, last_seq)
    return false
  end
  dedupe_mark(dedupe_key, 0, ttl)
  return true
end

-- Checks and marks a platform update as seen in one `SET … NX GET` (Redis 7.0), honouring a
-- purge's tombstone. Reads meta once: `seq` and any `fields` asked for. A purge deletes meta and
-- leaves the tombstone, and every script that appends honours it first (common.lua), so the
-- tombstone is read only when meta holds no seq. Returns the seq the update's entry is to become
-- (the next append's) and the meta values read (`seq` first, then `fields`); or nil and the reply
-- of an update taken no further: { 'duplicate', original seq } for one seen before (it lifts no
-- tombstone), { 'purged' } for one a `refuse` tombstone refuses (its key marked 0). A `restart`
-- tombstone is lifted. The caller appends next: the update is marked before its entry exists, and
-- `claimed` names its key until the caller clears it after the append; a script that catches an
-- update's failure (ingest-2n.lua) deletes that key, so a redelivery is a new message, not a
-- duplicate of an entry never appended.
local claimed = nil

local function dedupe_claim(meta_key, dedupe_key, ttl, ...)
  local meta = redis.call('HMGET', meta_key, 'seq', ...)
  local mode, last_seq = false, 0
  if not meta[1] then mode, last_seq = tombstone_of(meta_key) end
  local refused = mode and mode ~= 'restart'
  local seq = (mode == 'restart' and last_seq or tonumber(meta[1]) or 0) + 1
  local seen = redis.call('SET', dedupe_key, refused and 0 or seq, 'NX', 'GET', 'EX', ttl)
  if seen then return nil, { 'duplicate', tonumber(seen) } end
  if refused then return nil, { 'purged' } end
  claimed = dedupe_key
  if mode == 'restart' then lift_tombstone(meta_key, last_seq) end
  return seq, meta
end

-- The start of every script that takes a platform update: dedupe it (`dedupe_claim`), append its
-- entry. Returns the seq of a new update, or nil and the reply a script gives an update it takes
-- no further, with nothing else written.
local function dedupe_append(dedupe_key, log_key, meta_key, json, ttl)
  local seq, refused = dedupe_claim(meta_key, dedupe_key, ttl)
  if not seq then return nil, refused end
  append_entry(log_key, meta_key, json)
  return seq
end
