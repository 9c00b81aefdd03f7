#!/usr/bin/env bash
# The origin-client comparison: the same proxy front (benches/origin_clients, hyper's
# HTTP/1 server on one single-threaded runtime, like one secondhit worker) with each
# candidate HTTP/1.1 client behind it, against nginx's `proxy_pass` as the reference,
# all on one proxy CPU. Which client forwards a pass-through for the least CPU?
#
# Candidates ($CLIENTS, default all that can be built): hyper-task (hyper's
# client::conn::http1, connection future spawned: what secondhit does today),
# hyper-inline (the same, driven inside the request's task), pingora (pingora-core's
# HTTP/1 client session) and lean (crates/h1, the product's own). The binary's
# module doc (benches/origin_clients/src/main.rs) says what they share.
#
# Workload: an nginx origin on $ORIGIN_CPUS answers /pass/one-1k and any path under
# /first/ with the same 1 KiB body and `Cache-Control: no-store`, keeping connections
# open for the whole run (keepalive_timeout 1h, so no candidate meets a closed idle
# connection). In front of it, on $PROXY_CPU: nginx (1 worker, proxy_pass to a keepalive
# upstream, access log off) and one origin_clients process per candidate. Every proxy is
# checked first (status, body length, HEAD, keep-alive) and is not measured if it fails.
# Then, for each case, `wrk -t1 -c64 -d$DURATION --latency` on $LOAD_CPUS, alternating
# nginx and the candidates, $ROUNDS rounds. Cases: pass-1k (one URL) and first-sight-1k
# (a new URL every request, /first/<run>-<thread>-<counter>, by a wrk Lua script; nothing
# here caches, so it differs from pass-1k only in the URLs).
#
# The table: per case and proxy, medians over the rounds of req/s, p50 and p99, CPU time
# per request ("cpu us": user + system time of the proxy's process, or of nginx's worker,
# from utime and stime in /proc/PID/stat over the run, divided by the requests wrk
# completed) and its user-space part ("usr us"); "spread" is (max - min) / median of
# the rounds' cpu us; "vs nginx" is nginx's cpu us over the candidate's (requests per CPU
# second against nginx's); "errors" counts non-2xx answers and socket errors over all
# rounds (0 unless something is wrong). CPU per request is the figure to read: it does
# not depend on whether wrk could keep the proxy busy. Measure on a quiet machine.
#
# CPUs: with 16 or more, ORIGIN_CPUS="0 1", PROXY_CPU=2, LOAD_CPUS="10 .. 15" (as
# benches/vs_nginx.sh at N = 1); with fewer (the 2-core VM), PROXY_CPU=0, ORIGIN_CPUS="1",
# LOAD_CPUS="1": the origin and wrk share a CPU, so req/s says little there.
#
# Build statistics: BUILD_STATS=1 also prints, per feature set (none: the two hyper
# candidates; pingora; lean), the number of crates in its normal dependency tree (`cargo
# tree -e normal --prefix none`, deduplicated, the package itself included);
# BUILD_STATS=2 adds a clean release build of each, alone, in a new target directory (a
# few minutes each): its wall time and the number of crates it compiled (build scripts'
# dependencies included). Figures of a shared machine say little.
#
# Needs: nginx, wrk, taskset (util-linux), python3, cargo; the pingora candidate needs
# cmake to build (pingora-core compiles zlib-ng) — on Debian `apt-get install nginx wrk
# cmake`. Builds benches/origin_clients in release mode unless ORIGIN_CLIENTS_BIN names a
# build with the features of $CLIENTS.
#
# Run:  bash benches/origin_clients.sh                   (about 10 minutes: 2 cases x 5
#                                                          proxies x 3 rounds x 10 s + build)
#       DURATION=2s ROUNDS=1 bash benches/origin_clients.sh        (does everything run?)
#       CLIENTS="hyper-task pingora" CASES=pass-1k ROUNDS=5 bash benches/origin_clients.sh
#       BUILD_STATS=2 ROUNDS=0 bash benches/origin_clients.sh       (build figures only)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CASES=${CASES:-"pass-1k first-sight-1k"}
if (($(nproc) >= 16)); then
  ORIGIN_CPUS=${ORIGIN_CPUS:-"0 1"}
  PROXY_CPU=${PROXY_CPU:-2}
  LOAD_CPUS=${LOAD_CPUS:-"10 11 12 13 14 15"}
