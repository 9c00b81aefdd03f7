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
# the last run of each case. A second table lists each proxy's rounds (the CDN mix has a
# table of its own, below): CPU per request,
# their spread ((max - min) / median) and the share of the proxy CPUs' time the
# hypervisor took in each ("steal", from /proc/stat; 0 on bare metal); a case whose
# rounds spread over 15% gets a line saying whether steal can explain it. A first run
# of $RSS_SECONDS seconds of 10k-key hits, right after warming, reports secondhit's
# resident memory at its start and end.
#
# Cases: hit-1k (one 1 KiB object), hit-100k (one 100 KiB object), hit-10k-keys
# (uniformly over the 10,000 objects; a wrk Lua script picks the path), hit-10k-files
# (the same against a secondhit with its memory tier off, cache.memory_size = "0", so
# every hit reads its file), pass-1k (no-store, so neither proxy stores it),
# pass-1k-fields (not in the default CASES: pass-1k with the ten more fields a browser
# sends, so each proxy's cost per request field shows),
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
# The CDN mix (cdn-mix, not in the default CASES: 10-25 s a replay on the 2-core VM, so
# about 2 minutes per N with 3 rounds, and each replay writes about 250 MiB to $TMPDIR's
# filesystem, which must count writes in /proc/PID/io: not a tmpfs): one trace, made
# once per script run with a fixed seed by benches/cdn_mix/trace.py ($CDN_REQUESTS requests, a
# Zipf($CDN_ZIPF) catalog of $CDN_CATALOG popular objects mixed with one-off URLs so that
# 70% of the distinct URLs are requested once, lognormal sizes of median 16 KiB and mean
# 48 KiB cut to 1 KiB .. 1 MiB, seed $CDN_SEED; sparse files at the origin), replayed
# whole once per run by wrk with benches/cdn_mix/replay.lua: each wrk thread takes every
# T-th request of the trace and sends its share in order, the next request to whichever
# of its connections is free. Each run starts a new proxy on a new, empty cache of
# $CDN_CACHE_PERCENT% of the trace's unique bytes (a directory of its own, removed only at
# the end of the script), stopped after the run: nginx with
# `proxy_cache_min_uses 2` (nginx's admit-on-second-request; proxy_cache_lock off, its
# default), secondhit with the default `second-hit` admission (and `min_free = 0`, since
# nginx keeps no disk floor), alternating, $ROUNDS times. A second table gives, per
# proxy, medians of req/s, p50 and p99, CPU per request and requests per CPU second (as
# above, but counting every process of nginx's, its cache manager's evictions included,
# and nginx's master runs on the proxy CPUs too), the request and byte hit ratios (from
# each answer's X-Cache-Status, nginx's $upstream_cache_status, or secondhit's
# Cache-Status, `hit` or `collapsed`: served without an origin request of its own;
# counted by wrk, so neither proxy logs), the bytes each proxy wrote to files during the
# run (write_bytes in /proc/PID/io of all its processes: the pages it dirtied in the page
# cache, which reach the disk unless deleted first, counted the same way for both
# whichever process or thread writes; nginx's temporary files of large uncached answers
# included, which the table counts beside it), of those the bytes that reached the disk
# ("on disk": write_bytes less cancelled_write_bytes, the pages of files deleted before
# they were written back), and the bytes of entry files in the cache
# directory at the end, and their mean and peak over the run, sampled each second (the
# cache starts empty; nginx's cache manager enforces max_size only when it wakes, at
# most every 10 s when nothing has expired, so nginx's cache stands above it between
# its passes); "spread" is (max - min) / median of the rounds' CPU per request.
# secondhit's memory tier (cache.memory_size, 64 MiB by default) holds copies of entries
# on disk only, so it adds no hits. With BASELINE_BIN, that build replays too, after
# nginx, taking turns with secondhit at going first. PROFILE does not apply to it. CDN_NGINX_CACHE_OPTIONS adds
# parameters to nginx's proxy_cache_path (e.g. "manager_files=1000"); CDN_TIMEOUT (600s)
# bounds a replay, one that never gets all its answers ends there and says so.
# CDN_SECONDHIT_CACHE_PERCENT (default $CDN_CACHE_PERCENT) sizes secondhit's cache apart
# from nginx's max_size: a replay that ends before nginx's cache manager first wakes
# leaves nginx's cache unbounded, and setting secondhit's to nginx's peak compares the
# two at equal disk. CDN_SECONDHIT_CACHE_OPTIONS adds lines to secondhit's [cache] table
# (e.g. "fsync = false": nginx never syncs its cache files, and the kernel's flusher
# threads, whose CPU no process is charged, write them back). CDN_LATENCY_LOGS=1 turns on
# both proxies' access logs in the replays and ends with a table of each proxy's request
# times by its own clock, by class (nginx: hits and misses; secondhit: hits, first sights,
# stored misses, stored misses of 256 KiB and more), over all rounds, and beside them the
# origin's header time of the forwarded ones: where the slow requests are, and whether
# they waited for the origin or inside the proxy. Writing the logs costs both proxies CPU, so such a run's CPU figures are
# not comparable with a run without them. CDN_CLIENT_TIMES=1 times each request on wrk's
# side as well (the origin then names each answer's path in an `X-Path` field, which both
# proxies store, and wrk's Lua does more work a request) and ends with a table of those
# times by class over all rounds, beside the longest wait between two answers in a
# replay: what a client saw, and which class was slow, where wrk's own histogram has no
# class. CDN_DIRTY_BACKGROUND_BYTES=<bytes> (root) sets the kernel's
# vm.dirty_background_bytes to it for the replays, and puts the old setting back after
# them: by default the kernel writes a dirty page back only 30 s after it was dirtied, so
# nginx's cache files are written back after a 4 s replay, while secondhit's
# `cache.fsync = "1s"` writes its own back within it, each second; with a few MiB here
# both proxies' files are written back during the replay.
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
#       WORKERS=1 CASES=cdn-mix ROUNDS=3 bash benches/vs_nginx.sh
#       WORKERS=1 CASES="hit-1k pass-1k" ROUNDS=5 DURATION=10s bash benches/vs_nginx.sh
#       BASELINE_BIN=<the build before a change> bash benches/vs_nginx.sh
#       PROFILE=1 WORKERS="1 4" CASES=pass-1k ROUNDS=1 bash benches/vs_nginx.sh
#       BARE_BIN=target/release/examples/bare_proxy WORKERS=1 CASES=pass-1k bash benches/vs_nginx.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
RSS_SECONDS=${RSS_SECONDS:-60}
CASES=${CASES:-"hit-1k hit-100k hit-10k-keys hit-10k-files pass-1k first-sight-1k miss-1k miss-1k-fsync miss-1k-nofsync hit-during-fills"}
CDN_REQUESTS=${CDN_REQUESTS:-60000}
CDN_CATALOG=${CDN_CATALOG:-12000}
CDN_ZIPF=${CDN_ZIPF:-0.9}
CDN_SEED=${CDN_SEED:-1}
CDN_CACHE_PERCENT=${CDN_CACHE_PERCENT:-10}
CDN_SECONDHIT_CACHE_PERCENT=${CDN_SECONDHIT_CACHE_PERCENT:-$CDN_CACHE_PERCENT}
CDN_TIMEOUT=${CDN_TIMEOUT:-600s}
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

