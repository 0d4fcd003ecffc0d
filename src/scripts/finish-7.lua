--[[
  Finish a run. Fenced and atomic, so no message can slip between the
  runner's last pull and the end of the run:

  - outcome `completed`, no stop requested, steering waiting: the steering is
    handed back (recorded as `steering.injected`) and the run stays running;
  - otherwise the run ends: `run.ended` is recorded, `active` is cleared,
    unpulled steering goes to the front of `pending` (`steering.requeued`),
    and ahead of it the messages a failed run took and did not answer, when
    the runner hands them to a follow-up (ARGV[11]); messages that asked for
    an interrupt become a successor run of their own (they run next, alone:
    ordinary messages waiting in `pending` are not merged into it and get
    their own successor when it ends); otherwise, when `pending` is not
    empty, a successor takes from it by the policy. A follow-up takes at
    least the handed-back messages and records `failures`: this run's + 1.

  KEYS[1] run      run record hash
  KEYS[2] steer    the run's steering list
  KEYS[3] log      conversation record
  KEYS[4] meta     conversation meta
  KEYS[5] active   active run id
  KEYS[6] pending  seqs waiting for a successor
  KEYS[7] base     conversation key prefix (the run's `inputs:` key and successor keys derive from it)

  ARGV[1] token          fencing token
  ARGV[2] run id
  ARGV[3] outcome        completed|failed|interrupted|superseded|stopped
  ARGV[4] reason         short terminal reason ('' for none)
  ARGV[5] successor id   id to use if a successor run is created
  ARGV[6] mode           'all' | 'one' (how much steering a continuation takes)
  ARGV[7] conversation id
  ARGV[8] ended ttl      seconds an ended run's hash is kept (0 or absent: forever)
  ARGV[9] abandon        '1': only when the run's lease has run out (an operator ending a run whose
                         runner stopped renewing it); a live lease answers { -4, lease until ms }
  ARGV[10] keep ended   most ended runs (those with a TTL) the run index keeps; older ones go, and
                         their hashes with them (0 or absent: no count bound)
  ARGV[11] retry        outcome `failed` only: seqs (csv, oldest first; '' or absent: none) of messages the
                         run took and did not answer, handed to a follow-up run

  Returns { 'continue', n, seq1, json1, ... }
          { 'ended', successor id or '', successor inputs csv }
  Errors  { -1 }, { -2 }, { -3, current token }, { -4, lease until ms }, { -5 } bad outcome, or retry
          seqs with an outcome other than `failed`
]]
--- @include "common"

local run_key, steer_key, log_key, meta_key, active_key, pending_key, base =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local run_id, outcome = ARGV[2], ARGV[3]

local OUTCOMES = { completed = true, failed = true, interrupted = true, superseded = true, stopped = true }
if not OUTCOMES[outcome] then return { ERR_BAD_ARG } end
local retry = {}
for s in string.gmatch(ARGV[11] or '', '[^,]+') do
  local seq = tonumber(s)
  if not seq then return { ERR_BAD_ARG } end
  retry[#retry + 1] = seq
end
if #retry > 0 and outcome ~= 'failed' then return { ERR_BAD_ARG } end

-- One read for the fence and what finishing needs: f[3] stop, f[4] attempt, f[5] urgent, f[6] failures.
local f, err = fenced_run(run_key, ARGV[1], 'stop', 'attempt', 'urgent', 'failures', 'lease_until')
if err then return err end
if ARGV[9] == '1' then
  -- Checked here, not by the caller: a runner renewing its lease (same token) between a check and this
  -- finish would otherwise have its live run ended under it.
  local lease_until = tonumber(f[7] or 0)
  if lease_until > now_ms() then return { ERR_LEASE_HELD, lease_until } end
end

-- Whether the steering list is known to be empty (popped to nothing just now): not read again.
local steer_empty = false
if outcome == 'completed' and not f[3] then
  local seqs = pop_steering(steer_key, ARGV[6])
  if #seqs > 0 then
    append_audit(log_key, meta_key, 'steering.injected', run_id, seqs, { follow_up = true })
    return read_entries(log_key, seqs, { 'continue', #seqs })
  end
  steer_empty = true
end

local now = now_ms()
redis.call('HSET', run_key, 'state', 'ended', 'outcome', outcome, 'reason', ARGV[4], 'ended_at', now)
-- Only acquire reads the inputs key, and an ended run is never acquired again (`run.started` keeps them).
redis.call('DEL', base .. 'inputs:' .. run_id)
expire_ended_run(base, run_key, run_id, ARGV[8], now, ARGV[10])
local ended = { v = 1, kind = 'run.ended', at = now, run = run_id, attempt = tonumber(f[4]),
  token = tonumber(ARGV[1]), outcome = outcome }
if ARGV[4] ~= '' then ended.reason = ARGV[4] end
append_entry(log_key, meta_key, cjson.encode(ended))
if redis.call('GET', active_key) == run_id then redis.call('DEL', active_key) end

-- Never drop: unpulled steering goes to the front of pending, in order; ahead of it (they are older)
-- the messages a failed run took and did not answer, when it hands them to a follow-up.
local left = steer_empty and {} or redis.call('LRANGE', steer_key, 0, -1)
if #left > 0 then redis.call('DEL', steer_key) end
local moved = {}
for i = 1, #retry do moved[i] = retry[i] end
for i = 1, #left do moved[#moved + 1] = tonumber(left[i]) end
if #moved > 0 then
  for i = #moved, 1, -1 do redis.call('LPUSH', pending_key, moved[i]) end
  append_audit(log_key, meta_key, 'steering.requeued', run_id, moved)
end
-- Messages that interrupted this run run next and alone: merged with the ordinary messages
-- waiting in pending, the answer would address those too, and the interrupt would lose its point.
-- Pending stays for the successor of that run.
local inputs = split_ids(f[5])
local follow_up = false
if #inputs == 0 then
  local waiting = redis.call('LLEN', pending_key)
  if waiting == 0 then return { 'ended', '', '' } end
  local take = waiting
  -- The conversation's current policy: a /queue override made after the messages arrived wins.
  local pm = redis.call('HMGET', meta_key, 'policy', 'policy_eff')
  if (pm[1] or pm[2]) == 'followup' then take = 1 end
  -- Messages that failed together are retried together: the follow-up's failure count is theirs.
  if take < #retry then take = #retry end
  follow_up = #retry > 0
  local popped = redis.call('LPOP', pending_key, take)
  for i = 1, #popped do inputs[i] = tonumber(popped[i]) end
end
local successor_key = create_run(base, active_key, ARGV[5], ARGV[7], inputs, 'successor', now)
-- Failed runs in a row on these messages: the runner of the follow-up bounds its own hand-back by it.
if follow_up then redis.call('HSET', successor_key, 'failures', (tonumber(f[6]) or 0) + 1) end
return { 'ended', ARGV[5], join_ids(inputs) }
