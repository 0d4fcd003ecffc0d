--[[
  Revokes a `/link` code (it was posted in a group, where others saw it).

  KEYS[1] links     people links hash (only names the `{people}` slot)

  ARGV[1] base      people key prefix, ending in ':' (`<base>link_code:<hash>`, `<base>link_pending:<account>`)
  ARGV[2] hash      SHA-256 (hex) of the code as posted

  Returns { 'revoked' }
          { 'none' }  (no such code, or it expired or was used)
]]
local _ = KEYS[1]
local base, hash = ARGV[1], ARGV[2]
local code_key = base .. 'link_code:' .. hash
local maker = redis.call('GET', code_key)
if not maker then return { 'none' } end
redis.call('DEL', code_key)
local pending_key = base .. 'link_pending:' .. maker
if redis.call('GET', pending_key) == hash then redis.call('DEL', pending_key) end
return { 'revoked' }
