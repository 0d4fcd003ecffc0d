--[[
  Checks the budgets of one subject (an identity or a conversation) in one
  step, and counts a starting run: reads the month's and the day's tokens and
  the hour's runs, compares them with the limits, and either counts the run
  (`r:<hour>` + 1, only when a run limit or count is asked for) and returns
  ok, or counts a notice (`n:<window>` + 1) and returns which limit is spent.
  Being one script, two runs starting at once cannot both take the last run
  of the hour. Fields and pruning as in usage-add: a field whose window is
  not one of the current three is deleted on write.

  KEYS[1] usage            the subject's usage hash

  ARGV[1] ttl              seconds the hash lives after a write (past the month's end)
  ARGV[2] day              current day window   (YYYY-MM-DD)
  ARGV[3] month            current month window (YYYY-MM)
  ARGV[4] hour             current hour window  (YYYY-MM-DDTHH)
  ARGV[5] tokensPerMonth   limit; '' or 0 is no limit
  ARGV[6] tokensPerDay     limit; '' or 0 is no limit
  ARGV[7] runsPerHour      limit; '' or 0 is no limit
  ARGV[8] countRun         '1': a run is starting (checks runsPerHour, counts the run when admitted)

  Returns { 'ok' } when admitted,
          { 'spent', limit, notices } when refused: limit is 'tokensPerMonth',
          'tokensPerDay' or 'runsPerHour', notices the window's notice count
          after this one
]]
local key = KEYS[1]
local day, month, hour = ARGV[2], ARGV[3], ARGV[4]

local function limitOf(v)
  local n = tonumber(v)
  if n == nil or n <= 0 then return nil end
  return n
end

local function prune()
  local live = { [day] = true, [month] = true, [hour] = true }
  for _, f in ipairs(redis.call('HKEYS', key)) do
    if not live[string.sub(f, 3)] then redis.call('HDEL', key, f) end
  end
end

local used = redis.call('HMGET', key, 't:' .. month, 't:' .. day, 'r:' .. hour)
local checks = {
  { 'tokensPerMonth', limitOf(ARGV[5]), used[1], month },
  { 'tokensPerDay', limitOf(ARGV[6]), used[2], day },
}
local counting = ARGV[8] == '1'
if counting then checks[3] = { 'runsPerHour', limitOf(ARGV[7]), used[3], hour } end

for _, c in ipairs(checks) do
  if c[2] ~= nil and (tonumber(c[3]) or 0) >= c[2] then
    prune()
    local notices = redis.call('HINCRBY', key, 'n:' .. c[4], 1)
    redis.call('EXPIRE', key, ARGV[1])
    return { 'spent', c[1], notices }
  end
end

if counting then
  prune()
  redis.call('HINCRBY', key, 'r:' .. hour, 1)
  redis.call('EXPIRE', key, ARGV[1])
end
return { 'ok' }
