-- publish.lua — wrk script for hookd's outbound benchmark: each request publishes a new event
-- (POST /v1/tenants/tN/events, hookd assigns the event id) with a ~1 KB JSON payload, cycling
-- through the tenants; each wrk thread stops after its share of the events.
--   wrk -t T -c C -d 600s -s bench/publish.lua URL -- API_KEY TENANTS EVENTS_PER_THREAD BODY_BYTES
local api_key, tenants, limit, body_bytes = "bench-key", 8, 1000, 1024
local sent, answered, thread_no = 0, 0, 0

function setup(thread)
  thread_no = thread_no + 1
  thread:set("thread_no", thread_no)
end

function init(args)
  api_key = args[1] or api_key
  tenants = tonumber(args[2] or tenants)
  limit = tonumber(args[3] or limit)
  body_bytes = tonumber(args[4] or body_bytes)
  local head = '{"type":"order.created","payload":{"order":12345,"customer":"c_0001","pad":"'
  local pad = string.rep("x", math.max(0, body_bytes - #head - 3))
  wrk.method = "POST"
  wrk.body = head .. pad .. '"}}'
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. api_key
end

function request()
  sent = sent + 1
  local t = (sent + (thread_no or 0)) % tenants + 1
  return wrk.format(nil, "/v1/tenants/t" .. t .. "/events")
end

function response(status, headers, body)
  answered = answered + 1
  if answered >= limit then wrk.thread:stop() end
end
