-- The CDN mix's trace replayed once through a proxy, for benches/vs_nginx.sh (cdn-mix).
--
--   wrk -tT -cC -d<cap> --latency -s replay.lua URL -- TRACE T MARKER
--
-- Thread i of T sends the trace's requests i, i+T, i+2T, ... (one path a line in TRACE)
-- in order, each to whichever of its connections is free next, and counts each answer by
-- the proxy's cache status: nginx's X-Cache-Status (HIT), secondhit's Cache-Status (hit,
-- or a miss answered from another request's fill: collapsed). Once a thread has all its
-- answers it creates MARKER<i>; the thread that finds every marker there interrupts wrk,
-- which then reports within about 0.2 s instead of at the end of -d.

local threads = {}

setup = function(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

-- This thread's requests, how many a connection has claimed (delay) and taken (request).
local share, claimed, taken = {}, 0, 0
local thread_count, marker
-- Globals, so that done() reads them with thread:get.
expected, answered, hits, collapsed, bytes, hit_bytes, failed = 0, 0, 0, 0, 0, 0, 0

local function finished()
  local mark = assert(io.open(marker .. id, "w"))
  mark:close()
  for i = 1, thread_count do
    local other = io.open(marker .. i)
    if not other then
      return
    end
    other:close()
  end
  local stat = assert(io.open("/proc/self/stat"))
  local pid = stat:read("*n")
  stat:close()
  -- Only wrk's main thread ends its wait on SIGINT, and the kernel may hand a signal to
  -- any thread: signal until wrk is gone (once its threads have stopped, the main thread
  -- is the one left to take it). Not os.execute: system() ignores SIGINT while it waits.
  io.popen("while kill -INT " .. pid .. "; do sleep 0.05; done >/dev/null 2>&1 &"):close()
end

init = function(args)
  thread_count, marker = tonumber(args[2]), args[3]
  local line = 0
  for path in io.lines(args[1]) do
    if line % thread_count == id - 1 then
      share[#share + 1] = wrk.format("GET", path)
    end
    line = line + 1
  end
  expected = #share
  if expected == 0 then
    finished()
  end
end

-- wrk asks for a delay before each request: a connection claims the next request here,
-- or waits out the run once the share is claimed.
delay = function()
  if claimed >= #share then
    return 3600 * 1000
  end
  claimed = claimed + 1
  return 0
end

request = function()
  -- wrk calls this once before the run to check the request (no claim then): answer it
  -- without taking one.
  if taken >= claimed then
    return share[1] or wrk.format("GET", "/")
  end
  taken = taken + 1
  return share[taken]
end

response = function(status, headers, body)
  answered = answered + 1
  bytes = bytes + #body
  local nginx = headers["X-Cache-Status"]
  local secondhit = headers["cache-status"] or headers["Cache-Status"] or ""
  if nginx == "HIT" or secondhit:find("^secondhit; hit") then
    hits = hits + 1
    hit_bytes = hit_bytes + #body
  elseif secondhit:find("; collapsed") then
    collapsed = collapsed + 1
    hits = hits + 1
    hit_bytes = hit_bytes + #body
  end
  if status ~= 200 then
    failed = failed + 1
  end
  if answered == expected then
    finished()
  end
end

done = function()
  local sum = {}
  for _, name in ipairs({ "expected", "answered", "hits", "collapsed", "bytes", "hit_bytes", "failed" }) do
    local total = 0
    for _, thread in ipairs(threads) do
      total = total + thread:get(name)
    end
    sum[#sum + 1] = string.format("%.0f", total)
  end
  io.write("cdn-mix tally: " .. table.concat(sum, " ") .. "\n")
end
