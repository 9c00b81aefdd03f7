#!/usr/bin/env bash
# secondhit against nginx on one core: cache hits and uncacheable pass-through.
#
# Workload: one static origin (nginx, `expires 2h`, on CPU 1) holds a 1 KiB and a
# 100 KiB object, 10,000 distinct 1 KiB objects and a 1 KiB `Cache-Control: no-store`
# answer. In front of it, on CPU 0 each, run
#   - nginx: one worker, `proxy_cache` (use_temp_path=off, sendfile on, tcp_nopush off,
#     access log off), and `proxy_pass` without a cache for the pass-through case;
#   - secondhit: `admission.policy = "always"`, access log off, level warn.
# Both caches are warmed (every object requested until it is a hit), then
# `taskset -c 1 wrk -t1 -c64 -d$DURATION --latency` runs each case, alternating
# nginx and secondhit, $ROUNDS times. The table shows medians of req/s, p50 and p99,
# and of each proxy's CPU time per request ("cpu us": user + system time of nginx's
# worker or of the secondhit process over the run, divided by the requests wrk
# completed); secondhit's ratio to nginx in req/s and in requests per CPU second
# ("per-core": nginx's cpu us over secondhit's, the hits one core would serve, which
# does not depend on whether wrk on its one core could keep the proxy busy); and
# secondhit's thread count during the last run of each case. A first run of
# $RSS_SECONDS seconds of 10k-key hits, right after warming, reports secondhit's
# resident memory at its start and end.
#
# Cases: hit-1k (one 1 KiB object), hit-100k (one 100 KiB object), hit-10k-keys
# (uniformly over the 10,000 objects; a wrk Lua script picks the path),
# hit-10k-files (the same against a second secondhit with its memory tier off,
# cache.memory_size = "0", so every hit reads its file: one read of the body from a
# file held open with its verified header, cache.open_files, default 10000), pass-1k
# (no-store, so neither proxy stores it), miss-1k (a new URL on every request, each a
# 1 KiB answer that both proxies store: nginx's cache file, secondhit's fill, fsynced
# with its default `cache.fsync = true`, which nginx does not do).
#
# Needs: nginx, wrk, taskset (util-linux), python3 (to pick free ports) — on Debian
# `apt-get install nginx wrk`. Installs nothing itself. Builds the release binary
# with cargo unless SECONDHIT_BIN names one.
#
# Run:  bash benches/vs_nginx.sh            (about 8 minutes with the defaults)
#       ROUNDS=5 DURATION=10s bash benches/vs_nginx.sh
#
# Results (also in the README, "Performance"), 2026-11-24 20:30 UTC, 2-core Xeon VM,
# nothing else running, medians of 3 alternating 10 s runs:
#   case            nginx req/s (p99, cpu us)   secondhit req/s (p99, cpu us)   ratio  per-core
#   hit-1k          111285 (1.64 ms, 8.87)      145559 (1.89 ms, 6.76)          1.31   1.31
#   hit-100k         69995 (1.46 ms, 12.64)      69229 (1.34 ms, 12.64)         0.99   1.00
#   hit-10k-keys     83143 (2.85 ms, 11.48)     116944 (1.28 ms, 8.46)          1.41   1.36
#   hit-10k-files    86320 (2.16 ms, 11.22)      87443 (2.53 ms, 11.29)         1.01   0.99
#   pass-1k          82052 (2.09 ms, 10.82)      54612 (2.16 ms, 18.01)         0.67   0.60
#   miss-1k          19873 (9.43 ms, 49.27)       5213 (35.92 ms, 180.78)       0.26   0.27
#   secondhit: 2 threads under the memory-tier and pass loads (10 with the tier off: idle
#   blocking threads of the warming fills, not yet expired; 34 under stored misses: the
#   32 blocking threads); RSS 66.4 -> 63.9 MiB (-3.7%) over 60 s of 10k-key hits.
#   At 20:06 UTC (same request path): hit-1k 1.29 (p99 1.49 vs 1.60 ms), hit-100k 1.03
#   (p99 1.56 vs 1.34 ms), 10k keys 1.36, files 1.05, pass 0.68, miss 0.27.
#   At 17:00 UTC: hit-1k 1.31 (p99 1.24 vs 1.67 ms), hit-100k 1.10, 10k keys 1.38, files
#   1.09, pass 0.67, miss 0.28.
#   At 11:25 UTC, before entry files were held open (cache.open_files): hit-1k 1.29,
#   hit-100k 1.00, 10k keys 1.41, files 0.79, pass 0.65, miss 0.27.
#   At 10:47 UTC: hit-1k 1.31, hit-100k 1.03, 10k keys 1.32, files 0.80, pass 0.61, miss 0.30.
#   Earlier the same day (08:28 UTC): hit-1k 1.37, hit-100k 0.99, 10k keys 1.37, files
#   0.79, pass 0.60; in an earlier run still: hit-1k 1.13, hit-100k 1.02, 10k keys 1.22,
#   files 0.75, pass 0.55.
#   An earlier run (before TLS, sites, CLOCK eviction, block checksums were merged):
#   hit-1k 1.25 (p99 2.74 vs 2.13 ms), hit-100k 1.05, 10k keys 1.24, files 0.79, pass 0.57.
#   Before (2026-11-23): hit-1k 1.21, hit-100k 0.90, 10k keys 1.16, files 0.79, pass 0.57;
#   before this bench's first run (issue text): 8,941 req/s for 1 KiB hits, 514 threads.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
RSS_SECONDS=${RSS_SECONDS:-60}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
CASES=${CASES:-"hit-1k hit-100k hit-10k-keys hit-10k-files pass-1k miss-1k"}

