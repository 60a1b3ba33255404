-- Gives back finished leases of one host, in a background batch.
-- KEYS[1] rg:{host}:pace, KEYS[2] rg:{host}:leases
-- ARGV: 1 successes to apply, 2 first extra delay ms, 3.. lease ids
for i = 3, #ARGV do
  redis.call('ZREM', KEYS[2], ARGV[i])
end
local successes = tonumber(ARGV[1])
local first = tonumber(ARGV[2])
local extra = tonumber(redis.call('HGET', KEYS[1], 'extra')) or 0
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
return #ARGV - 2
