-- Extends the leases of requests still running (longer than a third of lease_ttl), so
-- a long transfer keeps its slot while its process lives.
-- KEYS[1] rg:{host}:leases
-- ARGV: 1 lease_ttl ms, 2.. lease ids
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', now + ttl, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ttl + 1000)
return renewed