else
  ORIGIN_CPUS=${ORIGIN_CPUS:-"1"}
  PROXY_CPU=${PROXY_CPU:-0}
  LOAD_CPUS=${LOAD_CPUS:-"1"}
fi

cd "$(dirname "$0")/.."
PACKAGE=benches/origin_clients
if [[ -z "${CLIENTS:-}" ]]; then
  CLIENTS="hyper-task hyper-inline pingora"
  if [[ -f crates/h1/Cargo.toml ]]; then
    CLIENTS+=" lean"
  else
    echo "origin_clients: crates/h1 is missing: the lean client is left out" >&2
  fi
fi
for tool in nginx wrk taskset python3 cargo; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "origin_clients: '$tool' is not installed (Debian: apt-get install nginx wrk cmake)" >&2
    exit 2
  fi
done
read -r -a ORIGIN_LIST <<<"$ORIGIN_CPUS"
FEATURES=()
for client in $CLIENTS; do
  case "$client" in
    pingora | lean) FEATURES+=("$client") ;;
    hyper-task | hyper-inline) ;;
    *) echo "origin_clients: no client '$client'" >&2 && exit 2 ;;
  esac
done

BENCH_NAME=origin_clients
# shellcheck source=benches/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_workdir origin-clients

# --- build statistics --------------------------------------------------------
if [[ -n "${BUILD_STATS:-}" ]]; then
  echo "feature   crates (normal tree)  $([[ $BUILD_STATS == 2 ]] && echo ' compiled  clean release build')"
  for feature in none pingora lean; do
    flags=()
    [[ $feature != none ]] && flags=(--features "$feature")
    if [[ $feature == lean && ! -f crates/h1/Cargo.toml ]]; then
      echo "lean      (crates/h1 is missing)"
      continue
    fi
    crates=$(cd "$PACKAGE" && cargo tree --locked -e normal --prefix none "${flags[@]}" |
      sed 's/ (\*)$//' | sort -u | wc -l)
    line=$(printf "%-9s %21s" "$feature" "$crates")
    if [[ $BUILD_STATS == 2 ]]; then
      start=$(date +%s.%N)
      compiled=$(cd "$PACKAGE" && CARGO_TARGET_DIR="$WORK/build-$feature" \
        cargo build --release --locked "${flags[@]}" 2>&1 | grep -c '^ *Compiling ')
      seconds=$(python3 -c "import sys; print('%.0f' % (float(sys.argv[2]) - float(sys.argv[1])))" \
        "$start" "$(date +%s.%N)")
      rm -rf "$WORK/build-$feature"
      line+=$(printf " %9s %17s s" "$compiled" "$seconds")
    fi
    echo "$line"
  done
fi
((ROUNDS > 0)) || exit 0

if [[ -z "${ORIGIN_CLIENTS_BIN:-}" ]]; then
  (cd "$PACKAGE" && cargo build --release --locked --quiet ${FEATURES[@]:+--features "${FEATURES[*]}"})
  ORIGIN_CLIENTS_BIN=$PACKAGE/target/release/origin_clients
fi

# The part of an nginx config both nginx share: files named after $1, one worker on each
# of the CPUs $2.., no access log, connections kept for the whole run.
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
  keepalive_requests 1000000;
  keepalive_timeout 1h;
  client_body_temp_path $WORK/tmp-$name;
  proxy_temp_path $WORK/tmp-$name;
EOF
}

