--[[
  Ingest platform updates, one or more per call: for each, dedupe, append
  `message.received`, route it by the conversation's input policy. Each update
  is handled atomically and in the order given, one round trip for them all
  (the host batches the updates that arrive in one event-loop turn). The
  `-2n` name: 2 keys and 2 arguments per update.

  Update i takes KEYS[2i-1], KEYS[2i] and ARGV[2i-1], ARGV[2i]; for the first:
  KEYS[1] base      conversation key prefix `<p>:{c:<id>}:`; the conversation's
                    `meta` (seq, policy override, policy_eff), `log` (the record
                    stream), `active`, `pending` and the active run's `run:` /
                    `steer:` / `inputs:` keys derive from it (all in its slot)
  KEYS[2] dedupe    `<base>dedupe:<update key>`

  ARGV[1] entry json   the complete `message.received` entry
  ARGV[2] options      `<default policy>|<steering 1/0>|<steering cap>|<dedupe ttl s>|<run id>`:
                       the policy when the conversation has no /queue override;
                       steering: the runner declares the capability (else steer acts as
                       collect); the cap of a run's steering list; how long the update
                       is remembered; the id to use if this update creates a run
                       (packed in one argument: ingest is the hot path and every
                       argument costs the client time); optionally followed by
                       `|<rate limit spec>` (includes/rate-limit.lua; absent: no limits)

  The control channel is `<p>:control`, the conversation id is `<id>`, both read from the base key.

  The steady path is eight commands: one read of meta (the seq the update will become, the
  policy), the dedupe check and mark in one `SET NX GET` (Redis 7.0), the append (HINCRBY,
  XADD), then the routing reads and write. An update that fails between its mark and its
  append takes its mark back, so a redelivery is a new message.

  Returns one reply per update, in order, each one of
    { 'duplicate', original seq }
    { 'refused', seq, 'user'|'conversation', retry after ms }   over a rate limit: recorded as `message.refused`, nothing else
    { 'purged' }                                     the conversation was purged and its tombstone refuses updates
                                                     (only the dedupe key is written)
    { 'new-run', seq, run id }
    { 'joined', seq, run id }                      active run still queued (not stopped; not followup;
                                                     pending empty unless the message interrupts)
    { 'steered', seq, run id, steering depth }
    { 'pending', seq, run id, pending depth, 'policy'|'overflow'|'order' }   order: queued behind older pending messages
    { 'interrupting', seq, run id, stop kind }         the run's stop kind (interrupt|supersede, or stop after /stop)
    { ERR_SCRIPT, message }                          this update failed (e.g. a key of the wrong type); the others stand
                                                     (what it wrote before the error stays, as in a call of its own)
  Errors  { { -5 } } for the whole call when KEYS and ARGV do not pair up
]]
--- @include "common"
--- @include "dedupe"
--- @include "stop"
--- @include "rate-limit"

-- `<prefix>:control`, `<conversation id>` from the base key; only creating or stopping a run needs them.
local function names(base)
  local prefix, conversation_id = string.match(base, '^(.*):{c:(.*)}:$')
  return prefix .. ':control', conversation_id
end

