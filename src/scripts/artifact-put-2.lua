--[[
  Store one large tool result (an artifact) on behalf of a run. Fenced, so a
  run that was purged or lost cannot bring the conversation's key back.

  KEYS[1] run        run record hash
  KEYS[2] artifacts  the conversation's artifact hash

  ARGV[1] token      fencing token
  ARGV[2] id         artifact id (validated by the caller)
  ARGV[3] text       the artifact's content
  ARGV[4] ttl        seconds the artifacts live after the last write

  Returns { 'ok' }
  Errors  { -1 }, { -2 }, { -3, current token }
]]
--- @include "common"

local _, err = fenced_run(KEYS[1], ARGV[1])
if err then return err end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return { 'ok' }
