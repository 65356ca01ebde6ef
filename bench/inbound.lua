-- inbound.lua — wrk script for hookd's inbound benchmark: POST /in/{source} with Stripe-style
-- events pre-signed by bench/inbound_sign (wrk's LuaJIT has no HMAC).
--   wrk -t T -c C -d D -s bench/inbound.lua URL -- SIGNED_FILE MODE T [IDS_OUT]
-- SIGNED_FILE: bench/inbound_sign's output (timestamp, body prefix, body suffix, "id sig" lines).
-- MODE: "new"   each request a new event: thread k of T sends lines k, k+T, k+2T, ... once each
--               and stops when its share is used up (so no id is ever sent twice);
--       "dup"   every request repeats the first line's event (the duplicate path);
--       "cycle" lines in turn, again and again (the nginx ceiling: the receiver does not care).
-- T: wrk's thread count again (a thread's script cannot see it).
-- IDS_OUT: when given, each thread appends the inbox_id of every 200 answer to IDS_OUT.<k>, so
-- the store can be checked afterwards against what was acknowledged.
-- done() prints one line "inbound_lua ok=N dup_answers=N new_answers=N other=N exhausted=N".
local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("thread_no", counter)
  table.insert(threads, thread)
end

local ids, sigs, n, i, ts, prefix, suffix, mode, out = {}, {}, 0, 0, "", "", "", "new", nil
ok, dup_answers, new_answers, other, exhausted = 0, 0, 0, 0, 0

function init(args)
  local file, nthreads = args[1], tonumber(args[3] or "1")
  mode = args[2] or "new"
  local f = assert(io.open(file, "r"))
  ts = f:read("*l")
  prefix = f:read("*l")
  suffix = f:read("*l")
  local k, line = 0, nil
  for line in f:lines() do
    if mode == "dup" and n == 1 then break end
    if mode == "dup" or k % nthreads == thread_no - 1 then
      local id, sig = line:match("^(%S+) (%S+)$")
      n = n + 1
      ids[n] = id
      sigs[n] = sig
    end
    k = k + 1
  end
  f:close()
  if args[4] and args[4] ~= "-" then
    out = assert(io.open(args[4] .. "." .. thread_no, "w"))
    out:setvbuf("full", 1048576)
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["User-Agent"] = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"
end

function request()
  if mode == "dup" then
    i = 1
  else
    i = i + 1
    if i > n then
      if mode == "new" then
        exhausted = 1
        wrk.thread:stop()
        i = n -- a last duplicate may leave while the thread stops; the store check counts it
      else
        i = 1
      end
    end
  end
  wrk.headers["Stripe-Signature"] = "t=" .. ts .. ",v1=" .. sigs[i]
  return wrk.format(nil, nil, nil, prefix .. ids[i] .. suffix)
end

function response(status, headers, body)
  if status == 200 then
    ok = ok + 1
    local id = body:match('"inbox_id":"([^"]+)"')
    if id then
      if body:find('"duplicate":true', 1, true) then dup_answers = dup_answers + 1
      else new_answers = new_answers + 1 end
      if out then out:write(id, "\n") end
    end
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local t = {ok = 0, dup_answers = 0, new_answers = 0, other = 0, exhausted = 0}
  for _, th in ipairs(threads) do
    for k, _ in pairs(t) do t[k] = t[k] + (tonumber(th:get(k)) or 0) end
  end
  io.write(string.format("inbound_lua ok=%d dup_answers=%d new_answers=%d other=%d exhausted=%d " ..
    "duration_s=%.3f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f\n",
    t.ok, t.dup_answers, t.new_answers, t.other, t.exhausted, summary.duration / 1e6,
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3,
    latency.max / 1e3))
end
