--[[
  The /status snapshot of a conversation. Included with `--- @include "snapshot"`.
  Returns { active run id or '', run state or '', stop kind or '', steering depth,
            pending depth, policy override or '', effective policy or '', last seq,
            reset seq, attempt, owner or '', lease until ms, compaction requested seq,
            compaction breaker JSON or '' }
]]
local function snapshot(base, active_key, pending_key, meta_key)
  local active = redis.call('GET', active_key)
  local meta = redis.call('HMGET', meta_key, 'policy', 'policy_eff', 'seq', 'reset_seq', 'compact_requested')
  local breaker = redis.call('HGET', base .. 'state', 'runner.compaction.breaker')
  local state, stop, depth, attempt, owner, lease = '', '', 0, 0, '', 0
  if active then
    local f = redis.call('HMGET', base .. 'run:' .. active, 'state', 'stop', 'attempt', 'owner', 'lease_until')
    state, stop, attempt, owner, lease = f[1] or '', f[2] or '', tonumber(f[3] or 0), f[4] or '', tonumber(f[5] or 0)
    depth = redis.call('LLEN', base .. 'steer:' .. active)
  end
  return { active or '', state, stop, depth, redis.call('LLEN', pending_key), meta[1] or '', meta[2] or '',
    tonumber(meta[3] or 0), tonumber(meta[4] or 0), attempt, owner, lease, tonumber(meta[5] or 0), breaker or '' }
end
