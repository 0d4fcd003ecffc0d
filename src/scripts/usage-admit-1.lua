--[[
  Checks the budgets of one subject (an identity or a conversation) in one
  step, and counts a starting run or a picture: reads the month's and the day's tokens and
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
  ARGV[8] counting         'run': a run is starting (checks runsPerHour, counts the run when admitted);
                           'image': a picture is asked for (checks imagesPerDay, counts the picture
                           when admitted; a refusal counts no notice); '': a check only
  ARGV[9] imagesPerDay     limit; '' or 0 is no limit
  ARGV[10] quiet           '1': nobody is told of a refusal (a subagent's run), so it counts no notice; '' otherwise

  Returns { 'ok' } when admitted,
          { 'spent', limit, notices } when refused: limit is 'tokensPerMonth',
          'tokensPerDay', 'runsPerHour' or 'imagesPerDay', notices the window's
          notice count after this one (0 for a picture's refusal and a quiet one)
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
local counting = ARGV[8]
-- What is counted when admitted: a run in the hour, a picture in the day.
local counted = nil
if counting == 'run' then
  checks[3] = { 'runsPerHour', limitOf(ARGV[7]), used[3], hour }
  counted = 'r:' .. hour
elseif counting == 'image' then
  checks[3] = { 'imagesPerDay', limitOf(ARGV[9]), redis.call('HGET', key, 'i:' .. day), day }
  counted = 'i:' .. day
end

for _, c in ipairs(checks) do
  if c[2] ~= nil and (tonumber(c[3]) or 0) >= c[2] then
    if counting == 'image' or ARGV[10] == '1' then return { 'spent', c[1], 0 } end
    prune()
    local notices = redis.call('HINCRBY', key, 'n:' .. c[4], 1)
    redis.call('EXPIRE', key, ARGV[1])
    return { 'spent', c[1], notices }
  end
end

if counted ~= nil then
  prune()
  redis.call('HINCRBY', key, counted, 1)
  redis.call('EXPIRE', key, ARGV[1])
end
return { 'ok' }
