--[[
  Acquire a run for execution: queued -> running, or take over a running run
  whose lease has expired (its worker died). Bumps the fencing token; every
  later write of the run must carry the new token.

  KEYS[1] run      run record hash
  KEYS[2] log      conversation record
  KEYS[3] meta     conversation meta
  KEYS[4] active   active run id
  KEYS[5] inputs   the run's input seqs (comma-separated; joins append to it)

  ARGV[1] run id
  ARGV[2] owner     worker identity (host/pid/worker id)
  ARGV[3] lease ms
  ARGV[4] optional: n, the number of conversation state fields that follow
  ARGV[5..4+n]      state fields to read (`<base>state`, the slot's state hash)
  ARGV[5+n..]       meta fields to read

  Returns { 'acquired', token, attempt, inputs csv, stop kind or '', lease until ms, urgent csv, cause, failures }
          and, when ARGV[4] is given, three more: the input entries' JSON in input order ('' for
          one missing; nil for more than 256 inputs, which the caller reads itself, so the script's
          work stays bounded), the state fields' values and the meta fields' values (nil when
          unset): what the attempt starts from, read in the acquire's own call rather than a round
          trip after it
          cause: 'ingest' | 'successor' | 'compact' (a /compact run with no inputs)
          failures: failed runs in a row whose unanswered messages this run was created to answer (finish-7.lua)
  Errors  { -1 } not found, { -2 } ended, { -4, lease until ms } live lease held by another owner
]]
--- @include "common"

local run_key, log_key, meta_key, active_key, inputs_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local f = redis.call('HMGET', run_key, 'state', 'token', 'attempt', 'lease_until', 'stop', 'urgent', 'cause', 'failures')
local state = f[1]
if not state then return { ERR_NOT_FOUND } end
if state == 'ended' then return { ERR_ENDED } end

local now = now_ms()
if state == 'running' and tonumber(f[4] or 0) > now then
  return { ERR_LEASE_HELD, tonumber(f[4]) }
end

local token = tonumber(f[2] or 0) + 1
local attempt = tonumber(f[3] or 0) + 1
local lease_until = now + tonumber(ARGV[3])
redis.call('HSET', run_key, 'state', 'running', 'token', token, 'attempt', attempt,
  'owner', ARGV[2], 'lease_until', lease_until, 'started_at', now)
-- A run is only ever acquired while it is the active one; repair a lost pointer.
if not redis.call('GET', active_key) then redis.call('SET', active_key, ARGV[1]) end

local inputs = split_ids(redis.call('GET', inputs_key))
local entry = { v = 1, kind = 'run.started', at = now, run = ARGV[1], attempt = attempt,
  token = token, owner = ARGV[2] }
if #inputs > 0 then entry.inputs = inputs end
append_entry(log_key, meta_key, cjson.encode(entry))

local out = { 'acquired', token, attempt, join_ids(inputs), f[5] or '', lease_until, f[6] or '', f[7] or 'ingest', tonumber(f[8] or 0) }
-- Most inputs whose entries the acquire reads itself.
local MAX_READ_INPUTS = 256
if ARGV[4] then
  local n = tonumber(ARGV[4])
  local entries = false
  if #inputs <= MAX_READ_INPUTS then
    entries = {}
    for i, seq in ipairs(inputs) do
      local id = seq .. '-0'
      local r = redis.call('XRANGE', log_key, id, id)
      entries[i] = r[1] and r[1][2][2] or ''
    end
  end
  local state_key = string.sub(meta_key, 1, -5) .. 'state'
  out[10] = entries
  out[11] = n > 0 and redis.call('HMGET', state_key, unpack(ARGV, 5, 4 + n)) or {}
  out[12] = #ARGV > 4 + n and redis.call('HMGET', meta_key, unpack(ARGV, 5 + n, #ARGV)) or {}
end
return out