BENCH_NAME=vs_nginx
# shellcheck source=benches/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_workdir vs-nginx

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
if [[ " $CASES " == *" cdn-mix "* ]]; then
  # "distinct once_share unique_bytes trace_bytes cache_bytes"
  python3 benches/cdn_mix/trace.py "$WORK" "$CDN_REQUESTS" "$CDN_CATALOG" "$CDN_ZIPF" \
    "$CDN_SEED" "$CDN_CACHE_PERCENT" >"$WORK/cdn-trace.info"
  read -r CDN_DISTINCT CDN_ONCE CDN_UNIQUE_BYTES CDN_TRACE_BYTES CDN_CACHE_BYTES <"$WORK/cdn-trace.info"
  CDN_SECONDHIT_CACHE_BYTES=$(awk -v u="$CDN_UNIQUE_BYTES" -v p="$CDN_SECONDHIT_CACHE_PERCENT" \
    'BEGIN {printf "%d", u * p / 100}')
  # On ext4 without a journal, creating a file looks up every inode freed in the last
  # minute, and secondhit's evictions free thousands a replay while nginx's cache manager
  # hardly evicts within one (docs/guide/bench.md, "The CDN mix").
  cdn_device=$(basename "$(findmnt -no SOURCE -T "$WORK" 2>/dev/null || true)")
  if [[ -n $cdn_device && $(cat "/sys/fs/ext4/$cdn_device/journal_task" 2>/dev/null) == "<none>" ]]; then
    echo "$BENCH_NAME: note: $WORK is on ext4 without a journal ($cdn_device): cdn-mix's file creations cost more there" >&2
  fi
fi

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
if [[ -n ${CDN_CLIENT_TIMES:-} ]]; then
  # Read by benches/cdn_mix/replay.lua to find each answer's request.
  ORIGIN_EXTRA='add_header X-Path $uri;'
fi
{
  nginx_preamble origin "${ORIGIN_LIST[@]}"
  origin_server "$ORIGIN_PORT"
  echo "}"
} >"$WORK/origin.conf"

# The fields a browser sends with a request for a page (Firefox's, less cookies), for
# pass-1k-fields: a proxy's work per field shows beside the one `Host` wrk sends.
BROWSER_FIELDS=(
  -H "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
  -H "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
  -H "Accept-Language: en-US,en;q=0.5"
  -H "Accept-Encoding: gzip, deflate, br"
  -H "Referer: http://bench.test/index.html"
  -H "Sec-Fetch-Dest: document"
  -H "Sec-Fetch-Mode: navigate"
  -H "Sec-Fetch-Site: same-origin"
  -H "Upgrade-Insecure-Requests: 1"
  -H "Priority: u=0, i"
)

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

