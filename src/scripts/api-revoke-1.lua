--[[
  Revoke an API token: its digest joins the revoked set, which every host
  checks on every request of the token (api-admit-2.lua). Kept without a
  TTL: a revoked token stays refused until it is removed from the config.

  KEYS[1] revoked  set of hex SHA-256 digests of revoked tokens

  ARGV[1] digest   hex SHA-256 of the token

  Returns { 'revoked' } | { 'already' }
]]
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then return { 'revoked' } end
return { 'already' }
