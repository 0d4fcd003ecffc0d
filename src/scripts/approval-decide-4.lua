--[[
  Decide a pending approval: the first decision wins; a later one (a second
  click, a click after the timeout) changes nothing. Only the request's
  deciders may approve or deny; the runner records a timeout itself, and a
  click past the request's `expiresAt` records the timeout instead.
  Appends `approval.decided` to the record. A chat command's update is deduped
  here too, in the same step as the decision: a redelivery is a duplicate
  whether or not the first delivery's answer went out.

  KEYS[1] approvals  the conversation's approval hash
  KEYS[2] log        conversation record
  KEYS[3] meta       conversation meta
  KEYS[4] dedupe     dedupe key of the command's update (read and set only with a ttl)

  ARGV[1] id         approval id
  ARGV[2] decision   'approved' | 'denied' | 'timeout'
  ARGV[3] by         user id of who decided ('' for a timeout)
  ARGV[4] by name    display name, or ''
  ARGV[5] ttl        seconds the command's update is remembered; 0: no update (the runner's timeout)

  Returns { 'duplicate' }                        the command's update was seen before; nothing written
          { 'decided', request JSON after }      the decision was recorded
          { 'already', request JSON }            decided before (nothing written), or past its deadline
                                                 (the timeout is recorded: the JSON after)
          { 'not_allowed' }                      `by` is not among the deciders; nothing written
          { 'not_found' }                        no such request
  Errors  { -5 } bad decision
]]
--- @include "common"
--- @include "decision"

local decision = ARGV[2]
if decision ~= 'approved' and decision ~= 'denied' and decision ~= 'timeout' then return { ERR_BAD_ARG } end
if decision_seen(KEYS[4], tonumber(ARGV[5]) or 0) then return { 'duplicate' } end
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return { 'not_found' } end
local req = cjson.decode(raw)
if req.status ~= 'pending' then return { 'already', raw } end
local at = now_ms()
-- Past its deadline a request is timed out, whatever the runner's clock says or whether one is attached: a late
-- click records the timeout and changes nothing else.
local late = decision ~= 'timeout' and at >= (tonumber(req.expiresAt) or 0)
local by, by_name = ARGV[3], ARGV[4]
if late then decision, by, by_name = 'timeout', '', '' end
if decision ~= 'timeout' then
  if not is_decider(req, by) then return { 'not_allowed' } end
end
req.status = decision
req.decidedAt = at
if by ~= '' then req.by = by end
if by_name ~= '' then req.byName = by_name end
local after = cjson.encode(req)
redis.call('HSET', KEYS[1], ARGV[1], after)
local entry = { v = 1, kind = 'approval.decided', at = at, run = req.run, approval = ARGV[1], decision = decision }
if by ~= '' then entry.by = by end
append_entry(KEYS[2], KEYS[3], cjson.encode(entry))
if late then return { 'already', after } end
return { 'decided', after }