# --- the origin, the proxies -------------------------------------------------
mkdir -p "$WORK/www/pass" "$WORK/tmp-origin" "$WORK/tmp-nginx"
head -c 1024 /dev/urandom | base64 -w0 | head -c 1024 >"$WORK/www/pass/one-1k"
ORIGIN_PORT=$(free_port)
{
  nginx_preamble origin "${ORIGIN_LIST[@]}"
  cat <<EOF
  server {
    listen 127.0.0.1:$ORIGIN_PORT;
    root $WORK/www;
    location /pass/ { add_header Cache-Control "no-store" always; }
    # Any /first/ name is the 1 KiB answer: every first-sight URL exists.
    location /first/ { rewrite ^ /pass/one-1k break; add_header Cache-Control "no-store" always; }
  }
}
EOF
} >"$WORK/origin.conf"
taskset -c "$(commas "${ORIGIN_LIST[@]}")" nginx -c "$WORK/origin.conf" -p "$WORK" -e "$WORK/origin-error.log" &
PIDS+=($!)
wait_for_port "$ORIGIN_PORT"

declare -A PORT CPU_PID
PORT[nginx]=$(free_port)
{
  nginx_preamble nginx "$PROXY_CPU"
  cat <<EOF
  upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:${PORT[nginx]};
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / { proxy_pass http://origin; }
  }
}
EOF
} >"$WORK/nginx.conf"
taskset -c "$PROXY_CPU" nginx -c "$WORK/nginx.conf" -p "$WORK" -e "$WORK/nginx-error.log" &
NGINX_MASTER=$!
PIDS+=("$NGINX_MASTER")
wait_for_port "${PORT[nginx]}"
# Its worker's CPU time is nginx's: the master only waits.
for _ in $(seq 1 50); do
  CPU_PID[nginx]=$(pgrep -P "$NGINX_MASTER" -f "worker process" || true)
  [[ -n ${CPU_PID[nginx]} ]] && break
  sleep 0.1
done
for client in $CLIENTS; do
  PORT[$client]=$(free_port)
  taskset -c "$PROXY_CPU" "$ORIGIN_CLIENTS_BIN" --client "$client" \
    --listen "127.0.0.1:${PORT[$client]}" --origin "127.0.0.1:$ORIGIN_PORT" >"$WORK/$client.log" 2>&1 &
  CPU_PID[$client]=$!
  PIDS+=($!)
  wait_for_port "${PORT[$client]}"
done

# Checks that the proxy on port $1 answers as the origin does: GET of both kinds of URL
# (status 200, 1024 bytes, Via added for a candidate), HEAD (200, no body, its length),
# two requests on one connection. Prints what is wrong; fails if anything is.
check_proxy() {
  python3 - "$1" "$2" <<'PY'
import http.client, sys
port, who = int(sys.argv[1]), sys.argv[2]
wrong = []
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
for method, path in [("GET", "/pass/one-1k"), ("GET", "/first/check-1"), ("HEAD", "/pass/one-1k"),
                     ("GET", "/first/check-2"), ("HEAD", "/first/check-3")]:
    conn.request(method, path)
    response = conn.getresponse()
    body = response.read()
    expected = 0 if method == "HEAD" else 1024
    if response.status != 200 or len(body) != expected:
        wrong.append("%s %s: %d, %d bytes" % (method, path, response.status, len(body)))
    if response.getheader("content-length") != "1024":
        wrong.append("%s %s: content-length %s" % (method, path, response.getheader("content-length")))
    if response.getheader("cache-control") != "no-store":
        wrong.append("%s %s: cache-control %s" % (method, path, response.getheader("cache-control")))
    if who != "nginx" and "origin_clients" not in (response.getheader("via") or ""):
        wrong.append("%s %s: no Via" % (method, path))
    if response.will_close:
        wrong.append("%s %s: the connection was not kept" % (method, path))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
for line in wrong:
    print("origin_clients: %s: %s" % (who, line), file=sys.stderr)
sys.exit(1 if wrong else 0)
PY
}
PROXIES="nginx"
for who in nginx $CLIENTS; do
  if check_proxy "${PORT[$who]}" "$who"; then
    [[ $who != nginx ]] && PROXIES+=" $who"
  elif [[ $who == nginx ]]; then
    exit 1
  else
    echo "origin_clients: $who failed its check: not measured" >&2
  fi
