--[[
  Keeps one entry of a conversation's polls (plugins/matrix/poll-store.ts)
  and bounds the hash in the same step: entries past their `expiresAt` are
  deleted, then the oldest ones past `max`, and the hash expires `ttl`
  seconds after this write (its newest entry's lifetime). A poll kept again
  (a retried send) overwrites its own entry.

  KEYS[1] polls    the conversation's polls (hash: poll event id -> JSON with `expiresAt`, ms)

  ARGV[1] poll id
  ARGV[2] entry    JSON, its `expiresAt` now + ttl
  ARGV[3] now      ms since the epoch
  ARGV[4] ttl      seconds
  ARGV[5] max      most entries kept

  Returns { n }: the entries the hash holds now
]]
local key, now, max = KEYS[1], tonumber(ARGV[3]), tonumber(ARGV[5])
redis.call('HSET', key, ARGV[1], ARGV[2])
local live = {}
local all = redis.call('HGETALL', key)
for i = 1, #all, 2 do
  local ok, entry = pcall(cjson.decode, all[i + 1])
  local expires = ok and type(entry) == 'table' and tonumber(entry.expiresAt) or 0
  if expires <= now then
    redis.call('HDEL', key, all[i])
  else
    live[#live + 1] = { all[i], expires }
  end
end
if #live > max then
  table.sort(live, function(a, b) return a[2] < b[2] end)
  for i = 1, #live - max do redis.call('HDEL', key, live[i][1]) end
end
redis.call('EXPIRE', key, ARGV[4])
return { math.min(#live, max) }
