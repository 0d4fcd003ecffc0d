--[[
  Decide a pending approval: the first decision wins; a later one (a second
  click, a click after the timeout) changes nothing. Only the request's
  deciders may approve or deny; the runner records a timeout itself.
  Appends `approval.decided` to the record.

  KEYS[1] approvals  the conversation's approval hash
  KEYS[2] log        conversation record
  KEYS[3] meta       conversation meta

  ARGV[1] id         approval id
  ARGV[2] decision   'approved' | 'denied' | 'timeout'
  ARGV[3] by         user id of who decided ('' for a timeout)
  ARGV[4] by name    display name, or ''

  Returns { 'decided', request JSON after }      the decision was recorded
          { 'already', request JSON }            decided before; nothing written
          { 'not_allowed' }                      `by` is not among the deciders; nothing written
          { 'not_found' }                        no such request
  Errors  { -5 } bad decision
]]
--- @include "common"

local decision = ARGV[2]
if decision ~= 'approved' and decision ~= 'denied' and decision ~= 'timeout' then return { ERR_BAD_ARG } end
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return { 'not_found' } end
local req = cjson.decode(raw)
if req.status ~= 'pending' then return { 'already', raw } end
if decision ~= 'timeout' then
  local allowed = false
  for _, id in ipairs(req.deciders or {}) do
    if id == ARGV[3] then allowed = true end
  end
  if not allowed then return { 'not_allowed' } end
end
local at = now_ms()
req.status = decision
req.decidedAt = at
if ARGV[3] ~= '' then req.by = ARGV[3] end
if ARGV[4] ~= '' then req.byName = ARGV[4] end
local after = cjson.encode(req)
redis.call('HSET', KEYS[1], ARGV[1], after)
local entry = { v = 1, kind = 'approval.decided', at = at, run = req.run, approval = ARGV[1], decision = decision }
if ARGV[3] ~= '' then entry.by = ARGV[3] end
append_entry(KEYS[2], KEYS[3], cjson.encode(entry))
return { 'decided', after }
