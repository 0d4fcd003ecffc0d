--[[
  An unknown user's direct message on a pairing channel: gives the account a
  pairing code, or tells it its code is still waiting, at most once per
  notice window. Only the code's SHA-256 is stored (the code's record under
  it, and the account's waiting hash), so the code itself is never kept:
  the reminder cannot repeat it. The index of waiting codes is bounded.

  KEYS[1] codes     sorted set: code hash -> expiry (ms) of every waiting code

  ARGV[1] base      people key prefix, ending in ':' (`<base>code:<hash>`, `<base>pending:<account>`, `<base>notice:<account>`)
  ARGV[2] account   `<channel>:<user id>`
  ARGV[3] hash      SHA-256 (hex) of a fresh code, used when the account has none
  ARGV[4] record    JSON of the code's record (account, channel, conversation, sender name; no code)
  ARGV[5] ttl       code lifetime, ms
  ARGV[6] window    notice window, seconds
  ARGV[7] max       most codes waiting at once

  Returns { 'code' }            the fresh code is the account's: send it
          { 'pending', ms }     the account's code still waits, for ms more: say so
          { 'full' }            too many codes wait: say so
          { 'quiet' }           answered within the window already: send nothing
]]
local base, account = ARGV[1], ARGV[2]
local notice = base .. 'notice:' .. account
local pending_key = base .. 'pending:' .. account
local function first_notice()
  return redis.call('SET', notice, '1', 'EX', ARGV[6], 'NX')
end

local left = redis.call('PTTL', pending_key)
if left > 0 then
  if first_notice() then return { 'pending', left } end
  return { 'quiet' }
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[7]) then
  if first_notice() then return { 'full' } end
  return { 'quiet' }
end
redis.call('SET', base .. 'code:' .. ARGV[3], ARGV[4], 'PX', ARGV[5])
redis.call('SET', pending_key, ARGV[3], 'PX', ARGV[5])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[5]), ARGV[3])
redis.call('SET', notice, '1', 'EX', ARGV[6])
return { 'code' }
