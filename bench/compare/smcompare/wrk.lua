-- bench/compare's script for wrk (--client wrk; see clients.py):
--
--   wrk -t1 -c256 -d5s -s wrk.lua http://127.0.0.1:PORT/plaintext -- DEPTH
--
-- DEPTH > 1 pipelines: every write carries DEPTH requests, built once with
-- wrk.format (method, path and Host from the URL) and returned as one
-- buffer by request(). wrk counts the requests in that buffer at start and
-- sends a connection's next batch only when all DEPTH responses of the last
-- one are parsed, so "requests" counts responses (TechEmpower's
-- pipeline.lua works the same way). DEPTH 1 leaves wrk's own request path.
--
-- done() prints wrk's summary as one line, "sm-wrk {json}", which compare
-- parses instead of wrk's text: the duration in microseconds, requests,
-- errors by class and the latency percentiles compare's curve uses.

local depth = 1

init = function(args)
  if args[1] ~= nil then
    depth = tonumber(args[1])
    if depth == nil or depth < 1 then
      error("wrk.lua: DEPTH must be a positive integer, got '" .. tostring(args[1]) .. "'")
    end
  end
  if depth > 1 then
    local r = {}
    for i = 1, depth do
      r[i] = wrk.format(nil, nil)
    end
    local batch = table.concat(r)
    request = function()
      return batch
    end
  end
end

-- (not 100: wrk's percentile(100) is 0, its rank one past the last sample;
-- the maximum is latency.max.)
local points = {10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999}

done = function(summary, latency, requests)
  local ps = {}
  for i, p in ipairs(points) do
    ps[i] = string.format("[%g,%d]", p, latency:percentile(p))
  end
  local e = summary.errors
  io.write(string.format(
    'sm-wrk {"duration_us":%d,"requests":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency":{"min":%d,"max":%d,"mean":%.3f,"stdev":%.3f,"percentiles":[%s]}}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean, latency.stdev, table.concat(ps, ",")))
end
