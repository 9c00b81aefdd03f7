#!/usr/bin/env bash
# secondhit against nginx, with 1 or more workers each: cache hits, pass-through,
# first sights and stored misses. Results and their history: benches/RESULTS.md.
#
# Workload: one static origin (nginx, `expires 2h`, on $ORIGIN_CPUS) holds a 1 KiB and a
# 100 KiB object, 10,000 distinct 1 KiB objects and a 1 KiB `Cache-Control: no-store`
# answer. For each N in $WORKERS, in front of it, on the first N CPUs of $PROXY_CPUS, run
#   - nginx: N worker processes (one per CPU), `proxy_cache` (use_temp_path=off,
#     sendfile on, tcp_nopush off, access log off), and `proxy_pass` without a cache for
#     the pass-through and first-sight cases;
#   - secondhit: `server.workers = N`, `admission.policy = "always"`, access log off,
#     level warn; beside it four more secondhit instances for the cases below.
# Every cache is warmed (every object requested until it is a hit), then
# `wrk -t$T -c$C -d$DURATION --latency` on $LOAD_CPUS runs each case, alternating nginx
# and secondhit, $ROUNDS times; T = min(2N, the number of $LOAD_CPUS), C = 64 N. The table
# shows, per N, medians of req/s, p50 and p99, and of each proxy's CPU time per request
# ("cpu us": user + system time of nginx's workers or of the secondhit process over the
# run, divided by the requests wrk completed; "usr us": the user-space part of it);
# secondhit's ratio to nginx in req/s and in
# requests per CPU second ("per-core": nginx's cpu us over secondhit's, which does not
# depend on whether wrk could keep the proxy busy); and secondhit's thread count during
# the last run of each case. A first run of $RSS_SECONDS seconds of 10k-key hits, right
# after warming, reports secondhit's resident memory at its start and end.
#
# Cases: hit-1k (one 1 KiB object), hit-100k (one 100 KiB object), hit-10k-keys
# (uniformly over the 10,000 objects; a wrk Lua script picks the path), hit-10k-files
# (the same against a secondhit with its memory tier off, cache.memory_size = "0", so
# every hit reads its file), pass-1k (no-store, so neither proxy stores it),
# first-sight-1k (a new URL on every request through a secondhit with the default
# `second-hit` policy, which stores none of them, against nginx's `proxy_pass` of the
# same URLs), miss-1k (a new URL on every request, each a 1 KiB answer that both
# proxies store: nginx's cache file, secondhit's fill under the default `cache.fsync =
# "1s"`, one syncfs a second), miss-1k-fsync (the same with `cache.fsync = true`: each
# fill and its directory fsynced, which nginx does not do), miss-1k-nofsync (with
# `cache.fsync = false`) and hit-during-fills (hits on the 1 KiB object from half the
# connections while the other half ask for new URLs that both proxies store, under the
# default `cache.fsync`: the hits' req/s and latency, and CPU per request of either
# kind; what fills do to the hits beside them).
#
# CPUs: on a machine with 16 or more CPUs the defaults are ORIGIN_CPUS="0 1",
# PROXY_CPUS="2 .. 9", LOAD_CPUS="10 .. 15" and WORKERS="1 4 8". On fewer (the 2-core VM)
# they are PROXY_CPUS="0 1", ORIGIN_CPUS="1", LOAD_CPUS="1" and WORKERS="1 2": with N = 2
# the proxy shares CPU 1 with the origin and the load, so its req/s there says little,
# and its CPU time per request is the figure to read.
#
# A/B: with BASELINE_BIN naming another secondhit build, each case also runs against a
# second set of secondhit instances started from it (same configs, same CPUs), after
# nginx and secondhit in every round, and a second table compares the two builds' CPU
# time per request, the way a change is judged on many cores in one run.
#
# Profiles: with PROFILE=1, each case gets one more run per proxy after its rounds (not
# in the medians), under `perf record -e cpu-clock -F $PROFILE_HZ` (default 999) of the
# proxy's processes, and after the tables each run's top $PROFILE_TOP (default 10)
# symbols by their own share of the samples, and its shares by binary (the kernel, the
# proxy, the C library). cpu-clock, not the hardware cycle counter, so it works on a VM.
# PROFILE_CASES limits the profiled runs to those cases (default: every case run).
#
# Bare hyper: with BARE_BIN naming a build of examples/bare_proxy (hyper's server and
# pooled client on one thread, nothing else), pass-1k at N = 1 also runs against it, after
# the others in every round, and a third table sets secondhit's CPU per request beside
# it: the share of a pass-through that is secondhit's own layers rather than hyper's.
#
# Needs: nginx, wrk, taskset (util-linux), python3 (to pick free ports), and perf for
# PROFILE=1 — on Debian `apt-get install nginx wrk linux-perf`. Installs nothing itself. Builds the release binary
# with cargo unless SECONDHIT_BIN names one.
#
# Files: the caches and logs live in a new directory under $TMPDIR (default /tmp),
# removed at the end. The stored-miss cases measure that filesystem as much as the
# proxies: point TMPDIR at the kind of filesystem a cache would use (a journaled ext4 or
# XFS with room for a few GiB): an ext4 without a journal (as on the 2-core VM) allocates
# inodes slowly for minutes after many files were removed, this script's own included.
#
# Run:  bash benches/vs_nginx.sh            (about 15 minutes with the defaults)
#       WORKERS=1 CASES="hit-1k pass-1k" ROUNDS=5 DURATION=10s bash benches/vs_nginx.sh
#       BASELINE_BIN=<the build before a change> bash benches/vs_nginx.sh
#       PROFILE=1 WORKERS="1 4" CASES=pass-1k ROUNDS=1 bash benches/vs_nginx.sh
#       BARE_BIN=target/release/examples/bare_proxy WORKERS=1 CASES=pass-1k bash benches/vs_nginx.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
RSS_SECONDS=${RSS_SECONDS:-60}
CASES=${CASES:-"hit-1k hit-100k hit-10k-keys hit-10k-files pass-1k first-sight-1k miss-1k miss-1k-fsync miss-1k-nofsync hit-during-fills"}
if (($(nproc) >= 16)); then
  ORIGIN_CPUS=${ORIGIN_CPUS:-"0 1"}
  PROXY_CPUS=${PROXY_CPUS:-"2 3 4 5 6 7 8 9"}
  LOAD_CPUS=${LOAD_CPUS:-"10 11 12 13 14 15"}
  WORKERS=${WORKERS:-"1 4 8"}
