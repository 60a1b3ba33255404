-- The site asked for a pause, or failed: every process slows down.
-- KEYS[1] rg:{host}:pace
-- ARGV: 1 'pause' or 'fail', 2 pause ms, 3 max_backoff ms, 4 first extra delay ms,
--       5 cause word, 6 idle ttl ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[3])
local first = tonumber(ARGV[4])
local idle = tonumber(ARGV[6])
if ARGV[1] == 'pause' then
  local until_ms = now + math.min(tonumber(ARGV[2]), cap)
  local paused = tonumber(redis.call('HGET', KEYS[1], 'paused')) or 0
  if until_ms > paused then
    redis.call('HSET', KEYS[1], 'paused', until_ms)
  end
else
  local extra = tonumber(redis.call('HGET', KEYS[1], 'extra')) or 0
  if extra == 0 then
    extra = first
  else
    extra = extra * 2
  end
  redis.call('HSET', KEYS[1], 'extra', math.min(extra, cap))
end
redis.call('HSET', KEYS[1], 'cause', ARGV[5])
local keep = math.max(redis.call('PTTL', KEYS[1]), cap + idle)
redis.call('PEXPIRE', KEYS[1], keep)
return 1