cd "$(dirname "$0")/.."
for tool in nginx wrk taskset python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "vs_nginx: '$tool' is not installed (Debian: apt-get install nginx wrk)" >&2
    exit 2
  fi
done

if [[ -z "${SECONDHIT_BIN:-}" ]]; then
  cargo build --release --locked --quiet
  SECONDHIT_BIN=target/release/secondhit
fi

WORK=$(mktemp -d /tmp/secondhit-vs-nginx.XXXXXX)
# nginx started as root serves files as an unprivileged user: let it read them.
chmod 755 "$WORK"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
[[ -n "${KEEP:-}" ]] && trap - EXIT

# A free loopback port: bind port 0 and report what the kernel chose.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ORIGIN_PORT=$(free_port)
NGINX_PORT=$(free_port)
SECONDHIT_PORT=$(free_port)
FILES_PORT=$(free_port)
# nginx's worker_cpu_affinity takes a bit mask written in binary, CPU 0 rightmost.
cpu_mask() { python3 -c "print(bin(1 << $1)[2:])"; }
PROXY_MASK=$(cpu_mask "$PROXY_CPU")
LOAD_MASK=$(cpu_mask "$LOAD_CPU")

# --- the origin's content --------------------------------------------------
mkdir -p "$WORK/www/k" "$WORK/www/pass"
head -c 1024 /dev/urandom | base64 -w0 | head -c 1024 >"$WORK/www/one-1k"
head -c 102400 /dev/urandom >"$WORK/www/one-100k"
python3 - "$WORK/www/k" <<'PY'
import os, sys
block = os.urandom(768).hex()[:1024]
for i in range(10000):
    with open(os.path.join(sys.argv[1], str(i)), "w") as f:
        f.write(block)
PY
cp "$WORK/www/one-1k" "$WORK/www/pass/one-1k"

# The part of an nginx config both instances share: one worker on CPU mask $2,
# files named after $1, no access log, sendfile without tcp_nopush.
nginx_preamble() {
  cat <<EOF
daemon off;
worker_processes 1;
worker_cpu_affinity $2;
pid $WORK/$1.pid;
error_log $WORK/$1-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush off;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/tmp-$1;
EOF
}

{ nginx_preamble origin "$LOAD_MASK"; cat <<EOF
  server {
    listen 127.0.0.1:$ORIGIN_PORT;
    root $WORK/www;
    location / { expires 2h; }
    location /pass/ { add_header Cache-Control "no-store" always; }
    # Any /m/ name is the 1 KiB object: every URL of the miss case exists.
    location /m/ { rewrite ^ /one-1k break; expires 2h; }
  }
}
EOF
} >"$WORK/origin.conf"

{ nginx_preamble nginx "$PROXY_MASK"; cat <<EOF
  proxy_temp_path $WORK/tmp-proxy;
  proxy_cache_path $WORK/nginx-cache levels=1:2 keys_zone=bench:64m max_size=10g inactive=1d use_temp_path=off;
  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / {
      proxy_pass http://origin;
      proxy_cache bench;
      # What warming checks; secondhit sends its Cache-Status likewise.
      add_header X-Cache-Status \$upstream_cache_status;
    }
    location /pass/ {
      proxy_pass http://origin;
    }
  }
}
EOF
} >"$WORK/nginx.conf"

