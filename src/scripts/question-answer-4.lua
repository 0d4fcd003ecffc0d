--[[
  Answer a pending question (the agent's `ask_user`): the first answer wins;
  a later one (a second click, a click after the timeout) changes nothing.
  Only the question's deciders may choose; the runner records a timeout
  itself, and a click past the question's `expiresAt` records the timeout
  instead. Appends `question.answered` to the record. The click's update is
  deduped here too, in the same step as the answer.

  KEYS[1] approvals  the conversation's approval hash (questions live beside approvals)
  KEYS[2] log        conversation record
  KEYS[3] meta       conversation meta
  KEYS[4] dedupe     dedupe key of the click's update (read and set only with a ttl)

  ARGV[1] id         question id (validated by the caller)
  ARGV[2] answer     the chosen option, from 0; or, from the runner, 'timeout' or 'typed' (a message came instead)
  ARGV[3] by         user id of who chose ('' for a timeout)
  ARGV[4] by name    display name, or ''
  ARGV[5] ttl        seconds the click's update is remembered; 0: no update (the runner's timeout)

  Returns { 'duplicate' }                  the click's update was seen before; nothing written
          { 'answered', question JSON }    the answer was recorded
          { 'already', question JSON }     answered before (nothing written), or past its deadline
                                           (the timeout is recorded: the JSON after)
          { 'not_allowed' }                `by` is not among the deciders; nothing written
          { 'not_found' }                  no such question, or no such option
]]
--- @include "common"
--- @include "decision"

if decision_seen(KEYS[4], tonumber(ARGV[5]) or 0) then return { 'duplicate' } end
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return { 'not_found' } end
local q = cjson.decode(raw)
if type(q.options) ~= 'table' then return { 'not_found' } end
if q.status ~= 'pending' then return { 'already', raw } end
local answer, by, by_name = ARGV[2], ARGV[3], ARGV[4]
local at = now_ms()
local index = tonumber(answer)
if index and (index < 0 or index >= #q.options or index ~= math.floor(index)) then return { 'not_found' } end
if not index and answer ~= 'timeout' and answer ~= 'typed' then return { 'not_found' } end
-- Past its deadline a question is timed out, whatever the runner's clock says: a late click records the timeout.
if index and at >= (tonumber(q.expiresAt) or 0) then answer, index, by, by_name = 'timeout', nil, '', '' end
if index then
  if not is_decider(q, by) then return { 'not_allowed' } end
end
local entry = { v = 1, kind = 'question.answered', at = at, run = q.run, question = ARGV[1] }
if not index then
  q.status = answer
  entry.status = answer
else
  q.status, q.answer = 'answered', index
  entry.status, entry.answer = 'answered', index
end
q.decidedAt = at
if by ~= '' then q.by, entry.by = by, by end
if by_name ~= '' then q.byName = by_name end
local after = cjson.encode(q)
redis.call('HSET', KEYS[1], ARGV[1], after)
append_entry(KEYS[2], KEYS[3], cjson.encode(entry))
if not index then return { 'already', after } end
return { 'answered', after }
