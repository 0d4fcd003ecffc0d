--[[
  Claim one outbound message's delivery key before sending it, in one step:
  a message an earlier attempt got acknowledged is reported, not claimed; any
  other is recorded with the given status (`possibly-dispatched` right before
  the send, `not-dispatched` when there is no channel to send through).
  Fenced when a token is given, so an attempt that lost its run cannot send.

  KEYS[1] outbox   conversation outbox hash (field = delivery key, value = JSON record)
  KEYS[2] run      run record hash (for the fencing check)
  KEYS[3] index    the outbox's claim times (sorted set, member = delivery key, score = ms)

  ARGV[1] delivery key
  ARGV[2] token     fencing token, or '' for an unfenced claim
  ARGV[3] record    JSON to store when claiming
  ARGV[4] ttl       seconds the outbox lives after this write (renewed on every claim); a
                    delivery key first claimed longer ago than this is pruned (its run is long
                    over), so a conversation that is never idle that long does not grow forever.

  Returns { 'claimed', earlier record JSON or '' }
          { 'delivered', current record JSON }   acknowledged by an earlier attempt; nothing written
  Errors  { -1 }, { -2 }, { -3, current token } (fenced claims only)
]]
--- @include "common"

if ARGV[2] ~= '' then
  local _, err = fenced_run(KEYS[2], ARGV[2])
  if err then return err end
end
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and cjson.decode(current).status == 'acknowledged' then return { 'delivered', current } end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
if not current then
  local index, now = KEYS[3], now_ms()
  redis.call('ZADD', index, now, ARGV[1])
  -- At most 100 per claim: the work stays bounded, and claims outnumber what ages out.
  local old = redis.call('ZRANGEBYSCORE', index, '-inf', now - tonumber(ARGV[4]) * 1000, 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('HDEL', KEYS[1], unpack(old))
    redis.call('ZREM', index, unpack(old))
  end
  redis.call('EXPIRE', index, ARGV[4])
end
return { 'claimed', current or '' }
