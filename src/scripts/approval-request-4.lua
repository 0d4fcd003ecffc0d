--[[
  Ask for approval of a tool call, or ask a question (`ask_user`), on behalf
  of a run: store the request in the conversation's approval hash (status
  `pending`) and append its `approval.requested` (or `question.asked`) entry,
  in one step. Fenced. A request already stored
  under the id (a takeover resuming the same wait) is returned unchanged.

  KEYS[1] run        run record hash
  KEYS[2] approvals  the conversation's approval hash (id → request JSON)
  KEYS[3] log        conversation record
  KEYS[4] meta       conversation meta

  ARGV[1] token      fencing token
  ARGV[2] id         approval or question id (validated by the caller)
  ARGV[3] request    request JSON (status `pending`)
  ARGV[4] entry      the `approval.requested` or `question.asked` entry JSON
  ARGV[5] ttl        seconds the approval hash lives after its last write

  Returns { 'requested', seq } | { 'exists', request JSON }
  Errors  { -1 }, { -2 }, { -3, current token }
]]
--- @include "common"

local _, err = fenced_run(KEYS[1], ARGV[1])
if err then return err end
local cur = redis.call('HGET', KEYS[2], ARGV[2])
if cur then return { 'exists', cur } end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return { 'requested', append_entry(KEYS[3], KEYS[4], ARGV[4]) }
