--[[
  Links an account into the identity of another (the operator's link: the
  console, `IdentityStore.link`): every account of the joining account's
  identity moves to the target's identity. An approval (the `paired` set)
  moves with the identity. See includes/identity-merge.lua.

  KEYS[1] links     people links hash (account -> identity id)

  ARGV[1] base      people key prefix, ending in ':' (members sets are `<base>members:<identity>`,
                    approved identities the set `<base>paired`)
  ARGV[2] account   the joining account, `<channel>:<user id>`
  ARGV[3] target    the account whose identity it joins

  Returns { 'linked', identity id, the joining account's former identity id }
          { 'same', identity id }  (already one identity)
]]
--- @include "identity-merge"
return merge_identity(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
