#!/usr/bin/env bash
# Origin faults under load: three nginx origins behind one secondhit pool, wrk sending a
# response the origins mark `no-store` (so every request goes to an origin); one origin
# stopped with SIGSTOP (hung: it still accepts connections) and resumed, then another
# killed with -9 and started again. Prints wrk's figures (errors, non-2xx) and when /stats
# showed each server out of rotation and back. Results: benches/RESULTS.md.
#
#   cargo build --release && bash benches/origin_faults.sh             # with a health check
#   HEALTH=passive bash benches/origin_faults.sh                       # passive checks only
# Needs nginx, wrk, curl, python3 and bc; uses ports 9101-9103, 9180 and 9190.
set -u
BIN=${BIN:-target/release/secondhit}
HEALTH=${HEALTH:-active}
D=$(mktemp -d /tmp/ofault.XXXX)
chmod 755 $D; mkdir -p $D/www $D/cache
head -c 1024 /dev/urandom > $D/www/obj
for p in 9101 9102 9103; do
  mkdir -p $D/n$p
  cat > $D/n$p/nginx.conf <<NG
worker_processes 1; daemon on; pid $D/n$p/nginx.pid; error_log $D/n$p/error.log;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$p; root $D/www;
  location / { add_header Cache-Control no-store; }
  location = /healthz { return 200 ok; } } }
NG
  nginx -c $D/n$p/nginx.conf -p $D/n$p
done
cat > $D/sh.toml <<T
[server]
listen = "127.0.0.1:9180"
admin_listen = "127.0.0.1:9190"
[origin]
servers = ["http://127.0.0.1:9101", "http://127.0.0.1:9102", "http://127.0.0.1:9103"]
$( [ "$HEALTH" = active ] && echo 'health_check = { path = "/healthz", interval = "1s", expect = 200 }' )
[cache]
dir = "$D/cache"
max_size = "1GiB"
min_free = "0B"
[log]
level = "info"
T
$BIN serve --config $D/sh.toml >$D/proxy.log 2>&1 & PP=$!
sleep 1
curl -s -o /dev/null -w "warm-up %{http_code}\n" http://127.0.0.1:9180/obj
pids_of() { pgrep -f "nginx.*-c $D/n$1/nginx.conf"; ps -o pid= --ppid $(cat $D/n$1/nginx.pid) 2>/dev/null; }
up_state() { curl -s http://127.0.0.1:9190/stats | python3 -c 'import json,sys; s=json.load(sys.stdin); print(" ".join(str(x.get("up")) for x in s["origin"]["servers"]))' 2>/dev/null; }
watch_state() { local t0=$(date +%s.%N); for i in $(seq 1 $((${1}*10))); do echo "$(echo "$(date +%s.%N) - $t0" | bc) $(up_state)"; sleep 0.1; done; }

echo "== hung origin: SIGSTOP 9102 at t=5s, SIGCONT at t=15s, wrk 25s"
wrk -t2 -c50 -d25s --timeout 10s http://127.0.0.1:9180/obj > $D/wrk_hung.txt 2>&1 & W=$!
sleep 5; T0=$(date +%s.%N); kill -STOP $(pids_of 9102); echo "stopped"
watch_state 10 > $D/state_hung_stop.txt
kill -CONT $(pids_of 9102); echo "resumed"
watch_state 8 > $D/state_hung_cont.txt
wait $W; cat $D/wrk_hung.txt
echo "-- first 'False' after stop:"; grep -m1 False $D/state_hung_stop.txt
echo "-- first all-True after resume:"; grep -m1 "True True True" $D/state_hung_cont.txt

echo "== killed origin: kill -9 9103 at t=5s, restart at t=15s, wrk 25s"
wrk -t2 -c50 -d25s --timeout 10s http://127.0.0.1:9180/obj > $D/wrk_kill.txt 2>&1 & W=$!
sleep 5; kill -9 $(pids_of 9103); echo "killed"
watch_state 10 > $D/state_kill.txt
rm -f $D/n9103/nginx.pid; nginx -c $D/n9103/nginx.conf -p $D/n9103; echo "restarted"
watch_state 8 > $D/state_kill_back.txt
wait $W; cat $D/wrk_kill.txt
echo "-- first 'False' after kill:"; grep -m1 False $D/state_kill.txt
echo "-- first all-True after restart:"; grep -m1 "True True True" $D/state_kill_back.txt
curl -s http://127.0.0.1:9190/stats | python3 -c 'import json,sys; s=json.load(sys.stdin); print(json.dumps(s["origin"], indent=1))' | head -60
grep -c "502\|origin-error" $D/proxy.log
grep -iE "warn|error" $D/proxy.log | head -20
kill $PP; wait $PP
for p in 9101 9102 9103; do kill $(cat $D/n$p/nginx.pid) 2>/dev/null; done
echo "dir $D"
