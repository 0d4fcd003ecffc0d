--[[
  Approves a pairing code: the identity of the code's account (resolved now,
  so a link made meanwhile counts) joins the approved set, and the code is
  used up. The caller compared the code with the record in constant time.

  KEYS[1] codes     sorted set of waiting code hashes

  ARGV[1] base      people key prefix, ending in ':'
  ARGV[2] hash      SHA-256 (hex) of the code
  ARGV[3] account   the account the caller read from the code's record

  Returns { 'paired', identity id }
          { 'none' }  (the code expired or was used meanwhile)
]]
local base, hash, account = ARGV[1], ARGV[2], ARGV[3]
local code_key = base .. 'code:' .. hash
if redis.call('EXISTS', code_key) == 0 then return { 'none' } end
local id = redis.call('HGET', base .. 'links', account) or account
redis.call('SADD', base .. 'paired', id)
redis.call('DEL', code_key, base .. 'pending:' .. account, base .. 'notice:' .. account)
redis.call('ZREM', KEYS[1], hash)
return { 'paired', id }
