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