wait_for_port "$ORIGIN_PORT"

# --- one set of proxies per worker count ------------------------------------
# A secondhit config: N workers ($1), port $2, cache directory $3, extra [cache] line $4,
# admission policy $5, access log $6 (a file; default none).
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
access_log = "${6:-off}"
access_format = '\$request_time "\$cache_status" \$body_bytes_sent \$upstream_header_time'
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
# Prints "steal total": the ticks the hypervisor took from CPUs $1... (steal, /proc/stat's
# eighth count), and all their ticks, so far.
steal_ticks_of() {
  local cpus=" $* "
  awk -v cpus="$cpus" '$1 ~ /^cpu[0-9]+$/ && index(cpus, " " substr($1, 4) " ") {
    for (i = 2; i <= NF; i++) total += $i
    steal += $9
  } END { print steal + 0, total + 0 }' /proc/stat
}
rss_kib_of() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# Prints "req/s p50_ms p99_ms cpu_us usr_us steal_%" (CPU and user CPU per request, and the
# share of the proxy CPUs' time the hypervisor took) for one wrk run with N workers ($1)
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
    pass-1k-fields) url="/pass/one-1k" script=("${BROWSER_FIELDS[@]}") ;;
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
  read -r steal_before all_before < <(steal_ticks_of "${PROXY_LIST[@]:0:$n}")
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
  read -r steal_after all_after < <(steal_ticks_of "${PROXY_LIST[@]:0:$n}")
  if [[ -n "$recorder" ]] && ! wait "$recorder"; then
    echo "vs_nginx: perf record failed for $case_name on port $port" >&2
  fi
  local who="secondhit on port $port"
  [[ $port == "$NGINX_PORT" ]] && who="nginx"
  python3 - "$WORK/wrk.out" "$((user_after - user_before)) $((system_after - system_before))" \
    "$CLOCK_TICKS" "$case_name, $who" "$((steal_after - steal_before)) $((all_after - all_before))" \
    $fills_out <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# With a second wrk's output (the fills of hit-during-fills): its requests share the CPU.
others = [open(path).read() for path in sys.argv[6:]]
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
stolen, ticks = (int(x) for x in sys.argv[5].split())
steal = 100.0 * stolen / max(ticks, 1)
print("%.0f %.2f %.2f %.2f %.2f %.1f" % (rps, ms("50%"), ms("99%"), user + system, user, steal))
PY
}

# --- the CDN mix: a new proxy on an empty cache for each replay ---------------
# nginx's config for the CDN mix: N workers ($1) on port $2, cache directory $3 of
# $CDN_CACHE_BYTES, admitting on a key's second request.
cdn_nginx_config() {
  local n=$1 port=$2 dir=$3
  nginx_preamble cdn-nginx "${PROXY_LIST[@]:0:$n}"
  cat <<EOF
  proxy_temp_path $WORK/tmp-cdn-proxy;
  log_format cdnlatency '\$request_time \$upstream_cache_status \$body_bytes_sent \$upstream_header_time';
  proxy_cache_path $dir levels=1:2 keys_zone=cdn:32m max_size=$CDN_CACHE_BYTES inactive=1d use_temp_path=off ${CDN_NGINX_CACHE_OPTIONS:-};
  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$port;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / {
      proxy_pass http://origin;
      proxy_cache cdn;
      # Stored on its second request, as secondhit's second-hit admission stores.
      proxy_cache_min_uses 2;
      # Counted by wrk (benches/cdn_mix/replay.lua): no access log to write, unless asked.
      add_header X-Cache-Status \$upstream_cache_status;
      ${CDN_NGINX_ACCESS_LOG:-}
    }
  }
}
EOF
}

# Sums field $1 of /proc/PID/$2 ("stat": a field number; "io": a line's name) over the
# processes $3...
proc_sum() {
  local field=$1 file=$2 pid total=0 value
  shift 2
  for pid in "$@"; do
    if [[ $file == stat ]]; then
      value=$(awk -v f="$field" '{print $f}' "/proc/$pid/stat")
    else
      value=$(awk -v f="$field:" '$1 == f {print $2}' "/proc/$pid/io")
    fi
    total=$((total + value))
  done
  echo "$total"
}

