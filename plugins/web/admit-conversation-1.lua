--[[
  Admit one new web chat conversation for a client address, from the
  address's token bucket: a burst of `capacity`, refilled continuously at
  `capacity` an hour. A refusal takes nothing. A bucket is full again at most
  an hour after its last write, so its key expires then.

  KEYS[1] bucket    string `<tokens>:<ms of last refill>` of one client address

  ARGV[1] capacity  new conversations an hour (the bucket's size and hourly refill), > 0

  Returns { 'ok' }                  admitted: one token taken
          { 'limited', retry ms }   the bucket is empty; nothing written
]]
--- @include "common"
--- @include "dedupe"
--- @include "rate-limit"

local capacity, now = tonumber(ARGV[1]), now_ms()
local per_minute = capacity / 60
local level = bucket_level(redis.call('GET', KEYS[1]), capacity, per_minute, now)
if level < 1 then return { 'limited', math.ceil((1 - level) * 60000 / per_minute) } end
redis.call('SET', KEYS[1], (level - 1) .. ':' .. now, 'PX', 3600000)
return { 'ok' }