else
  ORIGIN_CPUS=${ORIGIN_CPUS:-"1"}
  PROXY_CPUS=${PROXY_CPUS:-"0 1"}
  LOAD_CPUS=${LOAD_CPUS:-"1"}
  WORKERS=${WORKERS:-"1 2"}
fi

cd "$(dirname "$0")/.."
for tool in nginx wrk taskset python3 ${PROFILE:+perf}; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "vs_nginx: '$tool' is not installed (Debian: apt-get install nginx wrk linux-perf)" >&2
    exit 2
  fi
done
PROFILE_HZ=${PROFILE_HZ:-999}
PROFILE_TOP=${PROFILE_TOP:-10}
PROFILE_CASES=${PROFILE_CASES:-$CASES}
read -r -a PROXY_LIST <<<"$PROXY_CPUS"
read -r -a LOAD_LIST <<<"$LOAD_CPUS"
read -r -a ORIGIN_LIST <<<"$ORIGIN_CPUS"
for n in $WORKERS; do
  if ((n > ${#PROXY_LIST[@]})); then
    echo "vs_nginx: $n workers need $n CPUs in PROXY_CPUS ($PROXY_CPUS)" >&2
    exit 2
  fi
done

if [[ -z "${SECONDHIT_BIN:-}" ]]; then
  cargo build --release --locked --quiet
  SECONDHIT_BIN=target/release/secondhit
fi
for bin in BASELINE_BIN BARE_BIN; do
  if [[ -n "${!bin:-}" && ! -x "${!bin}" ]]; then
    echo "vs_nginx: $bin (${!bin}) is not an executable file" >&2
    exit 2
  fi
done

WORK=$(mktemp -d -t secondhit-vs-nginx.XXXXXX)
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
# nginx's worker_cpu_affinity: a bit mask per CPU given, in binary, CPU 0 rightmost.
cpu_masks() { python3 -c 'import sys; print(" ".join(bin(1 << int(c))[2:] for c in sys.argv[1:]))' "$@"; }
# "0 1 2" -> "0,1,2", for taskset.
commas() {
  local IFS=,
  echo "$*"
}

# --- the origin and its content --------------------------------------------
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

# The part of an nginx config every instance shares: files named after $1, one worker
# on each of the CPUs $2.., no access log, sendfile without tcp_nopush.
nginx_preamble() {
  local name=$1
  shift
  cat <<EOF
daemon off;
worker_processes $#;
worker_cpu_affinity $(cpu_masks "$@");
pid $WORK/$name.pid;
error_log $WORK/$name-error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  sendfile on;
  tcp_nopush off;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/tmp-$name;
EOF
}

ORIGIN_PORT=$(free_port)
{
  nginx_preamble origin "${ORIGIN_LIST[@]}"
  cat <<EOF
  server {
    listen 127.0.0.1:$ORIGIN_PORT;
    root $WORK/www;
    location / { expires 2h; }
    location /pass/ { add_header Cache-Control "no-store" always; }
    # Any /m/ name is the 1 KiB object: every URL of the miss cases exists.
    location /m/ { rewrite ^ /one-1k break; expires 2h; }
  }
}
EOF
} >"$WORK/origin.conf"

cat >"$WORK/keys.lua" <<'EOF'
-- Each request names one of the 10,000 objects, uniformly at random.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/k/" .. math.random(0, 9999))
end
EOF

cat >"$WORK/miss.lua" <<'EOF'
-- Each request names a URL never asked before: <path><run prefix>-<thread>-<counter>.
local prefix, counter = "run", 0
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end
init = function(args)
  prefix = args[1] or prefix
end
request = function()
  counter = counter + 1
  return wrk.format("GET", wrk.path .. prefix .. "-" .. thread_id .. "-" .. counter)
end
EOF

mkdir -p "$WORK/tmp-origin"
taskset -c "$(commas "${ORIGIN_LIST[@]}")" nginx -c "$WORK/origin.conf" -p "$WORK" -e "$WORK/origin-error.log" &
PIDS+=($!)

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
wait_for_port "$ORIGIN_PORT"

# --- one set of proxies per worker count ------------------------------------
# A secondhit config: N workers ($1), port $2, cache directory $3, extra [cache] line $4,
# admission policy $5.
secondhit_config() {
  cat <<EOF
[server]
listen = "127.0.0.1:$2"
workers = $1
# Several proxies run side by side: the default admin port would clash, and nothing scrapes it.
admin_listen = "off"
[origin]
url = "http://127.0.0.1:$ORIGIN_PORT"
[cache]
dir = "$WORK/$3"
$4
[admission]
policy = "$5"
[log]
level = "warn"
access_log = "off"
EOF
}

# Writes nginx's and the four secondhits' configs for N workers ($1) and starts them.
start_proxies() {
  local n=$1 name
  local cpus=("${PROXY_LIST[@]:0:$1}")
  NGINX_PORT=$(free_port)
  mkdir -p "$WORK/tmp-nginx-$n" "$WORK/tmp-proxy-$n"
  {
    nginx_preamble "nginx-$n" "${cpus[@]}"
    cat <<EOF
  proxy_temp_path $WORK/tmp-proxy-$n;
  proxy_cache_path $WORK/nginx-cache-$n levels=1:2 keys_zone=bench$n:64m max_size=10g inactive=1d use_temp_path=off;
  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / {
      proxy_pass http://origin;
      proxy_cache bench$n;
      # What warming checks; secondhit sends its Cache-Status likewise.
      add_header X-Cache-Status \$upstream_cache_status;
    }
    location /pass/ { proxy_pass http://origin; }
    # First sights: new URLs forwarded uncached, as secondhit forwards a URL's first request.
    location /first/ { proxy_pass http://origin/m/; }
  }
}
EOF
  } >"$WORK/nginx-$n.conf"
  nginx -c "$WORK/nginx-$n.conf" -p "$WORK" -e "$WORK/nginx-$n-error.log" &
  NGINX_MASTER=$!
  PIDS+=("$NGINX_MASTER")
  declare -gA PORT PID
  local build bin prefix
  for build in "" ${BASELINE_BIN:+base-}; do
    bin=$SECONDHIT_BIN
    [[ -n $build ]] && bin=$BASELINE_BIN
    for name in secondhit files first fsync nofsync; do
      PORT[$build$name]=$(free_port)
    done
    prefix="$WORK/$build"
    secondhit_config "$n" "${PORT[${build}secondhit]}" "${build}cache-$n" "" always >"${prefix}secondhit-$n.toml"
    secondhit_config "$n" "${PORT[${build}files]}" "${build}files-cache-$n" 'memory_size = "0"' always >"${prefix}files-$n.toml"
    secondhit_config "$n" "${PORT[${build}first]}" "${build}first-cache-$n" "" second-hit >"${prefix}first-$n.toml"
    secondhit_config "$n" "${PORT[${build}fsync]}" "${build}fsync-cache-$n" "fsync = true" always >"${prefix}fsync-$n.toml"
    secondhit_config "$n" "${PORT[${build}nofsync]}" "${build}nofsync-cache-$n" "fsync = false" always >"${prefix}nofsync-$n.toml"
    for name in secondhit files first fsync nofsync; do
      taskset -c "$(commas "${cpus[@]}")" "$bin" serve --config "${prefix}$name-$n.toml" >"${prefix}$name-$n.log" 2>&1 &
      PID[$build$name]=$!
      PIDS+=($!)
    done
  done
  # One thread, so only for one worker.
  if [[ -n "${BARE_BIN:-}" && $n == 1 ]]; then
    PORT[bare]=$(free_port)
    taskset -c "${cpus[0]}" "$BARE_BIN" "127.0.0.1:${PORT[bare]}" "http://127.0.0.1:$ORIGIN_PORT" \
      >"$WORK/bare.log" 2>&1 &
    PID[bare]=$!
    PIDS+=($!)
  fi
  wait_for_port "$NGINX_PORT"
  for name in "${!PORT[@]}"; do wait_for_port "${PORT[$name]}"; done
  # The workers do nginx's proxying (the master supervises, the cache loader and manager
  # keep the cache's index): their CPU time counts.
  local tries
  for tries in $(seq 1 50); do
    NGINX_WORKERS=$(pgrep -P "$NGINX_MASTER" -f "worker process" | tr '\n' ' ' || true)
    (($(wc -w <<<"$NGINX_WORKERS") == n)) && return 0
    sleep 0.1
  done
  echo "vs_nginx: nginx started ${NGINX_WORKERS:-no} workers, not $n ($tries tries)" >&2
  exit 1
}

stop_proxies() {
  local pid
  for pid in "$NGINX_MASTER" "${PID[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "$NGINX_MASTER" "${PID[@]}"; do wait "$pid" 2>/dev/null || true; done
  unset PORT PID
}

# Requests every cacheable object until nginx and the hit-case secondhits (the baseline's
# too) answer from storage.
warm() {
  python3 - "$NGINX_PORT" "${PORT[secondhit]}" "${PORT[files]}" \
    ${BASELINE_BIN:+"${PORT[base-secondhit]}" "${PORT[base-files]}"} <<'PY'
import http.client, sys, time
nginx_port, secondhit_ports = int(sys.argv[1]), [int(port) for port in sys.argv[2:]]
paths = ["/one-1k", "/one-100k"] + ["/k/%d" % i for i in range(10000)]

def warm(port, is_hit):
    pending = list(paths)
    for attempt in range(20):
        # A new connection each round: with several workers, another worker may take it.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        missed = []
        for path in pending:
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                sys.exit("warming port %d: %s answered %d" % (port, path, response.status))
            if not is_hit(response):
                missed.append(path)
        conn.close()
        if not missed:
            return
        pending = missed
        time.sleep(0.2)
    sys.exit("warming port %d: %d objects never became hits" % (port, len(pending)))

warm(nginx_port, lambda r: r.getheader("X-Cache-Status") == "HIT")
for port in secondhit_ports:
    warm(port, lambda r: (r.getheader("Cache-Status") or "").startswith("secondhit; hit"))
PY
}

threads_of() { awk '/^Threads:/ {print $2}' "/proc/$1/status"; }
# The user and the system CPU time (all threads) the processes $@ have used, in clock
# ticks: "user system".
cpu_ticks_of() {
  local pid user=0 system=0 u s
  for pid in "$@"; do
    read -r u s < <(awk '{print $14, $15}' "/proc/$pid/stat")
    user=$((user + u)) system=$((system + s))
  done
  echo "$user $system"
}
CLOCK_TICKS=$(getconf CLK_TCK)
rss_kib_of() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# Prints "req/s p50_ms p99_ms cpu_us usr_us" (CPU and user CPU per request) for one wrk run with N workers ($1)
# against port $2, case $3, for $4, charging the CPU time of the processes $5...; with
# PROFILE_TO set, `perf record`s those processes into that file for the run.
run_wrk() {
  local n=$1 port=$2 case_name=$3 duration=$4
  shift 4
  local url script=() args=() ticks_before ticks_after
  local threads=$((${#LOAD_LIST[@]} < 2 * n ? ${#LOAD_LIST[@]} : 2 * n)) connections=$((64 * n))
  local fills="" fills_out=""
  case "$case_name" in
    hit-1k) url="/one-1k" ;;
    # Half the connections ask for the hot object, half for new URLs that are stored.
    hit-during-fills)
      url="/one-1k" connections=$((32 * n)) threads=$(((threads + 1) / 2)) fills_out="$WORK/wrk-fills.out"
      ;;
    hit-100k) url="/one-100k" ;;
    hit-10k-keys | hit-10k-files) url="/k/0" script=(-s "$WORK/keys.lua") ;;
    pass-1k) url="/pass/one-1k" ;;
    # A prefix of its own per run, so no run finds another's URLs stored.
    first-sight-1k | miss-1k | miss-1k-fsync | miss-1k-nofsync)
      url="/m/" script=(-s "$WORK/miss.lua") args=(-- "$port-$(date +%s%N)")
      if [[ $case_name == first-sight-1k && $port == "$NGINX_PORT" ]]; then url="/first/"; fi
      ;;
  esac
  # The caches share one filesystem, and a proxy's sync (secondhit's `cache.fsync`)
  # would also write back what the run before it left dirty: each run that writes
  # starts with nothing dirty, outside its measured time.
  case "$case_name" in
    miss-* | hit-during-fills) sync -f "$WORK" ;;
  esac
  read -r user_before system_before < <(cpu_ticks_of "$@")
  local recorder=""
  if [[ -n "${PROFILE_TO:-}" ]]; then
    perf record -q -e cpu-clock -F "$PROFILE_HZ" -p "$(commas "$@")" -o "$PROFILE_TO" \
      -- sleep "$duration" >/dev/null 2>&1 &
    recorder=$!
  fi
  if [[ -n "$fills_out" ]]; then
    taskset -c "$(commas "${LOAD_LIST[@]}")" wrk -t"$threads" -c"$connections" -d"$duration" \
      -s "$WORK/miss.lua" "http://127.0.0.1:$port/m/" -- "$port-$(date +%s%N)" >"$fills_out" &
    fills=$!
  fi
  taskset -c "$(commas "${LOAD_LIST[@]}")" wrk -t"$threads" -c"$connections" -d"$duration" --latency \
    "${script[@]}" "http://127.0.0.1:$port$url" "${args[@]}" >"$WORK/wrk.out"
  if [[ -n "$fills" ]] && ! wait "$fills"; then
    echo "vs_nginx: the fills' wrk failed for $case_name on port $port" >&2
  fi
  read -r user_after system_after < <(cpu_ticks_of "$@")
  if [[ -n "$recorder" ]] && ! wait "$recorder"; then
    echo "vs_nginx: perf record failed for $case_name on port $port" >&2
  fi
  local who="secondhit on port $port"
  [[ $port == "$NGINX_PORT" ]] && who="nginx"
  python3 - "$WORK/wrk.out" "$((user_after - user_before)) $((system_after - system_before))" \
    "$CLOCK_TICKS" "$case_name, $who" $fills_out <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# With a second wrk's output (the fills of hit-during-fills): its requests share the CPU.
