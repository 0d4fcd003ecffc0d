--[[
  Admit one request of the send-and-wake API for a token, in one step: a
  revoked token is refused, then the token's bucket (a token bucket holding a
  minute's worth of requests, refilled continuously) gives one request or
  says how long until it can. A refusal takes nothing. Every bucket of the
  hash is full again a minute after its last write, so the hash expires then.

  KEYS[1] revoked  set of hex SHA-256 digests of revoked tokens (`steerbot revoke-token`)
  KEYS[2] rate     hash of the tokens' buckets (field = token name, value `<tokens>:<ms of last refill>`)

  ARGV[1] digest   hex SHA-256 of the presented token
  ARGV[2] name     the token's name (its bucket)
  ARGV[3] rate     requests per minute (the bucket's capacity and refill)

  Returns { 'ok' }                  admitted: one request taken from the bucket
          { 'revoked' }             the token is revoked; nothing written
          { 'limited', retry ms }   the bucket is empty; nothing written
]]
--- @include "common"
--- @include "dedupe"
--- @include "rate-limit"

if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return { 'revoked' } end
local rate, now = tonumber(ARGV[3]), now_ms()
local level = bucket_level(redis.call('HGET', KEYS[2], ARGV[2]), rate, rate, now)
if level < 1 then return { 'limited', math.ceil((1 - level) * 60000 / rate) } end
redis.call('HSET', KEYS[2], ARGV[2], (level - 1) .. ':' .. now)
redis.call('PEXPIRE', KEYS[2], 60000)
return { 'ok' }
