--[[
  Gives an account a fresh `/link` code, replacing the one it had (one code
  per account at a time). Only the code's SHA-256 is stored.

  KEYS[1] links     people links hash (only names the `{people}` slot)

  ARGV[1] base      people key prefix, ending in ':' (`<base>link_code:<hash>` -> account,
                    `<base>link_pending:<account>` -> hash of its code)
  ARGV[2] account   the asking account, `<channel>:<user id>`
  ARGV[3] hash      SHA-256 (hex) of the fresh code
  ARGV[4] ttl       code lifetime, ms
  ARGV[5] standing  '1' when the asking account has access it was given (admin,
                    listed, approved): `<base>link_standing:<hash>`

  Returns { 'ok' }
]]
local _ = KEYS[1]
local base, account, hash, ttl, standing = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local pending_key = base .. 'link_pending:' .. account
local old = redis.call('GET', pending_key)
if old then redis.call('DEL', base .. 'link_code:' .. old, base .. 'link_standing:' .. old) end
redis.call('SET', base .. 'link_code:' .. hash, account, 'PX', ttl)
if standing == '1' then redis.call('SET', base .. 'link_standing:' .. hash, '1', 'PX', ttl) end
redis.call('SET', pending_key, hash, 'PX', ttl)
return { 'ok' }