cat >"$WORK/secondhit.toml" <<EOF
[server]
listen = "127.0.0.1:$SECONDHIT_PORT"
# Two proxies run side by side: the default admin port would clash, and nothing scrapes it.
admin_listen = "off"
[origin]
url = "http://127.0.0.1:$ORIGIN_PORT"
[cache]
dir = "$WORK/secondhit-cache"
[admission]
policy = "always"
[log]
level = "warn"
access_log = "off"
EOF

# The same proxy with no memory tier: every hit reads its file.
sed -e "s/^listen = .*/listen = \"127.0.0.1:$FILES_PORT\"/" \
  -e "s|^dir = .*|dir = \"$WORK/secondhit-files-cache\"\nmemory_size = \"0\"|" \
  "$WORK/secondhit.toml" >"$WORK/secondhit-files.toml"

cat >"$WORK/keys.lua" <<'EOF'
-- Each request names one of the 10,000 objects, uniformly at random.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/k/" .. math.random(0, 9999))
end
EOF

cat >"$WORK/miss.lua" <<'EOF'
-- Each request names a URL never asked before: /m/<the run's prefix>-<counter>.
local prefix, counter = "run", 0
init = function(args)
  prefix = args[1] or prefix
end
request = function()
  counter = counter + 1
  return wrk.format("GET", "/m/" .. prefix .. "-" .. counter)
end
EOF

mkdir -p "$WORK/tmp-origin" "$WORK/tmp-nginx" "$WORK/tmp-proxy"
nginx -c "$WORK/origin.conf" -p "$WORK" -e "$WORK/origin-error.log" &
PIDS+=($!)
nginx -c "$WORK/nginx.conf" -p "$WORK" -e "$WORK/nginx-error.log" &
NGINX_MASTER=$!
PIDS+=("$NGINX_MASTER")
taskset -c "$PROXY_CPU" "$SECONDHIT_BIN" serve --config "$WORK/secondhit.toml" >"$WORK/secondhit.log" 2>&1 &
SECONDHIT_PID=$!
PIDS+=("$SECONDHIT_PID")
taskset -c "$PROXY_CPU" "$SECONDHIT_BIN" serve --config "$WORK/secondhit-files.toml" >"$WORK/secondhit-files.log" 2>&1 &
FILES_PID=$!
PIDS+=("$FILES_PID")

