-- wrk script for the load benchmark (bench/load.sh).
--
-- TARGET_URL (environment): when set, every request is sent in absolute form
-- ("GET http://127.0.0.1:PORT/page HTTP/1.1"), which is how a client talks to a
-- forward proxy; wrk itself connects to the address on its command line (the
-- proxy). When unset, wrk requests the path of its command-line URL directly.
-- CONN_CLOSE=1 adds "Connection: close" so wrk opens a new connection per request.
-- At the end one machine-readable line is printed:
--   RESULT {"requests":..,"duration_us":..,"p50_us":..,...}

local target = os.getenv("TARGET_URL")
local host = os.getenv("TARGET_HOST")

wrk.headers["User-Agent"] = "loadbench/1.0"
if host and host ~= "" then
   wrk.headers["Host"] = host
end
if os.getenv("CONN_CLOSE") == "1" then
   wrk.headers["Connection"] = "close"
end

local req
function init(args)
   local path = wrk.path
   if target and target ~= "" then
      path = target
   end
   req = wrk.format("GET", path)
end

function request()
   return req
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f,' ..
      '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d}\n',
      summary.requests, summary.duration, summary.bytes,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.max, latency.mean,
      e.connect, e.read, e.write, e.status, e.timeout))
end