local function ingest_one(base, dedupe_key, entry_json, options)
  local meta_key, log_key, active_key, pending_key = base .. 'meta', base .. 'log', base .. 'active', base .. 'pending'
  local default_policy, steering, cap, ttl, run_id, rate = string.match(options, '^([^|]+)|([^|]+)|([^|]+)|([^|]+)|([^|]+)|?(.*)$')

  -- Dedupe check and mark, the tombstone honoured (includes/dedupe.lua), meta read once with the policy.
  local seq, pm = dedupe_claim(meta_key, dedupe_key, ttl, 'policy', 'policy_eff')
  if not seq then return pm end
  -- Rate limits (includes/rate-limit.lua): a refusal is the whole answer (recorded, the key marked).
  local limited = rate ~= '' and rate_limit(base, dedupe_key, log_key, meta_key, entry_json, ttl, rate)
  if limited then return limited end

  append_entry(log_key, meta_key, entry_json)
  claimed = nil

  local policy = pm[2] or default_policy
  if policy == 'steer' and steering ~= '1' then policy = 'collect' end
  -- The successor of a run takes pending by the latest effective policy (finish reads it).
  if pm[3] ~= policy then redis.call('HSET', meta_key, 'policy_eff', policy) end

  local active = redis.call('GET', active_key)
  if not active then
    -- Pending is empty whenever no run is active; take it anyway so nothing can strand.
    local inputs = {}
    local waiting = redis.call('LRANGE', pending_key, 0, -1)
    for i = 1, #waiting do inputs[i] = tonumber(waiting[i]) end
    if #waiting > 0 then redis.call('DEL', pending_key) end
    inputs[#inputs + 1] = seq
    local _, conversation_id = names(base)
    create_run(base, active_key, run_id, conversation_id, inputs, 'ingest', now_ms())
    return { 'new-run', seq, run_id }
  end

  local run_key = base .. 'run:' .. active
  local run = redis.call('HMGET', run_key, 'state', 'stop')
  local state = run[1]

  -- A queued run takes more input unless it was already told to stop (its inputs
  -- would end unanswered) or the policy answers each message on its own. While
  -- older messages wait in pending (the queued run is an interrupting message's,
  -- which runs alone), only another interrupting message joins it; others queue behind.
  local urgent = policy == 'interrupt' or policy == 'supersede'
  if state == 'queued' and not run[2] and policy ~= 'followup'
    and (urgent or redis.call('LLEN', pending_key) == 0) then
    redis.call('APPEND', base .. 'inputs:' .. active, ',' .. seq)
    return { 'joined', seq, active }
  end

  if urgent then
    local kind = run[2]
    if not kind then
      kind = policy
      local control_channel, conversation_id = names(base)
      request_stop(run_key, log_key, meta_key, active, seq, kind, control_channel, conversation_id)
    end
    redis.call('HSET', run_key, 'urgent', append_id(redis.call('HGET', run_key, 'urgent'), seq))
    return { 'interrupting', seq, active, kind }
  end

  if policy == 'steer' then
    local steer_key = base .. 'steer:' .. active
    local depth = redis.call('LLEN', steer_key)
    if depth >= tonumber(cap) then
      local n = redis.call('RPUSH', pending_key, seq)
      append_audit(log_key, meta_key, 'steering.overflow', active, { seq }, { cap = tonumber(cap) })
      return { 'pending', seq, active, n, 'overflow' }
    end
    -- While older messages wait in pending, newer ones queue behind them: answers keep message order.
    local waiting = redis.call('LLEN', pending_key)
    if waiting > 0 then
      return { 'pending', seq, active, redis.call('RPUSH', pending_key, seq), 'order' }
    end
    depth = redis.call('RPUSH', steer_key, seq)
    append_audit(log_key, meta_key, 'steering.queued', active, { seq })
    return { 'steered', seq, active, depth }
  end

  -- followup and collect wait for a successor run.
  local n = redis.call('RPUSH', pending_key, seq)
  return { 'pending', seq, active, n, 'policy' }
end

if #KEYS == 0 or #KEYS % 2 ~= 0 or #ARGV ~= #KEYS then return { { ERR_BAD_ARG } } end
local out = {}
for i = 1, #KEYS / 2 do
  -- One update's failure (a Lua or command error) is its own reply; the updates before and after it stand.
  claimed = nil
  local ok, reply = pcall(ingest_one, KEYS[2 * i - 1], KEYS[2 * i], ARGV[2 * i - 1], ARGV[2 * i])
  if ok then
    out[i] = reply
  else
    -- Marked new and never appended (includes/dedupe.lua): the mark goes, a redelivery is a new message.
    if claimed then redis.call('DEL', claimed) end
    out[i] = { ERR_SCRIPT, type(reply) == 'table' and (reply.err or cjson.encode(reply)) or tostring(reply) }
  end
end
return out