# One replay of the CDN trace through proxy $2 (nginx, secondhit or baseline) with N
# workers ($1), on a new, empty cache, round $3. Prints "req/s p50_ms p99_ms cpu_us
# usr_us hit_% byte_hit_% written_bytes stored_bytes mean_stored_bytes peak_stored_bytes
# collapsed nginx_temp_files written_less_cancelled_bytes steal_%" (steal: the share of the
# proxy CPUs' time the hypervisor took during the replay).
cdn_run() {
  local n=$1 who=$2 round=$3
  local cpus=("${PROXY_LIST[@]:0:$1}") port dir pids=() master="" bin tries
  local threads=$((${#LOAD_LIST[@]} < 2 * n ? ${#LOAD_LIST[@]} : 2 * n)) connections=$((64 * n))
  port=$(free_port)
  # A directory of its own for each round, removed only with $WORK at the end: deleting a
  # round's thousands of entries just before the next round made that round's file
  # creations pass over them where ext4 has no journal (see the note printed at the start).
  dir="$WORK/cdn-cache-$who-$n-$round"
  # Each replay's access log, with CDN_LATENCY_LOGS (read at the end of the script).
  local latency_log="" CDN_NGINX_ACCESS_LOG=""
  if [[ -n ${CDN_LATENCY_LOGS:-} ]]; then
    latency_log="$WORK/cdn-latency-$n-$who-$round.log"
    CDN_NGINX_ACCESS_LOG="access_log $latency_log cdnlatency;"
  fi
  rm -rf "$WORK/cdn-nginx-error.log"
  if [[ $who == nginx ]]; then
    mkdir -p "$WORK/tmp-cdn-nginx" "$WORK/tmp-cdn-proxy"
    cdn_nginx_config "$n" "$port" "$dir" >"$WORK/cdn-nginx.conf"
    # The master and the cache manager on the proxy's CPUs too, as secondhit's threads are.
    taskset -c "$(commas "${cpus[@]}")" nginx -c "$WORK/cdn-nginx.conf" -p "$WORK" \
      -e "$WORK/cdn-nginx-error.log" &
    master=$!
    PIDS+=("$master")
    wait_for_port "$port"
    # The workers and the cache manager (it evicts); the cache loader has nothing to load.
    for tries in $(seq 1 50); do
      mapfile -t pids < <(pgrep -P "$master" -f "worker process|cache manager" || true)
      ((${#pids[@]} == n + 1)) && break
      sleep 0.1
    done
    if ((${#pids[@]} != n + 1)); then
      echo "vs_nginx: cdn-mix: nginx started ${#pids[@]} workers and cache managers, not $((n + 1))" >&2
      exit 1
    fi
    pids+=("$master")
  else
    bin=$SECONDHIT_BIN
    [[ $who == baseline ]] && bin=$BASELINE_BIN
    secondhit_config "$n" "$port" "cdn-cache-$who-$n-$round" "max_size = $CDN_SECONDHIT_CACHE_BYTES
min_free = 0
${CDN_SECONDHIT_CACHE_OPTIONS:-}" second-hit "$latency_log" >"$WORK/cdn-$who.toml"
    taskset -c "$(commas "${cpus[@]}")" "$bin" serve --config "$WORK/cdn-$who.toml" \
      >"$WORK/cdn-$who.log" 2>&1 &
    pids=($!)
    PIDS+=($!)
    wait_for_port "$port"
  fi
  # Nothing dirty left by the run before (secondhit's syncfs would write it back).
  sync -f "$WORK"
  local user_before system_before written_before cancelled_before manager=() manager_before=0
  # nginx's cache manager, whose CPU is in the total, apart: it evicts in bursts, and a
  # round's spread is read beside it.
  [[ -n $master ]] && mapfile -t manager < <(pgrep -P "$master" -f "cache manager" || true)
  ((${#manager[@]})) && manager_before=$(($(proc_sum 14 stat "${manager[@]}") + $(proc_sum 15 stat "${manager[@]}")))
  user_before=$(proc_sum 14 stat "${pids[@]}")
  system_before=$(proc_sum 15 stat "${pids[@]}")
  written_before=$(proc_sum write_bytes io "${pids[@]}")
  cancelled_before=$(proc_sum cancelled_write_bytes io "${pids[@]}")
  rm -f "$WORK/cdn-done-"*
  # The entry files: nginx's level directories, secondhit's objects/ (not its filter state).
  local entries=$dir/objects
  [[ -n $master ]] && entries=$dir
  # Their bytes each second, beside wrk: nginx's cache manager evicts at most every 10 s,
  # so the peak shows how far above max_size its cache stood.
  taskset -c "$(commas "${LOAD_LIST[@]}")" bash -c 'while sleep 1; do
      find "$1" -type f -printf "%s\n" 2>/dev/null | awk "{s += \$1} END {print s + 0}"
    done' _ "$entries" >"$WORK/cdn-stored.samples" &
  local sampler=$! steal_before all_before steal_after all_after
  PIDS+=("$sampler")
  read -r steal_before all_before < <(steal_ticks_of "${cpus[@]}")
  taskset -c "$(commas "${LOAD_LIST[@]}")" wrk -t"$threads" -c"$connections" -d"$CDN_TIMEOUT" \
    --timeout 10s --latency -s benches/cdn_mix/replay.lua "http://127.0.0.1:$port/" \
    -- "$WORK/cdn-trace.txt" "$threads" "$WORK/cdn-done-" ${CDN_CLIENT_TIMES:+"$WORK/cdn-times-"} >"$WORK/wrk.out"
  read -r steal_after all_after < <(steal_ticks_of "${cpus[@]}")
  local times
  for times in "$WORK"/cdn-times-*; do
    [[ -e $times ]] && mv "$times" "$WORK/cdn-client-$n-$who-$round-${times##*-}.txt"
  done
  kill "$sampler"
  wait "$sampler" 2>/dev/null || true
  local user system written cancelled stored mean peak temp_files=0
  user=$(($(proc_sum 14 stat "${pids[@]}") - user_before))
  system=$(($(proc_sum 15 stat "${pids[@]}") - system_before))
  written=$(($(proc_sum write_bytes io "${pids[@]}") - written_before))
  cancelled=$(($(proc_sum cancelled_write_bytes io "${pids[@]}") - cancelled_before))
  stored=$(find "$entries" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  # "mean peak" of the samples and the end.
  read -r mean peak < <(echo "$stored" | cat "$WORK/cdn-stored.samples" - |
    awk '{s += $1; n++; if ($1 > m) m = $1} END {printf "%d %d\n", s / n, m}')
  if ((${#manager[@]})); then
    local manager_ticks
    manager_ticks=$(($(proc_sum 14 stat "${manager[@]}") + $(proc_sum 15 stat "${manager[@]}") - manager_before))
    awk -v t="$manager_ticks" -v hz="$CLOCK_TICKS" -v r="$(awk '/ requests in /{print $1}' "$WORK/wrk.out")" \
      -v who="$who, N=$n, round $round" 'BEGIN {
        printf "  %s: the cache manager took %.2f cpu us a request of the total\n", who, t * 1e6 / hz / (r > 0 ? r : 1)
      }' >&2
  fi
  if [[ -n $master ]]; then
    kill "$master"
    wait "$master" 2>/dev/null || true
    temp_files=$(grep -c "buffered to a temporary file" "$WORK/cdn-nginx-error.log" || true)
  else
    kill "${pids[0]}"
    wait "${pids[0]}" 2>/dev/null || true
  fi
  python3 - "$WORK/wrk.out" "$user $system" "$CLOCK_TICKS" "$written $stored $mean $peak $temp_files $cancelled" \
    "$who, N=$n, round $round" "$((steal_after - steal_before)) $((all_after - all_before))" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def ms(label):
    m = re.search(r"^\s*%s\s+([\d.]+)(us|ms|s)\s*$" % label, text, re.M)
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
requests = int(re.search(r"(\d+) requests in", text).group(1))
expected, answered, hits, collapsed, body, hit_body, failed = (
    int(x) for x in re.search(r"^cdn-mix tally: (.*)$", text, re.M).group(1).split())
if answered != expected or failed:
    print("vs_nginx: cdn-mix (%s): %d of %d requests answered, %d not 200; wrk: %s"
          % (sys.argv[5], answered, expected, failed,
             " ".join(re.findall(r"^\s*(Socket errors.*|Non-2xx.*)$", text, re.M))),
          file=sys.stderr)
user, system = (int(x) * 1e6 / int(sys.argv[3]) / max(requests, 1) for x in sys.argv[2].split())
written, stored, mean, peak, temp_files, cancelled = sys.argv[4].split()
stolen, ticks = (int(x) for x in sys.argv[6].split())
print("%.0f %.2f %.2f %.2f %.2f %.2f %.2f %s %s %s %s %d %s %d %.1f" % (
    rps, ms("50%"), ms("99%"), user + system, user, 100.0 * hits / max(answered, 1),
    100.0 * hit_body / max(body, 1), written, stored, mean, peak, collapsed, temp_files,
    int(written) - int(cancelled), 100.0 * stolen / max(ticks, 1)))
PY
}

# The secondhit builds of round $1 in the order they run: with a baseline, the two take
# turns going first, since the one run first in a round measured a few per cent more in
# some cases, whichever build it was (benches/RESULTS.md, "the order bias of hit-100k").
builds_in_turn() {
  if [[ -z "${BASELINE_BIN:-}" ]]; then
    echo secondhit
  elif (($1 % 2 == 1)); then
    echo secondhit baseline
  else
    echo baseline secondhit
  fi
}

# $ROUNDS replays per proxy, alternating, for N workers ($1), into $CDN_RESULTS.
# CDN_DIRTY_BACKGROUND_BYTES, for the replays: the old settings are kept here and put
# back by usual_writeback, on any exit too.
WRITEBACK_SAVED=()
early_writeback() {
  [[ -z ${CDN_DIRTY_BACKGROUND_BYTES:-} ]] && return 0
  WRITEBACK_SAVED=("$(cat /proc/sys/vm/dirty_background_bytes)" "$(cat /proc/sys/vm/dirty_background_ratio)")
  trap 'usual_writeback; [[ -n "${KEEP:-}" ]] || bench_cleanup' EXIT
  if ! echo "$CDN_DIRTY_BACKGROUND_BYTES" >/proc/sys/vm/dirty_background_bytes; then
    echo "vs_nginx: cannot set vm.dirty_background_bytes to $CDN_DIRTY_BACKGROUND_BYTES (CDN_DIRTY_BACKGROUND_BYTES needs root)" >&2
    exit 1
  fi
}

usual_writeback() {
  ((${#WRITEBACK_SAVED[@]})) || return 0
  # Writing one of the pair zeroes the other: bytes if they were set, else the ratio.
  if ((WRITEBACK_SAVED[0] > 0)); then
    echo "${WRITEBACK_SAVED[0]}" >/proc/sys/vm/dirty_background_bytes
  else
    echo "${WRITEBACK_SAVED[1]}" >/proc/sys/vm/dirty_background_ratio
  fi
  WRITEBACK_SAVED=()
}

cdn_rounds() {
  local n=$1 round who row
  for round in $(seq 1 "$ROUNDS"); do
    for who in nginx $(builds_in_turn "$round"); do
      row=$(cdn_run "$n" "$who" "$round")
      echo "$n $who $row" >>"$CDN_RESULTS"
      echo "  N=$n cdn-mix round $round/$ROUNDS: $who $row" >&2
    done
  done
}

RESULTS="$WORK/results"
CDN_RESULTS="$WORK/cdn-results"
: >"$RESULTS"
: >"$CDN_RESULTS"
RSS_LINES=()
for n in $WORKERS; do
  start_proxies "$n"
  # The CDN mix starts proxies of its own: warming and the RSS run are for the others.
  if [[ " $CASES " != " cdn-mix " ]]; then
    warm
    # On the warmed cache: the resident memory over $RSS_SECONDS s of 10k-key hits.
    rss_start=$(rss_kib_of "${PID[secondhit]}")
    run_wrk "$n" "${PORT[secondhit]}" hit-10k-keys "${RSS_SECONDS}s" "${PID[secondhit]}" >/dev/null
    RSS_LINES+=("$n $rss_start $(rss_kib_of "${PID[secondhit]}")")
  fi
  for case_name in $CASES; do
    if [[ $case_name == cdn-mix ]]; then
      early_writeback
      cdn_rounds "$n"
      usual_writeback
      continue
    fi
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
      echo "$n $case_name nginx $nginx_row -" >>"$RESULTS"
      # Each round's figures as they come (req/s p50 p99 cpu-us usr-us steal-%), so a run cut short
      # still shows what it measured.
      echo "  N=$n $case_name round $round/$ROUNDS: nginx $nginx_row" >&2
      for who in $(builds_in_turn "$round"); do
        key=$name
        [[ $who == baseline ]] && key=base-$name
        row=$(run_wrk "$n" "${PORT[$key]}" "$case_name" "$DURATION" "${PID[$key]}")
        echo "$n $case_name $who $row $(threads_of "${PID[$key]}")" >>"$RESULTS"
        echo "  N=$n $case_name round $round/$ROUNDS: $who $row" >&2
      done
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
if not rows:
    sys.exit(0)
print("N  case             nginx req/s   p50 ms   p99 ms  cpu us  usr us   secondhit req/s"
      "   p50 ms   p99 ms  cpu us  usr us   ratio  per-core   threads")
for n, case in keys:
    ng, sh = med(n, case, "nginx", 3), med(n, case, "secondhit", 3)
    ng_cpu, sh_cpu = med(n, case, "nginx", 6), med(n, case, "secondhit", 6)
    threads = [r[9] for r in rows if r[0] == n and r[1] == case and r[2] == "secondhit"][-1]
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
# Each proxy's rounds: how far their CPU per request spread, and, where over 15%, how
# much of the proxy CPUs' time the hypervisor took in them (steal), the one cause of
# spread this script can see; a spread without it has a cause it does not see.
print()
print("N  case             proxy      cpu us per round            spread  steal % per round")
wide = []
for n, case in keys:
    for server in ("nginx", "secondhit", "baseline", "bare"):
        mine = [r for r in rows if r[0] == n and r[1] == case and r[2] == server]
        if not mine:
            continue
        cpu = [float(r[6]) for r in mine]
        steal = [float(r[8]) for r in mine]
        spread = 100.0 * (max(cpu) - min(cpu)) / statistics.median(cpu)
        print("%-2s %-15s  %-9s  %-26s %5.0f%%  %s" % (
            n, case, server, " ".join("%.2f" % c for c in cpu), spread,
            " ".join("%.1f" % s for s in steal)))
        if spread > 15:
            wide.append((n, case, server, spread, max(steal)))
for n, case, server, spread, steal in wide:
    why = ("the hypervisor took up to %.1f%% of the proxy CPUs' time in a round" % steal
           if steal >= 1 else "no steal over 1%: a cause this script does not see")
    print("N=%s %s, %s: rounds spread %.0f%% (over 15%%); %s" % (n, case, server, spread, why))
for line in sys.argv[3:]:
    n, start, end = (int(x) for x in line.split())
    print("N=%d: secondhit RSS over %ss of 10k-key hits: %.1f MiB -> %.1f MiB (%+.1f%%)" % (
        n, sys.argv[2], start / 1024, end / 1024, 100.0 * (end - start) / start))
PY

# The CDN mix's table (see "The CDN mix" above).
if [[ -s "$CDN_RESULTS" ]]; then
  python3 - "$CDN_RESULTS" "$CDN_REQUESTS" "$CDN_CATALOG" "$CDN_ZIPF" "$CDN_SEED" "$CDN_DISTINCT" \
    "$CDN_ONCE" "$CDN_UNIQUE_BYTES" "$CDN_TRACE_BYTES" "$CDN_CACHE_BYTES" "$CDN_CACHE_PERCENT" "$ROUNDS" \
    "$CDN_SECONDHIT_CACHE_BYTES" "$CDN_SECONDHIT_CACHE_PERCENT" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
(requests, catalog, zipf, seed, distinct, once, unique, trace_bytes, cache, percent, rounds,
 secondhit_cache, secondhit_percent) = sys.argv[2:]
mib = lambda b: float(b) / 2**20
caches = "caches of %.1f MiB (%s%%)" % (mib(cache), percent)
if secondhit_cache != cache:
    caches = "nginx's max_size %.1f MiB (%s%%), secondhit's %.1f MiB (%s%%)" % (
        mib(cache), percent, mib(secondhit_cache), secondhit_percent)
print()
print("cdn-mix: %s requests (catalog %s, zipf %s, seed %s), %s distinct URLs, %.0f%% of them "
      "requested once, %.0f MiB unique, %.0f MiB in all; %s; medians of %s"
      % (requests, catalog, zipf, seed, distinct, 100 * float(once), mib(unique),
         mib(trace_bytes), caches, rounds))
print("N  proxy        req/s   p50 ms   p99 ms  cpu us  usr us  req/cpu-s  spread   hit %"
      "  byte hit %  written MiB  on disk MiB  stored MiB  mean MiB  peak MiB")
medians, rounds_of = {}, []
for n in dict.fromkeys(r[0] for r in rows):
    for who in dict.fromkeys(r[1] for r in rows):
        runs = [[float(x) for x in r[2:]] for r in rows if r[0] == n and r[1] == who]
        if not runs:
            continue
        m = [statistics.median(column) for column in zip(*runs)]
        medians[n, who] = m
        cpu = [run[3] for run in runs]
        rounds_of.append((n, who, cpu, [run[14] for run in runs]))
        print("%-2s %-9s %8.0f %8.2f %8.2f %7.2f %7.2f %10.0f %6.1f%% %7.2f %11.2f %12.1f %12.1f"
              " %11.1f %9.1f %9.1f" % (n, who, m[0], m[1], m[2], m[3], m[4], 1e6 / m[3],
                                       100 * (max(cpu) - min(cpu)) / m[3], m[5], m[6],
                                       mib(m[7]), mib(m[13]), mib(m[8]), mib(m[9]), mib(m[10])))
        if who == "nginx" and max(run[12] for run in runs) > 0:
            print("   (nginx buffered up to %d answers a run to temporary files: in its written MiB)"
                  % max(run[12] for run in runs))
    ng, sh = medians.get((n, "nginx")), medians.get((n, "secondhit"))
    if ng and sh:
        print("   secondhit / nginx: %.2fx the requests per CPU second, p99 %.2fx, %.2fx the bytes "
              "written (%.2fx on disk), byte hit ratio %+.2f points" % (
                  ng[3] / sh[3], sh[2] / ng[2], sh[7] / max(ng[7], 1), sh[13] / max(ng[13], 1),
                  sh[6] - ng[6]))
# Each proxy's rounds, as in the table of the other cases: a spread over 15% gets a line
# saying whether the hypervisor's steal can explain it.
print("N  proxy      cpu us per round                  steal % per round")
for n, who, cpu, steal in rounds_of:
    print("%-2s %-9s  %-33s %s" % (n, who, " ".join("%.2f" % c for c in cpu),
                                     " ".join("%.1f" % s for s in steal)))
for n, who, cpu, steal in rounds_of:
    spread = 100.0 * (max(cpu) - min(cpu)) / statistics.median(cpu)
    if spread > 15:
        why = ("the hypervisor took up to %.1f%% of the proxy CPUs' time in a round" % max(steal)
               if max(steal) >= 1 else "no steal over 1%: a cause this script does not see")
        print("N=%s cdn-mix, %s: rounds spread %.0f%% (over 15%%); %s" % (n, who, spread, why))
PY
fi

# With CDN_LATENCY_LOGS: each proxy's request times by its own clock, by class, over all
# rounds (nginx's $request_time counts whole milliseconds; secondhit's from the head's
# arrival to the last byte handed to the socket), and beside them the origin's header
# time of the forwarded ones ($upstream_header_time in both).
if [[ -n ${CDN_LATENCY_LOGS:-} ]] && compgen -G "$WORK/cdn-latency-*.log" >/dev/null; then
  python3 - "$WORK"/cdn-latency-*.log <<'PY'
import collections, os, re, sys
times = collections.defaultdict(list)
# The origin's header time of the forwarded requests (the 4th field; "-" for a hit).
origin = collections.defaultdict(list)
for path in sys.argv[1:]:
    n, who = os.path.basename(path).split("-")[2:4]
    for line in open(path):
        if who == "nginx":
            fields = line.split()
            if len(fields) < 4:
                continue
            # Several upstreams tried: "0.001, 0.002", split by the spaces too.
            ms, status, size, header = float(fields[0]) * 1000, fields[1], int(fields[2]), " ".join(fields[3:])
            kinds = ["hits" if status == "HIT" else "misses"]
        else:
            m = re.match(r'(\S+) "([^"]*)" (\d+) (\S+)', line)
            if not m:
                continue
            ms, status, size, header = float(m.group(1)) * 1000, m.group(2), int(m.group(3)), m.group(4)
            if "fwd=" not in status:
                kinds = ["hits"]
            elif "stored" in status:
                kinds = ["stored misses"] + (["stored, 256 KiB and more"] if size >= 256 * 1024 else [])
            elif "first-sight" in status:
                kinds = ["first sights"]
            else:
                kinds = ["other forwarded"]
        # nginx gives one time per upstream tried ("0.001, 0.002"); the last answered.
        header = header.split(",")[-1].strip()
        for kind in ["all"] + kinds:
            times[n, who, kind].append(ms)
            if header not in ("-", ""):
                origin[n, who, kind].append(float(header) * 1000)
def at(values, share):
    return values[min(len(values) - 1, int(share * len(values)))]
def three(values):
    if not values:
        return "%8s %8s %8s" % ("-", "-", "-")
    values.sort()
    return "%8.2f %8.2f %8.2f" % (at(values, 0.5), at(values, 0.9), at(values, 0.99))
print()
print("cdn-mix request times by each proxy's own clock (access logs on), ms; then the")
print("origin's header time (request sent to response head read) of the forwarded ones")
print("N  proxy      class                          requests      p50      p90      p99   origin p50      p90      p99")
for (n, who, kind), values in sorted(times.items()):
    print("%-2s %-9s  %-28s %10d %s   %s" % (
        n, who, kind, len(values), three(values), three(origin[n, who, kind])))
PY
fi

# With CDN_CLIENT_TIMES: each request's time on wrk's side, by class, over all rounds,
# and the longest time between two answers in a replay (a stall of the proxy shows there).
if [[ -n ${CDN_CLIENT_TIMES:-} ]] && compgen -G "$WORK/cdn-client-*.txt" >/dev/null; then
  python3 - "$WORK"/cdn-client-*.txt <<'PY'
import collections, os, sys
times = collections.defaultdict(list)
ends = collections.defaultdict(list)
unmatched = collections.Counter()
for path in sys.argv[1:]:
    n, who, round_ = os.path.basename(path).split("-")[2:5]
    for line in open(path):
        fields = line.split()
        if len(fields) < 4:
            continue
        us, size, status, end = float(fields[0]), int(fields[1]), fields[2], float(fields[3])
        ends[n, who, round_].append(end)
        if us < 0:
            unmatched[n, who] += 1
            continue
        if who == "nginx":
            kind = "hits" if status == "HIT" else "misses"
        elif "fwd=" not in status:
            kind = "hits"
        elif "stored" in status:
            kind = "stored misses"
        elif "first-sight" in status:
            kind = "first sights"
        else:
            kind = "other forwarded"
        for k in ("all", kind):
            times[n, who, k].append(us / 1000)
gaps = collections.defaultdict(list)
for (n, who, _), stamps in ends.items():
    stamps.sort()
    gaps[n, who].append(max((b - a for a, b in zip(stamps, stamps[1:])), default=0) / 1000)
def at(values, share):
    return values[min(len(values) - 1, int(share * len(values)))]
print()
print("cdn-mix request times on wrk's side (request written to last byte read), ms, all rounds;")
print("the longest wait between two answers, ms, per round")
print("N  proxy      class               requests      p50      p90      p99    p99.9   longest waits")
for (n, who, kind), values in sorted(times.items()):
    values.sort()
    waits = " ".join("%.1f" % g for g in gaps[n, who]) if kind == "all" else ""
    print("%-2s %-9s  %-16s %11d %8.2f %8.2f %8.2f %8.2f   %s" % (
        n, who, kind, len(values), at(values, 0.5), at(values, 0.9), at(values, 0.99),
        at(values, 0.999), waits))
for (n, who), count in sorted(unmatched.items()):
    print("N=%s %s: %d answers without an X-Path of a request sent, not timed" % (n, who, count))
PY
fi

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
