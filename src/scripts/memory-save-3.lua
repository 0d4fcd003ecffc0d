--[[
  Saves a note of an identity's memory: a new note (its id from the
  identity's counter) or a new text for an existing one. The count and the
  write are one step, so two saves racing for the last place cannot both get
  it. A new note whose text equals a stored note's is not stored twice: a
  tool call run again after a takeover saves once. The note's embedding is
  kept apart from its JSON (lists never read vectors); a new text without
  an embedding drops the old text's one.

  KEYS[1] notes      the identity's notes (hash: note id -> JSON)
  KEYS[2] seq        the identity's note id counter
  KEYS[3] vectors    the notes' embeddings (hash: note id -> base64 of float32s)

  ARGV[1] id         '' for a new note, else the id of the note to edit
  ARGV[2] text       the note's text (its size is checked by the caller)
  ARGV[3] now        ms since the epoch
  ARGV[4] max        most notes the identity may have
  ARGV[5] embedding  the text's embedding (base64 of float32s), or ''

  Returns { 'created', id, json }   a new note
          { 'updated', id, json }   the note's text was replaced
          { 'same', id, json }      a note with this text was stored already; nothing written
          { 'limit', count }        the identity has `max` notes; nothing written
          { 'not_found' }           no note `id` to edit; nothing written
]]
local notes, seq, vectors = KEYS[1], KEYS[2], KEYS[3]
local id, text, now, max, embedding = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]

-- v: the note's stored version (src/people/memory.ts `storedNote`).
local function encode(note_id, created)
  return cjson.encode({ v = 1, id = note_id, text = text, createdAt = created, updatedAt = now })
end

if id ~= '' then
  local old = redis.call('HGET', notes, id)
  if not old then return { 'not_found' } end
  local prev = cjson.decode(old)
  local json = encode(id, prev.createdAt)
  redis.call('HSET', notes, id, json)
  if embedding ~= '' then
    redis.call('HSET', vectors, id, embedding)
  elseif prev.text ~= text then
    redis.call('HDEL', vectors, id)
  end
  return { 'updated', id, json }
end

local all = redis.call('HGETALL', notes)
for i = 2, #all, 2 do
  if cjson.decode(all[i]).text == text then return { 'same', all[i - 1], all[i] } end
end
local count = #all / 2
if count >= max then return { 'limit', count } end
local new_id = tostring(redis.call('INCR', seq))
local json = encode(new_id, now)
redis.call('HSET', notes, new_id, json)
if embedding ~= '' then redis.call('HSET', vectors, new_id, embedding) end
return { 'created', new_id, json }
