--[[
  Approves a pairing code: the identity of the code's account (resolved now,
  so a link made meanwhile counts) joins the approved set, and the code is
  used up, in one step. Codes are found by their SHA-256 only.

  KEYS[1] codes     sorted set of waiting code hashes

  ARGV[1] base      people key prefix, ending in ':'
  ARGV[2] hash      SHA-256 (hex) of the code as typed
  ARGV[3] channel   the approver's channel: a code given on another channel is
                    left as it is; '' approves on any channel (console, CLI)

  Returns { 'paired', identity id, the code's record (JSON) }
          { 'elsewhere', the code's channel }  (given on another channel; the code stays valid)
          { 'none' }  (no such code, or it expired or was used)
]]
local base, hash, channel = ARGV[1], ARGV[2], ARGV[3]
local code_key = base .. 'code:' .. hash
local raw = redis.call('GET', code_key)
if not raw then return { 'none' } end
local ok, record = pcall(cjson.decode, raw)
if not ok or type(record) ~= 'table' or type(record.account) ~= 'string' then return { 'none' } end
if channel ~= '' and record.channel ~= channel then return { 'elsewhere', tostring(record.channel) } end
local account = record.account
local id = redis.call('HGET', base .. 'links', account) or account
redis.call('SADD', base .. 'paired', id)
redis.call('DEL', code_key, base .. 'pending:' .. account, base .. 'notice:' .. account)
redis.call('ZREM', KEYS[1], hash)
return { 'paired', id, raw }
