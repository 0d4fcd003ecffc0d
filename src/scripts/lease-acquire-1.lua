--[[
  Take a lease (a lock), or extend it when the caller already holds it. One
  owner at a time: the key holds the owner id and expires with the lease.
  Given up with `lock-release`.

  KEYS[1] lease     string key, e.g. <prefix>:p:<plugin id>:poller
  ARGV[1] owner     id of the caller
  ARGV[2] lease ms  how long the lease lasts from now

  Returns { 1, lease ms }             the caller holds the lease (taken or extended)
          { 0, ms left, holder id }   another owner holds it for ms left
]]
--- @include "lease"
return lease_take(KEYS[1], ARGV[1], ARGV[2])