done

cat >"$WORK/first.lua" <<'EOF'
-- Each request names a URL never asked before: <path><run prefix>-<thread>-<counter>.
local prefix, counter, threads = "run", 0, 0
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

# --- the runs ------------------------------------------------------------------
CLOCK_TICKS=$(getconf CLK_TCK)
cpu_ticks_of() { awk '{print $14, $15}' "/proc/$1/stat"; }
# Prints "req/s p50_ms p99_ms cpu_us usr_us errors" for one wrk run of case $2 against $1.
run_wrk() {
  local who=$1 case_name=$2 url script=() args=() user_before system_before user_after system_after
  case "$case_name" in
    pass-1k) url="/pass/one-1k" ;;
    first-sight-1k) url="/first/" script=(-s "$WORK/first.lua") args=(-- "$who-$(date +%s%N)") ;;
    *) echo "origin_clients: no case '$case_name'" >&2 && exit 2 ;;
  esac
  read -r user_before system_before < <(cpu_ticks_of "${CPU_PID[$who]}")
  taskset -c "$(commas $LOAD_CPUS)" wrk -t1 -c64 -d"$DURATION" --latency "${script[@]}" \
    "http://127.0.0.1:${PORT[$who]}$url" "${args[@]}" >"$WORK/wrk.out"
  read -r user_after system_after < <(cpu_ticks_of "${CPU_PID[$who]}")
  python3 - "$WORK/wrk.out" "$((user_after - user_before)) $((system_after - system_before))" \
    "$CLOCK_TICKS" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def ms(label):
    m = re.search(r"^\s*%s\s+([\d.]+)(us|ms|s)\s*$" % label, text, re.M)
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
requests = int(re.search(r"(\d+) requests in", text).group(1))
errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses:\s+(\d+)", text))
socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
errors += sum(int(n) for n in socket.groups()) if socket else 0
user, system = (int(x) * 1e6 / int(sys.argv[3]) / max(requests, 1) for x in sys.argv[2].split())
print("%.0f %.2f %.2f %.2f %.2f %d" % (rps, ms("50%"), ms("99%"), user + system, user, errors))
PY
}

: >"$WORK/results"
for case_name in $CASES; do
  for round in $(seq 1 "$ROUNDS"); do
    for who in $PROXIES; do
      row=$(run_wrk "$who" "$case_name")
      echo "$case_name $who $row" >>"$WORK/results"
      # Each run's figures as they come, so a run cut short still shows what it measured.
      echo "  $case_name round $round/$ROUNDS: $who $row" >&2
    done
  done
done

python3 - "$WORK/results" "$ROUNDS" "$DURATION" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
print("medians of %s rounds of %s, wrk -t1 -c64" % (sys.argv[2], sys.argv[3]))
print("case            proxy           req/s   p50 ms   p99 ms   cpu us   usr us  spread  vs nginx  errors")
for case in dict.fromkeys(r[0] for r in rows):
    nginx_cpu = None
    for who in dict.fromkeys(r[1] for r in rows if r[0] == case):
        runs = [[float(x) for x in r[2:]] for r in rows if r[0] == case and r[1] == who]
        m = [statistics.median(column) for column in zip(*runs)]
        cpu = [run[3] for run in runs]
        nginx_cpu = m[3] if who == "nginx" else nginx_cpu
        print("%-15s %-12s %8.0f %8.2f %8.2f %8.2f %8.2f %6.1f%% %9.2f %7d" % (
            case, who, m[0], m[1], m[2], m[3], m[4], 100 * (max(cpu) - min(cpu)) / m[3],
            nginx_cpu / m[3], sum(run[5] for run in runs)))
PY