wait_for_port() {
  for _ in $(seq 1 100); do
    if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "vs_nginx: nothing listens on port $1" >&2
  cat "$WORK"/*.log >&2 || true
  exit 1
}
for port in "$ORIGIN_PORT" "$NGINX_PORT" "$SECONDHIT_PORT" "$FILES_PORT"; do wait_for_port "$port"; done
# The worker does nginx's proxying (the master only supervises): its CPU time is compared.
NGINX_WORKER=$(pgrep -P "$NGINX_MASTER" | head -1)

# --- warming: request every cacheable object until both caches answer from storage --
python3 - "$NGINX_PORT" "$SECONDHIT_PORT" "$FILES_PORT" <<'PY'
import http.client, sys, time
nginx_port, secondhit_port, files_port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
paths = ["/one-1k", "/one-100k"] + ["/k/%d" % i for i in range(10000)]

def warm(port, is_hit):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    pending = list(paths)
    for attempt in range(20):
        missed = []
        for path in pending:
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                sys.exit("warming port %d: %s answered %d" % (port, path, response.status))
            if not is_hit(response):
                missed.append(path)
        if not missed:
            return
        pending = missed
        time.sleep(0.2)
    sys.exit("warming port %d: %d objects never became hits" % (port, len(pending)))

warm(nginx_port, lambda r: r.getheader("X-Cache-Status") == "HIT")
for port in (secondhit_port, files_port):
    warm(port, lambda r: (r.getheader("Cache-Status") or "").startswith("secondhit; hit"))
PY

threads_of() { awk '/^Threads:/ {print $2}' "/proc/$1/status"; }
# CPU time (user + system, all threads) a process has used, in clock ticks.
cpu_ticks_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
CLOCK_TICKS=$(getconf CLK_TCK)
rss_kib_of() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# Prints "req/s p50_ms p99_ms cpu_us_per_request" for one wrk run against the proxy
# process $4 (its CPU time over the run divided by the requests wrk completed).
run_wrk() {
  local port=$1 case_name=$2 duration=$3 pid=$4
  local url script=() args=() ticks_before ticks_after
  case "$case_name" in
    hit-1k) url="/one-1k" ;;
    hit-100k) url="/one-100k" ;;
    hit-10k-keys | hit-10k-files) url="/k/0"; script=(-s "$WORK/keys.lua") ;;
    pass-1k) url="/pass/one-1k" ;;
    # A prefix of its own per run, so no run finds another's URLs stored.
    miss-1k) url="/m/"; script=(-s "$WORK/miss.lua"); args=(-- "$pid-$(date +%s%N)") ;;
  esac
  ticks_before=$(cpu_ticks_of "$pid")
  taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNECTIONS" -d"$duration" --latency "${script[@]}" \
    "http://127.0.0.1:$port$url" "${args[@]}" >"$WORK/wrk.out"
  ticks_after=$(cpu_ticks_of "$pid")
  python3 - "$WORK/wrk.out" "$((ticks_after - ticks_before))" "$CLOCK_TICKS" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def ms(label):
    m = re.search(r"^\s*%s\s+([\d.]+)(us|ms|s)\s*$" % label, text, re.M)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
requests = int(re.search(r"(\d+) requests in", text).group(1))
errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
if errors:
    sys.exit("wrk saw %s error responses:\n%s" % (errors.group(1), text))
cpu_us = int(sys.argv[2]) * 1e6 / int(sys.argv[3]) / max(requests, 1)
print("%.0f %.2f %.2f %.2f" % (rps, ms("50%"), ms("99%"), cpu_us))
PY
}

# First, on the warmed cache: the resident memory over $RSS_SECONDS s of 10k-key hits
# (before the miss case, whose fills would make the start of this run larger).
RSS_START=$(rss_kib_of "$SECONDHIT_PID")
run_wrk "$SECONDHIT_PORT" hit-10k-keys "${RSS_SECONDS}s" "$SECONDHIT_PID" >/dev/null
RSS_END=$(rss_kib_of "$SECONDHIT_PID")

RESULTS="$WORK/results"
: >"$RESULTS"
for case_name in $CASES; do
  for round in $(seq 1 "$ROUNDS"); do
    echo "$case_name nginx $(run_wrk "$NGINX_PORT" "$case_name" "$DURATION" "$NGINX_WORKER")" >>"$RESULTS"
    port=$SECONDHIT_PORT pid=$SECONDHIT_PID
    if [[ $case_name == hit-10k-files ]]; then port=$FILES_PORT pid=$FILES_PID; fi
    echo "$case_name secondhit $(run_wrk "$port" "$case_name" "$DURATION" "$pid") $(threads_of "$pid")" >>"$RESULTS"
    echo "  $case_name round $round/$ROUNDS done" >&2
  done
done

python3 - "$RESULTS" "$RSS_START" "$RSS_END" "$RSS_SECONDS" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
cases = []
for row in rows:
    if row[0] not in cases:
        cases.append(row[0])
def med(case, server, column):
    return statistics.median(float(r[column]) for r in rows if r[0] == case and r[1] == server)
print("case            nginx req/s   p50 ms   p99 ms  cpu us   secondhit req/s   p50 ms   p99 ms  cpu us   ratio  per-core   threads")
for case in cases:
    n, s = (med(case, "nginx", 2), med(case, "secondhit", 2))
    n_cpu, s_cpu = (med(case, "nginx", 5), med(case, "secondhit", 5))
    threads = [r[6] for r in rows if r[0] == case and r[1] == "secondhit"][-1]
    print("%-14s %12.0f %8.2f %8.2f %7.2f %17.0f %8.2f %8.2f %7.2f %7.2f %9.2f %9s" % (
        case, n, med(case, "nginx", 3), med(case, "nginx", 4), n_cpu,
        s, med(case, "secondhit", 3), med(case, "secondhit", 4), s_cpu, s / n, n_cpu / s_cpu,
        threads))
start, end, secs = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
print("secondhit RSS over %ss of 10k-key hits: %.1f MiB -> %.1f MiB (%+.1f%%)" % (
    secs, start / 1024, end / 1024, 100.0 * (end - start) / start))
PY
