-- Stores a fetched robots.txt entry and frees the fetch lock (if still ours).
-- KEYS[1] rg:{origin}:robots, KEYS[2] rg:{origin}:robots-lock
-- ARGV: 1 lock token, 2 ms the entry stays fresh, 3 ms the key is kept,
--       4.. field, value pairs
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'expires', now + tonumber(ARGV[2]), unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return 1
