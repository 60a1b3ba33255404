-- One admission to a host, in one round trip (see src/fleet/scripts.rs).
-- KEYS[1] rg:{host}:pace   hash: next (ms), paused (ms), extra (ms), cause
-- KEYS[2] rg:{host}:leases sorted set: lease id -> expiry (ms)
-- KEYS[3] rg:{host}:waiting sorted set: lease id of a request told 'full' -> first ask
-- KEYS[4] rg:{host}:seen    sorted set: the same ids -> latest ask (ms)
-- ARGV: 1 delay ms, 2 max_per_host, 3 lease_ttl ms, 4 max_wait ms, 5 lease id,
--       6 successes to apply, 7 first extra delay ms, 8 max_backoff ms,
--       9 idle ttl ms, 10.. lease ids to release first
-- Returns {verdict, ms, cause, held}: 'ok' and the wait until the reserved start,
-- 'full' and the time until the first lease expires, or 'reject' and the wait;
-- held: the leases held with this one (0 unless 'ok').
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local delay = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local max_wait = tonumber(ARGV[4])
local successes = tonumber(ARGV[6])
local first = tonumber(ARGV[7])
local cap = tonumber(ARGV[8])
local idle = tonumber(ARGV[9])

for i = 10, #ARGV do
  redis.call('ZREM', KEYS[2], ARGV[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)

local st = redis.call('HMGET', KEYS[1], 'next', 'paused', 'extra', 'cause')
local next_start = tonumber(st[1]) or 0
local paused = tonumber(st[2]) or 0
local extra = tonumber(st[3]) or 0
local cause = st[4] or ''
if extra > 0 and successes > 0 then
  for _ = 1, successes do
    extra = math.floor(extra / 2)
    if extra < first then
      extra = 0
      break
    end
  end
  redis.call('HSET', KEYS[1], 'extra', extra)
end
local backoff = ''
if paused > now or extra > 0 then
  backoff = cause
end

local start = math.max(now, next_start, paused)
if start - now > max_wait then
  return {'reject', start - now, backoff, 0}
end
local held = redis.call('ZCARD', KEYS[2])
local blocked = held >= max
-- Requests told 'full' wait in the store's own queue, oldest first, so a process that
-- frees a slot cannot take it again for its next request while another process waits:
-- a free slot goes to a waiter ranked below the number of free slots. A waiter that
-- stopped asking (its process died, or it gave up) is dropped after 1 s.
local waiting = redis.call('ZCARD', KEYS[3])
if waiting > 0 then
  local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - 1000)
  for _, id in ipairs(gone) do
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
  end
  waiting = waiting - #gone
end
if not blocked and waiting > 0 then
  local rank = redis.call('ZRANK', KEYS[3], ARGV[5]) or waiting
  blocked = rank >= max - held
end
if blocked then
  redis.call('ZADD', KEYS[3], 'NX', now, ARGV[5])
  redis.call('ZADD', KEYS[4], now, ARGV[5])
  redis.call('PEXPIRE', KEYS[3], 5000)
  redis.call('PEXPIRE', KEYS[4], 5000)
  local retry = 10
  if held >= max then
    local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    retry = math.max(tonumber(head[2]) - now, 1)
  end
  return {'full', retry, backoff, 0}
end
if waiting > 0 then
  redis.call('ZREM', KEYS[3], ARGV[5])
  redis.call('ZREM', KEYS[4], ARGV[5])
end
local after = start + delay + extra
redis.call('HSET', KEYS[1], 'next', after)
redis.call('ZADD', KEYS[2], start + ttl, ARGV[5])
local keep = math.max(after, paused, start + ttl) - now + idle
if extra > 0 then
  keep = keep + cap
end
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], start + ttl - now + 1000)
return {'ok', start - now, backoff, held + 1}
