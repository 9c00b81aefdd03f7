#!/usr/bin/env bash
# User-space instructions per request through secondhit, counted by callgrind: the firmer
# figure where timed runs on a shared VM spread more than a change moves them (results and
# their history: benches/RESULTS.md, the entries that name "the callgrind rig").
#
# One worker in front of an nginx origin (the 1 KiB object and locations of vs_nginx.sh's), under
# `valgrind --tool=callgrind` with counting off; per case: $WARM requests to warm, then
# counting on for $REQUESTS sequential requests on one keep-alive connection, then off.
# The count is the whole process's (every thread, the runtime's included) over those
# requests, divided by $REQUESTS.
#
# Cases (CASES, default all but pass-1k-fields):
#   pass-1k         /pass/one-1k (`no-store`), admission.policy = "always"
#   pass-1k-fields  the same with the ten more fields a browser sends
#   first-sight-1k  /m/<new> on every request, the default `second-hit`: none stored
#   miss-1k         /m/<new> on every request, "always": each one stored
#   hit-1k          /one-1k, "always", stored while warming
#
# Usage:
#   bash benches/callgrind.sh                      # builds the release binary
#   SECONDHIT_BIN=<binary> CASES="pass-1k hit-1k" bash benches/callgrind.sh
# With OUT=<dir>, each case's callgrind file is kept there as <case>.callgrind, for
# `callgrind_annotate` (a release build with CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
# names the source lines).
#
# Needs: valgrind, nginx, python3. Installs nothing itself.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=callgrind
source benches/common.sh

CASES=${CASES:-"pass-1k first-sight-1k miss-1k hit-1k"}
WARM=${WARM:-300}
REQUESTS=${REQUESTS:-3000}

for tool in valgrind callgrind_control nginx python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "$BENCH_NAME: needs $tool (on Debian: apt-get install valgrind nginx python3)" >&2
    exit 1
  fi
done
if [[ -z ${SECONDHIT_BIN:-} ]]; then
  cargo build --release -p secondhit >&2
  SECONDHIT_BIN=target/release/secondhit
fi
SECONDHIT_BIN=$(realpath "$SECONDHIT_BIN")

bench_workdir callgrind
mkdir -p "$WORK/www/pass" "$WORK/tmp-origin"
head -c 1024 /dev/urandom | base64 -w0 | head -c 1024 >"$WORK/www/one-1k"
cp "$WORK/www/one-1k" "$WORK/www/pass/one-1k"
ORIGIN_PORT=$(free_port)
{
  cat <<EOF
daemon off;
worker_processes 1;
pid $WORK/origin.pid;
error_log $WORK/origin-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/tmp-origin;
EOF
  origin_server "$ORIGIN_PORT"
  echo "}"
} >"$WORK/origin.conf"
nginx -c "$WORK/origin.conf" -p "$WORK" -e "$WORK/origin-error.log" &
PIDS+=($!)
wait_for_port "$ORIGIN_PORT"

# Sends $3 requests to warm, then $4 with callgrind counting, to port $1; "{}" in the
# path $2 becomes the request's number. BROWSER set: the browser's fields too.
cat >"$WORK/drive.py" <<'PY'
import os, socket, subprocess, sys
port, path, warm, count, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
extra = "" if not os.environ.get("BROWSER") else (
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
    "Accept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br\r\n"
    "Referer: http://bench.test/index.html\r\nSec-Fetch-Dest: document\r\n"
    "Sec-Fetch-Mode: navigate\r\nSec-Fetch-Site: same-origin\r\n"
    "Upgrade-Insecure-Requests: 1\r\nPriority: u=0, i\r\n")
conn = socket.create_connection(("127.0.0.1", port))
def ask(i):
    target = path.replace("{}", str(i))
    conn.sendall(("GET %s HTTP/1.1\r\nHost: bench.test\r\n%s\r\n" % (target, extra)).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            sys.exit("connection closed")
        data += more
    head, body = data.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit("not a 200: %r" % head[:200])
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += conn.recv(65536)
for i in range(warm):
    ask(i)
subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
for i in range(count):
    ask(1_000_000 + i)
subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
PY

printf '%-16s %12s\n' case "instr/req"
for case_name in $CASES; do
  policy=always path=/pass/one-1k browser=
  case $case_name in
    pass-1k) ;;
    pass-1k-fields) browser=1 ;;
    first-sight-1k) policy=second-hit path="/m/{}" ;;
    miss-1k) path="/m/{}" ;;
    hit-1k) path=/one-1k ;;
    *) echo "$BENCH_NAME: unknown case $case_name" >&2 && exit 1 ;;
  esac
  port=$(free_port)
  cat >"$WORK/$case_name.toml" <<EOF
[server]
listen = "127.0.0.1:$port"
workers = 1
admin_listen = "off"
[origin]
url = "http://127.0.0.1:$ORIGIN_PORT"
[cache]
dir = "$WORK/cache-$case_name"
[admission]
policy = "$policy"
[log]
level = "warn"
access_log = "off"
EOF
  out="$WORK/$case_name.callgrind"
  valgrind --tool=callgrind --callgrind-out-file="$out" --dump-instr=no --instr-atstart=no \
    "$SECONDHIT_BIN" serve --config "$WORK/$case_name.toml" >"$WORK/$case_name.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_for_port "$port"
  BROWSER=$browser python3 "$WORK/drive.py" "$port" "$path" "$WARM" "$REQUESTS" "$pid"
  kill "$pid"
  wait "$pid" || true
  total=$(awk '/^totals:/ {print $2}' "$out")
  printf '%-16s %12d\n' "$case_name" $((total / REQUESTS))
  if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    cp "$out" "$OUT/$case_name.callgrind"
  fi
done
