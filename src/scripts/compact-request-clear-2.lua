--[[
  A /compact that found nothing to compact (the conversation has no whole turn
  older than the ones kept verbatim) is done: clear the request, fenced, so it
  is not reported as pending and not retried at every run start. A /compact
  that arrived after the one the run read stays.

  KEYS[1] run      run record hash
  KEYS[2] meta     conversation meta (`compact_requested` holds the request's seq)

  ARGV[1] token    fencing token
  ARGV[2] seen     seq of the /compact request the run read

  Returns { 'ok', 1 } cleared, { 'ok', 0 } nothing to clear (none, or a newer one)
  Errors  { -1 }, { -2 }, { -3, current token }
]]
--- @include "common"

local _, err = fenced_run(KEYS[1], ARGV[1])
if err then return err end
if clear_compact_request(KEYS[2], ARGV[2]) then return { 'ok', 1 } end
return { 'ok', 0 }
