--[[
  Token-bucket rate limits of ingest. Included with `--- @include "rate-limit"`
  after "common" and "dedupe".

  Two buckets per update, both in the conversation's slot, in one hash
  `<base>rate` (fields `<tokens>:<ms of last refill>`, tokens fractional):
    `c`           the conversation's bucket
    `u:<sender>`  the sender's bucket in this conversation (a per-user bucket across
                  conversations would live in another slot: not one script, not one round trip)
  A message takes one token from each; it is refused when either has less than
  one, and a refusal takes nothing. An absent field is a full bucket, so the hash
  expires once every bucket in it would be full again.

  spec: `<user capacity>,<user refill per minute>,<conversation capacity>,<conversation refill per minute>,<sender id>`;
        a capacity of 0 turns that bucket off.
]]

-- Tokens of a bucket at `now`, refilled since its last write.
local function bucket_level(raw, capacity, per_minute, now)
  if not raw then return capacity end
  local tokens, at = string.match(raw, '^([^:]+):(%d+)$')
  tokens, at = tonumber(tokens), tonumber(at)
  if not tokens or not at then return capacity end
  return math.min(capacity, tokens + math.max(0, now - at) * per_minute / 60000)
end

-- Returns nil when the update may be ingested (a token taken from each bucket),
-- else the whole reply of the update: { 'refused', seq, 'user'|'conversation',
-- retry after ms } after recording `message.refused` (the message inside) and
-- the dedupe key. The caller checked first that the update is new (a
-- redelivery is a duplicate whatever the buckets say, and takes no token).
local function rate_limit(base, dedupe_key, log_key, meta_key, entry_json, ttl, spec)
  local ucap, urate, ccap, crate, sender = string.match(spec, '^([^,]+),([^,]+),([^,]+),([^,]+),(.*)$')
  ucap, urate, ccap, crate = tonumber(ucap), tonumber(urate), tonumber(ccap), tonumber(crate)
  local rate_key, user_field = base .. 'rate', 'u:' .. sender
  local now = now_ms()
  local stored = redis.call('HMGET', rate_key, user_field, 'c')
  local user = ucap > 0 and bucket_level(stored[1], ucap, urate, now)
  local conv = ccap > 0 and bucket_level(stored[2], ccap, crate, now)
  local limit, wait
  if user and user < 1 then
    limit, wait = 'user', math.ceil((1 - user) * 60000 / urate)
  elseif conv and conv < 1 then
    limit, wait = 'conversation', math.ceil((1 - conv) * 60000 / crate)
  end
  if limit then
    local json = '{"v":1,"kind":"message.refused","at":' .. now .. ',"limit":"' .. limit .. '","retryAfterMs":' .. wait ..
      ',"message":' .. entry_json .. '}'
    local seq = append_entry(log_key, meta_key, json)
    dedupe_mark(dedupe_key, seq, ttl)
    return { 'refused', seq, limit, wait }
  end
  local fields, full_ms = {}, 0
  if user then
    fields[1], fields[2] = user_field, (user - 1) .. ':' .. now
    full_ms = math.ceil(ucap * 60000 / urate)
  end
  if conv then
    local n = #fields
    fields[n + 1], fields[n + 2] = 'c', (conv - 1) .. ':' .. now
    full_ms = math.max(full_ms, math.ceil(ccap * 60000 / crate))
  end
  if #fields == 0 then return nil end
  redis.call('HSET', rate_key, unpack(fields))
  redis.call('PEXPIRE', rate_key, full_ms)
  return nil
end
