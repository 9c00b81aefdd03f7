#!/usr/bin/env bash
# Resident memory per keep-alive client connection, and whether it comes back.
#
# Starts a static origin (python3 http.server) and the release secondhit in front of
# it (policy "always", access log off), stores one 1 KiB object, then opens $CONNS
# keep-alive connections that each fetch it once and stay open. Prints secondhit's
# RSS before, while they are held (and per connection), right after they close, and
# after 4,000 more short-lived requests: the allocator (mimalloc) returns freed pages
# lazily, on later allocations, so an idle process keeps them.
#
# Needs: python3, cargo (builds the release binary unless SECONDHIT_BIN names one).
# Run:  bash benches/conn_memory.sh          (CONNS=5000 by default; about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-5000}
BIN=${SECONDHIT_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release --locked >/dev/null
  BIN=target/release/secondhit
fi
work=$(mktemp -d)
cleanup() { kill "${origin_pid:-}" "${proxy_pid:-}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
read -r origin_port proxy_port < <(python3 -c '
import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
mkdir -p "$work/www"
head -c 1024 /dev/zero | tr '\0' 'a' > "$work/www/f"
(cd "$work/www" && exec python3 -m http.server "$origin_port" --bind 127.0.0.1 >/dev/null 2>&1) &
origin_pid=$!
cat > "$work/secondhit.toml" <<CONF
[server]
listen = "127.0.0.1:$proxy_port"
admin_listen = "off"
[origin]
url = "http://127.0.0.1:$origin_port"
[cache]
dir = "$work/cache"
fsync = false
[admission]
policy = "always"
[log]
level = "error"
access_log = "off"
CONF
"$BIN" serve --config "$work/secondhit.toml" >/dev/null 2>&1 &
proxy_pid=$!
sleep 1.5
python3 - "$proxy_pid" "$proxy_port" "$CONNS" <<'PY'
import socket, sys, time
pid, port, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
request = b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n"
def fetch(s):
    s.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length"))
    while len(body) < length:
        body += s.recv(65536)
def short_lived(count):
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port)); fetch(s); s.close()
short_lived(3)
time.sleep(0.5)
before = rss()
held = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port)); fetch(s); held.append(s)
time.sleep(0.5)
during = rss()
for s in held:
    s.close()
time.sleep(2)
closed = rss()
short_lived(2000); time.sleep(1.5); short_lived(2000); time.sleep(0.5)
print(f"connections {n}: RSS {before:.1f} MiB before, {during:.1f} MiB held "
      f"({(during - before) * 1024 / n:.1f} KiB each), {closed:.1f} MiB right after they closed, "
      f"{rss():.1f} MiB after 4000 more requests")
PY
