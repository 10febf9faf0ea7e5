-- Sends the request bodies of BODIES_FILE (one JSON document per line) round-robin, and prints
-- the run's figures as one JSON line at the end. Requests are formatted once, up front, so the
-- load generator spends its CPU on sending rather than building requests.
local requests = {}
local counter = 0

function init(args)
  local auth = os.getenv("AUTH_HEADER")
  local target = os.getenv("TARGET_PATH") or "/api/track"
  local headers = { ["Content-Type"] = "application/json" }
  if auth and auth ~= "" then headers["Authorization"] = auth end
  local proxied = os.getenv("FORWARDED_FOR") == "1"
  for line in io.lines(os.getenv("BODIES_FILE")) do
    -- Behind the shipped proxy each visitor arrives with its own X-Forwarded-For address, and
    -- keyless tracking is budgeted per address: send the one the event claims.
    if proxied then headers["X-Forwarded-For"] = string.match(line, '"ip_address":"([^"]+)"') end
    requests[#requests + 1] = wrk.format("POST", target, headers, line)
  end
  counter = math.random(1, #requests)
end

request = function()
  counter = counter + 1
  return requests[(counter % #requests) + 1]
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_us":%d,"non2xx":%d,"socket_errors":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
