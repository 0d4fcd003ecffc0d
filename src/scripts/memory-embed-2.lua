--[[
  Stores the embedding of a note computed after it was saved (a note saved
  without one, or before an embedding model was configured), unless the note
  changed or went away in the meantime.

  KEYS[1] notes      the identity's notes (hash: note id -> JSON)
  KEYS[2] vectors    the notes' embeddings (hash: note id -> base64 of float32s)

  ARGV[1] id         note id
  ARGV[2] updatedAt  the note's `updatedAt` the embedding was computed for
  ARGV[3] embedding  base64 of float32s

  Returns { 'ok' } | { 'changed' }  (edited or deleted since: nothing written)
]]
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return { 'changed' } end
if tostring(cjson.decode(old).updatedAt) ~= ARGV[2] then return { 'changed' } end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return { 'ok' }
