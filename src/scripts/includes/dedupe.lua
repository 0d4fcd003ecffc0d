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

-- The start of every script that takes a platform update: dedupe it, append its
-- entry, remember the seq it became. Returns the seq of a new update, or nil and
-- the reply a script gives an update it takes no further, with nothing else
-- written: { 'duplicate', original seq } for one seen before, { 'purged' } for
-- one refused because the conversation was purged (see `purge_refuses`).
local function dedupe_append(dedupe_key, log_key, meta_key, json, ttl)
  local seen = dedupe_seen(dedupe_key)
  if seen then return nil, { 'duplicate', seen } end
  if purge_refuses(meta_key, dedupe_key, ttl) then return nil, { 'purged' } end
  local seq = append_entry(log_key, meta_key, json)
  dedupe_mark(dedupe_key, seq, ttl)
  return seq
end