others = [open(path).read() for path in sys.argv[5:]]
def ms(label):
    m = re.search(r"^\s*%s\s+([\d.]+)(us|ms|s)\s*$" % label, text, re.M)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
requests = sum(int(re.search(r"(\d+) requests in", t).group(1)) for t in [text] + others)
for t in [text] + others:
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", t)
    if errors:
        # Reported, not fatal: with 2 workers nginx answered a few of ~58,000 stored
        # misses with an error status (benches/RESULTS.md, 2026-11-27).
        print("wrk saw %s error responses (%s)" % (errors.group(1), sys.argv[4]), file=sys.stderr)
user, system = (int(x) * 1e6 / int(sys.argv[3]) / max(requests, 1) for x in sys.argv[2].split())
print("%.0f %.2f %.2f %.2f %.2f" % (rps, ms("50%"), ms("99%"), user + system, user))
PY
}

RESULTS="$WORK/results"
: >"$RESULTS"
RSS_LINES=()
for n in $WORKERS; do
  start_proxies "$n"
  warm
  # On the warmed cache: the resident memory over $RSS_SECONDS s of 10k-key hits.
  rss_start=$(rss_kib_of "${PID[secondhit]}")
  run_wrk "$n" "${PORT[secondhit]}" hit-10k-keys "${RSS_SECONDS}s" "${PID[secondhit]}" >/dev/null
  RSS_LINES+=("$n $rss_start $(rss_kib_of "${PID[secondhit]}")")
  for case_name in $CASES; do
    name=secondhit
    case "$case_name" in
      hit-10k-files) name=files ;;
      first-sight-1k) name=first ;;
      miss-1k-fsync) name=fsync ;;
      miss-1k-nofsync) name=nofsync ;;
    esac
    for round in $(seq 1 "$ROUNDS"); do
      # shellcheck disable=SC2086 # one PID per nginx worker
      nginx_row=$(run_wrk "$n" "$NGINX_PORT" "$case_name" "$DURATION" $NGINX_WORKERS)
      secondhit_row=$(run_wrk "$n" "${PORT[$name]}" "$case_name" "$DURATION" "${PID[$name]}")
      echo "$n $case_name nginx $nginx_row -" >>"$RESULTS"
      echo "$n $case_name secondhit $secondhit_row $(threads_of "${PID[$name]}")" >>"$RESULTS"
      # Each round's figures as they come (req/s p50 p99 cpu-us usr-us), so a run cut short
      # still shows what it measured.
      echo "  N=$n $case_name round $round/$ROUNDS: nginx $nginx_row, secondhit $secondhit_row" >&2
      if [[ -n "${BASELINE_BIN:-}" ]]; then
        baseline_row=$(run_wrk "$n" "${PORT[base-$name]}" "$case_name" "$DURATION" "${PID[base-$name]}")
        echo "$n $case_name baseline $baseline_row $(threads_of "${PID[base-$name]}")" >>"$RESULTS"
        echo "  N=$n $case_name round $round/$ROUNDS: baseline $baseline_row" >&2
      fi
      if [[ $case_name == pass-1k && -n "${PID[bare]:-}" ]]; then
        bare_row=$(run_wrk "$n" "${PORT[bare]}" "$case_name" "$DURATION" "${PID[bare]}")
        echo "$n $case_name bare $bare_row $(threads_of "${PID[bare]}")" >>"$RESULTS"
        echo "  N=$n $case_name round $round/$ROUNDS: bare hyper $bare_row" >&2
      fi
    done
    if [[ -n "${PROFILE:-}" && " $PROFILE_CASES " == *" $case_name "* ]]; then
      # shellcheck disable=SC2086 # one PID per nginx worker
      PROFILE_TO="$WORK/perf-$n-$case_name-nginx.data" run_wrk "$n" "$NGINX_PORT" "$case_name" "$DURATION" $NGINX_WORKERS >/dev/null
      PROFILE_TO="$WORK/perf-$n-$case_name-secondhit.data" run_wrk "$n" "${PORT[$name]}" "$case_name" "$DURATION" "${PID[$name]}" >/dev/null
      if [[ -n "${BASELINE_BIN:-}" ]]; then
        PROFILE_TO="$WORK/perf-$n-$case_name-baseline.data" run_wrk "$n" "${PORT[base-$name]}" "$case_name" "$DURATION" "${PID[base-$name]}" >/dev/null
      fi
    fi
  done
  stop_proxies
