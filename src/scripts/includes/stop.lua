--[[
  Asking a run to stop. Included with `--- @include "stop"` after "common".
]]
-- Marks the run as asked to stop (`interrupt` | `supersede` | `stop`), records
-- `run.control` naming the message that asked, and tells the owning runner on
-- the control channel. Callers check first that no stop was requested yet.
local function request_stop(run_key, log_key, meta_key, run_id, seq, kind, channel, conversation_id)
  redis.call('HSET', run_key, 'stop', kind)
  append_audit(log_key, meta_key, 'run.control', run_id, { seq }, { control = kind })
  redis.call('PUBLISH', channel, cjson.encode({ conversation = conversation_id, run = run_id, kind = kind }))
end
