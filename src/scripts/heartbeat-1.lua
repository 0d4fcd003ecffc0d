--[[
  Extend a running run's lease. Fenced.

  KEYS[1] run      run record hash
  ARGV[1] token    fencing token from acquire
  ARGV[2] lease ms

  Returns { 'ok', lease until ms, stop kind or '' }
  Errors  { -1 } not found, { -2 } ended, { -3, current token } stale token
]]
--- @include "common"

local f, err = fenced_run(KEYS[1], ARGV[1], 'stop')
if err then return err end
local lease_until = now_ms() + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease_until', lease_until)
return { 'ok', lease_until, f[3] or '' }
