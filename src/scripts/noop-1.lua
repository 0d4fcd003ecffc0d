--[[
  Does nothing; the baseline for the ingest benchmark (cost of one EVALSHA).

  KEYS[1] any key in the caller's slot
  Returns { 1 }
]]
return { 1 }
