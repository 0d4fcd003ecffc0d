--[[
  Keeps an event's reply token unless the key already holds a newer event's,
  or this same token (kept or used): a captured delivery replayed within the
  token's minute must not put its used token back in place of a newer one.

  KEYS[1] token     string: `<event time, ms>:<token>`, or `<time>:!<token>` once used

  ARGV[1] at        the event's time, ms
  ARGV[2] token     its reply token
  ARGV[3] ttl       seconds

  Returns { kept }: 1 when the token was stored, else 0
]]
local current = redis.call('GET', KEYS[1])
if current then
  local at, token = string.match(current, '^(%d+):!?(.*)$')
  local newAt = tonumber(ARGV[1])
  if at and (tonumber(at) > newAt or (tonumber(at) == newAt and token == ARGV[2])) then return { 0 } end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'EX', ARGV[3])
return { 1 }
