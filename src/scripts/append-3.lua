--[[
  Append one entry to the conversation record on behalf of a run. Fenced.

  KEYS[1] run      run record hash
  KEYS[2] log      conversation record
  KEYS[3] meta     conversation meta
  ARGV[1] token    fencing token
  ARGV[2] entry json

  Returns { 'ok', seq }
  Errors  { -1 }, { -2 }, { -3, current token }
]]
--- @include "common"

local _, err = fenced_run(KEYS[1], ARGV[1])
if err then return err end
return { 'ok', append_entry(KEYS[2], KEYS[3], ARGV[2]) }
