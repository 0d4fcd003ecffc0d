--[[
  Takes the conversation's reply token once (it is single-use): returns the
  stored `<time>:<token>` and marks it used (`<time>:!<token>`, its expiry
  kept), so that a replay of its event cannot store it again.

  KEYS[1] token     string: `<event time, ms>:<token>`, or `<time>:!<token>` once used

  Returns { value }: the unused token's `<time>:<token>`, or { false } when none
]]
local current = redis.call('GET', KEYS[1])
if not current then return { false } end
local at, token = string.match(current, '^(%d+):(.*)$')
if not at or string.sub(token, 1, 1) == '!' then return { false } end
redis.call('SET', KEYS[1], at .. ':!' .. token, 'KEEPTTL')
return { current }