done

python3 - "$RESULTS" "$RSS_SECONDS" "${RSS_LINES[@]}" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
keys = []
for row in rows:
    if (row[0], row[1]) not in keys:
        keys.append((row[0], row[1]))
def med(n, case, server, column):
    return statistics.median(
        float(r[column]) for r in rows if r[0] == n and r[1] == case and r[2] == server)
print("N  case             nginx req/s   p50 ms   p99 ms  cpu us  usr us   secondhit req/s"
      "   p50 ms   p99 ms  cpu us  usr us   ratio  per-core   threads")
for n, case in keys:
    ng, sh = med(n, case, "nginx", 3), med(n, case, "secondhit", 3)
    ng_cpu, sh_cpu = med(n, case, "nginx", 6), med(n, case, "secondhit", 6)
    threads = [r[8] for r in rows if r[0] == n and r[1] == case and r[2] == "secondhit"][-1]
    print("%-2s %-15s %12.0f %8.2f %8.2f %7.2f %7.2f %17.0f %8.2f %8.2f %7.2f %7.2f %7.2f %9.2f %9s"
          % (n, case, ng, med(n, case, "nginx", 4), med(n, case, "nginx", 5), ng_cpu,
             med(n, case, "nginx", 7), sh, med(n, case, "secondhit", 4),
             med(n, case, "secondhit", 5), sh_cpu, med(n, case, "secondhit", 7), sh / ng,
             ng_cpu / sh_cpu, threads))
