-- HTTP/1.1 pipelining for wrk: every write carries DEPTH requests.
--
--   wrk -t1 -c256 -d6s -s pipeline.lua http://127.0.0.1:PORT/plaintext -- 16
--
-- The requests are built once with wrk.format (method, path and Host header
-- from the URL), concatenated, and returned as one buffer by request(). wrk
-- counts the requests in that buffer when it starts (cfg.pipeline) and sends
-- the next batch on a connection only after all DEPTH responses of the
-- previous one have been parsed, so each connection keeps DEPTH requests in
-- flight and "N requests" in wrk's summary counts responses, not batches.
-- This is the same scheme as TechEmpower's pipeline.lua.

local depth = 16
local batch = nil

init = function(args)
  if args[1] ~= nil then
    depth = tonumber(args[1])
    if depth == nil or depth < 1 then
      error("pipeline.lua: depth must be a positive integer, got '" .. tostring(args[1]) .. "'")
    end
  end
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format(nil, nil)
  end
  batch = table.concat(r)
end

request = function()
  return batch
end
