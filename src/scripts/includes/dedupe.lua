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

-- The start of every script that takes a platform update: dedupe it, append its
-- entry, remember the seq it became. Returns seq, nil for a new update and
-- nil, original seq for a duplicate (nothing is written then).
local function dedupe_append(dedupe_key, log_key, meta_key, json, ttl)
  local seen = dedupe_seen(dedupe_key)
  if seen then return nil, seen end
  local seq = append_entry(log_key, meta_key, json)
  dedupe_mark(dedupe_key, seq, ttl)
  return seq, nil
end
