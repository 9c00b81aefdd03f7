# Shell helpers of the benchmark scripts (vs_nginx.sh, origin_clients.sh), sourced by them.
# BENCH_NAME names the script in its messages.

# Makes $WORK, a temporary directory named after $1 that nginx (started as root, serving
# files as an unprivileged user) can read, and removes it and kills every process in
# PIDS when the script exits, unless KEEP is set.
bench_workdir() {
  WORK=$(mktemp -d -t "secondhit-$1.XXXXXX")
  chmod 755 "$WORK"
  PIDS=()
  trap bench_cleanup EXIT
  if [[ -n "${KEEP:-}" ]]; then trap - EXIT; fi
}

bench_cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}

# A free loopback port: bind port 0 and report what the kernel chose.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits up to 10 s for something to listen on loopback port $1; else shows the logs in
# $WORK and exits.
wait_for_port() {
  for _ in $(seq 1 100); do
    if python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "$BENCH_NAME: nothing listens on port $1" >&2
  cat "$WORK"/*.log >&2 || true
  exit 1
}

# The origin's server block on loopback port $1, serving $WORK/www: everything with
# `expires 2h` (and $ORIGIN_EXTRA, directives of that location), a `no-store` answer
# under /pass/, and any /m/ name as the 1 KiB object.
origin_server() {
  cat <<EOF
  server {
    listen 127.0.0.1:$1;
    root $WORK/www;
    location / { expires 2h; ${ORIGIN_EXTRA:-} }
    location /pass/ { add_header Cache-Control "no-store" always; }
    # Any /m/ name is the 1 KiB object: every URL of the miss cases exists.
    location /m/ { rewrite ^ /one-1k break; expires 2h; }
  }
EOF
}

# nginx's worker_cpu_affinity: a bit mask per CPU given, in binary, CPU 0 rightmost.
cpu_masks() { python3 -c 'import sys; print(" ".join(bin(1 << int(c))[2:] for c in sys.argv[1:]))' "$@"; }

# "0 1 2" -> "0,1,2", for taskset.
commas() {
  local IFS=,
  echo "$*"
}
