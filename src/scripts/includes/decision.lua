--[[
  A person's decision a run waits for (a tool approval, a question's answer),
  kept in the conversation's approvals hash. Included with
  `--- @include "decision"` after "common": the click's update is remembered
  in the same step as the decision, and only the request's deciders count.
]]

-- True when the command's update (`key`) was seen before; else remembers it for `ttl` seconds (0: no update, the
-- runner's own decision). Every answer but `duplicate` is the command's: the update is remembered with it.
local function decision_seen(key, ttl)
  if ttl <= 0 then return false end
  if redis.call('EXISTS', key) == 1 then return true end
  redis.call('SET', key, '0', 'EX', ttl)
  return false
end

-- Whether `by` is among the request's `deciders`.
local function is_decider(req, by)
  for _, id in ipairs(req.deciders or {}) do
    if id == by then return true end
  end
  return false
end
