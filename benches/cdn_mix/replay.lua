-- The CDN mix's trace replayed once through a proxy, for benches/vs_nginx.sh (cdn-mix).
--
--   wrk -tT -cC -d<cap> --latency -s replay.lua URL -- TRACE T MARKER [TIMES]
--
-- Thread i of T sends the trace's requests i, i+T, i+2T, ... (one path a line in TRACE)
-- in order, each to whichever of its connections is free next, and counts each answer by
-- the proxy's cache status: nginx's X-Cache-Status (HIT), secondhit's Cache-Status (hit,
-- or a miss answered from another request's fill: collapsed). Once a thread has all its
-- answers it creates MARKER<i>; the thread that finds every marker there interrupts wrk,
-- which then reports within about 0.2 s instead of at the end of -d.
--
-- With TIMES, each thread also writes TIMES<i>: a line per answer with the microseconds
-- from its request's start to its last byte, its body's bytes, its cache status (spaces
-- as underscores) and the monotonic clock at its end, in microseconds. wrk's histogram
-- has no class; this does. The origin must name each answer's path in `X-Path` (wrk
-- does not say which connection answered): the request of an answer is the earliest
-- one of that path still unanswered.

local threads = {}

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } replay_timespec;
int clock_gettime(int clock, replay_timespec *now);
]])
local timespec = ffi.new("replay_timespec")
local CLOCK_MONOTONIC = 1
local function now_us()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, timespec)
  return tonumber(timespec.tv_sec) * 1e6 + tonumber(timespec.tv_nsec) / 1e3
end
-- With TIMES: each share's path, the starts of the unanswered requests by path, the lines.
local times, paths, starts, lines = nil, {}, {}, {}

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
  if times then
    local out = assert(io.open(times .. id, "w"))
    out:write(table.concat(lines, "\n"), "\n")
    out:close()
  end
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
  thread_count, marker, times = tonumber(args[2]), args[3], args[4]
  local line = 0
  for path in io.lines(args[1]) do
    if line % thread_count == id - 1 then
      share[#share + 1] = wrk.format("GET", path)
      paths[#paths + 1] = path
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
  if times then
    -- wrk starts the request's clock right after this returns.
    local path = paths[taken]
    starts[path] = starts[path] or {}
    table.insert(starts[path], now_us())
  end
  return share[taken]
end

response = function(status, headers, body)
  answered = answered + 1
  bytes = bytes + #body
  local nginx = headers["X-Cache-Status"]
  local secondhit = headers["cache-status"] or headers["Cache-Status"] or ""
  if times then
    local ended, path = now_us(), headers["X-Path"] or headers["x-path"]
    local began = path and starts[path] and table.remove(starts[path], 1)
    local status_text = (nginx or secondhit):gsub(" ", "_")
    lines[#lines + 1] = string.format("%.1f %d %s %.0f", began and ended - began or -1, #body,
      status_text ~= "" and status_text or "-", ended)
  end
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
