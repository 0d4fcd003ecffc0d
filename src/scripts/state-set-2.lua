--[[
  Set or delete one conversation-scoped state value on behalf of a run.
  Fenced; optional compare-and-set on the current value.

  KEYS[1] run      run record hash
  KEYS[2] state    conversation state hash

  ARGV[1] token     fencing token
  ARGV[2] field     state key (validated by the caller: namespaced, bounded)
  ARGV[3] op        'set' | 'del'
  ARGV[4] value     JSON text (op 'set')
  ARGV[5] expect    'any' | 'absent' | 'equals'
  ARGV[6] expected  the current value required by 'equals'
  ARGV[7] max bytes size cap of the value

  Returns { 'ok' }
  Errors  { -1 }, { -2 }, { -3, current token }, { -6, current value or '' } CAS conflict,
          { -7, max bytes } value too large, { -5 } bad op
]]
--- @include "common"

local _, err = fenced_run(KEYS[1], ARGV[1])
if err then return err end
if ARGV[3] ~= 'set' and ARGV[3] ~= 'del' then return { ERR_BAD_ARG } end
if ARGV[3] == 'set' and #ARGV[4] > tonumber(ARGV[7]) then return { ERR_TOO_LARGE, tonumber(ARGV[7]) } end
local conflict = state_expect(KEYS[2], ARGV[2], ARGV[5], ARGV[6])
if conflict then return conflict end
if ARGV[3] == 'del' then redis.call('HDEL', KEYS[2], ARGV[2]) else redis.call('HSET', KEYS[2], ARGV[2], ARGV[4]) end
return { 'ok' }
