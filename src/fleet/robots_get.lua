-- A robots.txt lookup for the fleet, in one round trip (see src/fleet/robots.rs).
-- KEYS[1] rg:{origin}:robots (hash), KEYS[2] rg:{origin}:robots-lock
-- ARGV: 1 lock token, 2 lock ttl ms
-- Returns {'entry', ms left fresh, fields} when a fresh entry is stored,
-- {'fetch', 0, {}} when this caller now holds the fetch lock,
-- {'wait', ms the lock still lasts, {}} when another process is fetching.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = tonumber(redis.call('HGET', KEYS[1], 'expires'))
if expires and expires > now then
  return {'entry', expires - now, redis.call('HGETALL', KEYS[1])}
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'fetch', 0, {}}
end
return {'wait', math.max(redis.call('PTTL', KEYS[2]), 1), {}}
