--[[
  Read-only snapshot for /status, in one round trip.

  KEYS[1] base      conversation key prefix
  KEYS[2] active    active run id
  KEYS[3] pending   seqs waiting for a successor
  KEYS[4] meta      conversation meta

  Returns the snapshot (see includes/snapshot.lua)
]]
--- @include "snapshot"

return snapshot(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
