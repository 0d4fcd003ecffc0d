--[[
  Read-only snapshot for /status, in one round trip.

  KEYS[1] base      conversation key prefix
  KEYS[2] active    active run id
  KEYS[3] pending   seqs waiting for a successor
  KEYS[4] meta      conversation meta

  Returns { active run id or '', run state or '', stop kind or '', steering depth,
            pending depth, policy override or '', effective policy or '', last seq,
            reset seq, attempt, owner or '', lease until ms, compaction requested seq,
            compaction breaker JSON or '' }
]]
local active = redis.call('GET', KEYS[2])
local meta = redis.call('HMGET', KEYS[4], 'policy', 'policy_eff', 'seq', 'reset_seq', 'compact_requested')
local breaker = redis.call('HGET', KEYS[1] .. 'state', 'runner.compaction.breaker')
local state, stop, depth, attempt, owner, lease = '', '', 0, 0, '', 0
if active then
  local f = redis.call('HMGET', KEYS[1] .. 'run:' .. active, 'state', 'stop', 'attempt', 'owner', 'lease_until')
  state, stop, attempt, owner, lease = f[1] or '', f[2] or '', tonumber(f[3] or 0), f[4] or '', tonumber(f[5] or 0)
  depth = redis.call('LLEN', KEYS[1] .. 'steer:' .. active)
end
return { active or '', state, stop, depth, redis.call('LLEN', KEYS[3]), meta[1] or '', meta[2] or '',
  tonumber(meta[3] or 0), tonumber(meta[4] or 0), attempt, owner, lease, tonumber(meta[5] or 0), breaker or '' }