# A second build (BASELINE_BIN) or bare hyper (BARE_BIN), beside secondhit.
for other, title in (("baseline", "baseline"), ("bare", "bare hyper")):
    measured = [key for key in keys if any(
        (r[0], r[1]) == key and r[2] == other for r in rows)]
    if not measured:
        continue
    print()
    print("N  case            %15s  cpu us  usr us   secondhit req/s  cpu us  usr us"
          "   cpu change" % (title + " req/s"))
    for n, case in measured:
        other_cpu, sh_cpu = med(n, case, other, 6), med(n, case, "secondhit", 6)
        print("%-2s %-15s %15.0f %7.2f %7.2f %17.0f %7.2f %7.2f %+11.1f%%" % (
            n, case, med(n, case, other, 3), other_cpu, med(n, case, other, 7),
            med(n, case, "secondhit", 3), sh_cpu, med(n, case, "secondhit", 7),
            100.0 * (sh_cpu - other_cpu) / other_cpu))
for line in sys.argv[3:]:
    n, start, end = (int(x) for x in line.split())
    print("N=%d: secondhit RSS over %ss of 10k-key hits: %.1f MiB -> %.1f MiB (%+.1f%%)" % (
        n, sys.argv[2], start / 1024, end / 1024, 100.0 * (end - start) / start))
PY

# Each profiled run's top symbols and its shares by binary (see "Profiles" above).
if [[ -n "${PROFILE:-}" ]]; then
  for data in "$WORK"/perf-*.data; do
    [[ -e "$data" ]] || continue
    run=$(basename "$data" .data)
    run=${run#perf-}
    echo
    echo "profile N=${run%%-*} ${run#*-}: $(perf report -i "$data" --stdio 2>/dev/null | awk '/^# Samples:/ {print $3, "samples"}')"
    perf report -i "$data" --no-children --sort dso --stdio 2>/dev/null |
      awk '/^ +[0-9.]+%/ && n < 4 {out = out (n++ ? ", " : "") $1 " " $2} END {print "  by binary: " out}'
    perf report -i "$data" --no-children --sort sym --stdio 2>/dev/null |
      awk -v top="$PROFILE_TOP" '/^ +[0-9.]+%/ && n++ < top {print substr($0, 1, 110)}'
  done
fi
