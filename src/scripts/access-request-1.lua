--[[
  An unknown user's direct message on a pairing channel: gives the account a
  pairing code, or reminds it of the one it has, at most once per notice
  window. Codes are stored under the SHA-256 of the code, with the code's
  record; the index of waiting codes is bounded.

  KEYS[1] codes     sorted set: code hash -> expiry (ms) of every waiting code

  ARGV[1] base      people key prefix, ending in ':' (`<base>code:<hash>`, `<base>pending:<account>`, `<base>notice:<account>`)
  ARGV[2] account   `<channel>:<user id>`
  ARGV[3] code      a fresh code, used when the account has none
  ARGV[4] hash      SHA-256 (hex) of the fresh code
  ARGV[5] record    JSON of the code's record (account, conversation, sender name, the code)
  ARGV[6] ttl       code lifetime, ms
  ARGV[7] window    notice window, seconds
  ARGV[8] max       most codes waiting at once

  Returns { 'code', code }     a new code: send it
          { 'pending', code }  the account's waiting code: remind it
          { 'full' }           too many codes wait: say so
          { 'quiet' }          answered within the window already: send nothing
]]
local base, account = ARGV[1], ARGV[2]
local notice = base .. 'notice:' .. account
local pending_key = base .. 'pending:' .. account
local function first_notice()
  return redis.call('SET', notice, '1', 'EX', ARGV[7], 'NX')
end

local pending = redis.call('GET', pending_key)
if pending then
  if first_notice() then return { 'pending', pending } end
  return { 'quiet' }
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[8]) then
  if first_notice() then return { 'full' } end
  return { 'quiet' }
end
redis.call('SET', base .. 'code:' .. ARGV[4], ARGV[5], 'PX', ARGV[6])
redis.call('SET', pending_key, ARGV[3], 'PX', ARGV[6])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[6]), ARGV[4])
redis.call('SET', notice, '1', 'EX', ARGV[7])
return { 'code', ARGV[3] }
