--[[
  Keep what a send delivered under its idempotency key, once every part of it
  is acknowledged: a later retry with the key answers these ids and sends
  nothing (send-record-9.lua), even after the outbox pruned the part records.
  The hash keeps the TTL send-record gave it (the key's dedupe window); a hash
  that is gone (expired, or a send recorded before results were kept) is not recreated.

  KEYS[1] result   the key's result hash (`seq`, `ids`)

  ARGV[1] seq      the seq the message became (a hash of another seq is left alone)
  ARGV[2] ids      JSON array of the platform message ids, one per part

  Returns { 'kept' } | { 'gone' }
]]
local seq = redis.call('HGET', KEYS[1], 'seq')
if not seq or seq ~= ARGV[1] then return { 'gone' } end
redis.call('HSET', KEYS[1], 'ids', ARGV[2])
return { 'kept' }
