--[[
  Confirms a `/link` code in one step: checks it, uses it up and links, so
  two accounts sending one code at once cannot both link. The account that
  sends the code joins the identity of the account that was given it. Only
  the code's SHA-256 is stored: `<base>link_code:<hash>` holds the account
  that asked for it.

  Access passes only from the account that made the code: when the sender
  has access it was given (approved, or listed or an admin on its channel)
  and the code maker had none (its identity is not approved, and it was not
  listed when it asked), nothing is linked (the code is used up all the
  same), so nobody can hand a person with access a code of their own to
  gain that access, or that person's notes and budget.

  KEYS[1] links     people links hash (account -> identity id)

  ARGV[1] base      people key prefix, ending in ':' (`<base>link_code:<hash>`,
                    `<base>link_pending:<account>`, `<base>members:<identity>`, `<base>paired`)
  ARGV[2] hash      SHA-256 (hex) of the code as sent
  ARGV[3] account   the sending account, `<channel>:<user id>`
  ARGV[4] standing  '1' when the sending account is listed or an admin on its channel

  Returns { 'linked', identity id, the sender's former identity id, maker account }
          { 'same', identity id, maker account }  (already one identity; the code is used up)
          { 'refused', maker account }            (the sender is approved, the maker is not; the code is used up)
          { 'own' }                               (the maker sent its own code; it stays valid)
          { 'none' }                              (no such code, or it expired or was used)
]]
--- @include "identity-merge"
local links, base, hash, account, standing = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local code_key = base .. 'link_code:' .. hash
local maker = redis.call('GET', code_key)
if not maker then return { 'none' } end
if maker == account then return { 'own' } end

local maker_listed = redis.call('GET', base .. 'link_standing:' .. hash) == '1'
redis.call('DEL', code_key, base .. 'link_standing:' .. hash)
local pending_key = base .. 'link_pending:' .. maker
if redis.call('GET', pending_key) == hash then redis.call('DEL', pending_key) end

local paired = base .. 'paired'
local into = redis.call('HGET', links, maker) or maker
local from = redis.call('HGET', links, account) or account
local sender_has = standing == '1' or redis.call('SISMEMBER', paired, from) == 1
local maker_has = maker_listed or redis.call('SISMEMBER', paired, into) == 1
if from ~= into and sender_has and not maker_has then
  return { 'refused', maker }
end
local r = merge_identity(links, base, account, maker)
if r[1] == 'same' then return { 'same', r[2], maker } end
return { 'linked', r[2], r[3], maker }
