-- Sends the request bodies of BODIES_FILE (one JSON document per line) round-robin, and prints
-- the run's figures as one JSON line at the end.
local bodies = {}
local path = os.getenv("BODIES_FILE")
local auth = os.getenv("AUTH_HEADER")
local target = os.getenv("TARGET_PATH") or "/api/track"
for line in io.lines(path) do bodies[#bodies + 1] = line end
local counter = 0

function setup(thread)
  thread:set("offset", math.random(1, #bodies))
end

request = function()
  counter = counter + 1
  local body = bodies[((counter + (offset or 0)) % #bodies) + 1]
  local headers = { ["Content-Type"] = "application/json" }
  if auth and auth ~= "" then headers["Authorization"] = auth end
  return wrk.format("POST", target, headers, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_us":%d,"non2xx":%d,"socket_errors":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
