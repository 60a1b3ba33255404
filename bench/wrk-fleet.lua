-- wrk script for bench/fleet.sh: absolute-form requests through a forward proxy.
--
-- ORIGIN_PORT (environment): the origin's port. HOSTS: how many hosts to cycle
-- through, 127.0.H.L for H.L = 1.1, 1.2, ... (every one a loopback address the origin
-- listens on, so each is a host of its own to the proxy's pacing); 1 = 127.0.0.1 only.
-- OFFSET: where in the cycle this wrk starts (two wrk runs side by side share hosts).
-- At the end one machine-readable line is printed:
--   RESULT {"requests":..,"duration_us":..,"p50_us":..,...}

local port = os.getenv("ORIGIN_PORT")
local hosts = tonumber(os.getenv("HOSTS") or "1")
local offset = tonumber(os.getenv("OFFSET") or "0")

wrk.headers["User-Agent"] = "fleetbench/1.0"

local reqs = {}
local n = 0

local function host(i)
   if hosts == 1 then
      return "127.0.0.1"
   end
   return string.format("127.0.%d.%d", 1 + math.floor(i / 250), 1 + i % 250)
end

function init(args)
   for i = 0, hosts - 1 do
      local url = string.format("http://%s:%s/page", host(i), port)
      reqs[i + 1] = wrk.format("GET", url)
   end
   n = offset
end

function request()
   n = n + 1
   return reqs[(n % hosts) + 1]
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'RESULT {"requests":%d,"duration_us":%d,' ..
      '"p50_us":%d,"p99_us":%d,' ..
      '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d}\n',
      summary.requests, summary.duration,
      latency:percentile(50), latency:percentile(99),
      e.connect, e.read, e.write, e.status, e.timeout))
end
