#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Throughput and latency of POST /webhook with the durable audit log (WAL,
# fsync at every group commit), against two references in the same run:
# the durable floor (build/dev/bench/durable-floor: libmicrohttpd with
# medic's threading, each body appended to a file and answered only after a
# group commit's fdatasync, nothing else) and nginx answering `return 200`.
#
#   bench/http-bench.sh [SECONDS] [CONNECTIONS]
#
# WRK_THREADS (default 1) gives wrk more threads, and LOAD_CPUS (a taskset
# list such as 12-15) keeps wrk on CPUs of its own, for machines with
# more cores than one load thread can fill; run the script itself under
# `taskset -c` to keep the servers on the others.
#
# GROWN=N has medic's log hold N notifications before the run (their
# alerts spread over GROWN_NODES nodes, default 2000; written by
# build/dev/bench/writer-bench, every one marked evaluated), so that the run
# measures the log a fleet has after weeks rather than a new one.
#
# Needs: wrk, nginx (Debian packages wrk, nginx-light) and a built medic
# (scripts/dev.sh build). Prints notifications/s, p50/p99 latency and the
# ratio to nginx.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
duration=${1:-10}
conns=${2:-32}
wrk_threads=${WRK_THREADS:-1}
load=()
[ -n "${LOAD_CPUS:-}" ] && load=(taskset -c "$LOAD_CPUS")
medic=${MEDIC:-$top/build/dev/medic}
floor=${FLOOR:-$top/build/dev/bench/durable-floor}
writer=${WRITER:-$top/build/dev/bench/writer-bench}
grown=${GROWN:-0}
payload=$top/tests/fixtures/alertmanager/am-webhook-multi-alert.json
for tool in wrk nginx; do
  command -v "$tool" >/dev/null || { echo "http-bench: install $tool (apt-get install wrk nginx-light)" >&2; exit 1; }
done
[ -x "$medic" ] && [ -x "$floor" ] || { echo "http-bench: build medic first (scripts/dev.sh build)" >&2; exit 1; }

work=$(mktemp -d /tmp/medic-bench-XXXXXX)
medic_port=19897
nginx_port=19898
floor_port=19899
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  sleep 0.5
  rm -rf "$work"
}
trap cleanup EXIT

printf 'bench-token\n' >"$work/token"
chmod 600 "$work/token"
cat >"$work/medic.yaml" <<YAML
listen: 127.0.0.1:$medic_port
audit: { path: $work/medic.db }
auth: { webhook_bearer_token_file: $work/token }
log_level: warn
YAML
# one client address: above 64 connections (the default per address),
# medic closes the extra ones at once and wrk measures reconnections
if [ "$conns" -gt 64 ]; then
  printf 'limits: { max_connections_per_address: %d }\n' "$conns" >>"$work/medic.yaml"
fi
if [ "$grown" -gt 0 ]; then
  NODES=${GROWN_NODES:-2000} "$writer" "$grown" 64 "$work/medic.db" >"$work/grown.txt"
  echo "medic's log: $grown notifications stored first, over ${GROWN_NODES:-2000} nodes ($(du -m "$work/medic.db" | cut -f1) MB)"
fi
"$medic" serve --config "$work/medic.yaml" 2>"$work/medic.log" &
pids+=($!)

cat >"$work/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx-body;
  server {
    listen 127.0.0.1:$nginx_port;
    location / { return 200 '{"status":"accepted","id":1,"duplicate":false}\n'; }
  }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work"
"$floor" $floor_port "$work/floor.log" &
pids+=($!)

for port in $medic_port $nginx_port $floor_port; do
  for _ in $(seq 50); do
    curl -fs -o /dev/null "http://127.0.0.1:$port/-/healthy" 2>/dev/null && break
    curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && [ $port != $medic_port ] && break
    sleep 0.1
  done
done

run() { # name port
  "${load[@]}" wrk -t"$wrk_threads" -c"$conns" -d"${duration}s" --latency -s "$top/bench/webhook-post.lua" \
    "http://127.0.0.1:$2" -- "$payload" bench-token >"$work/$1.wrk"
  local rps p50 p99
  rps=$(awk '/^Requests\/sec/ {print $2}' "$work/$1.wrk")
  p50=$(awk '$1 == "50%" {print $2}' "$work/$1.wrk")
  p99=$(awk '$1 == "99%" {print $2}' "$work/$1.wrk")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$work/$1.wrk")
  errors=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}' "$work/$1.wrk")
  printf '%-6s %10.0f req/s   p50 %-8s p99 %-8s non-2xx %s  socket errors %s\n' "$1" "$rps" "$p50" \
    "$p99" "${non2xx:-0}" "${errors:-0}"
  echo "$rps" >"$work/$1.rps"
}

# CPU ticks of each of medic's threads by name (/proc/PID/task/*/stat:
# utime + stime), to charge the audit writer its share per notification.
thread_ticks() {
  local pid=${pids[0]} t
  for t in /proc/$pid/task/*; do
    awk '{ sub(/^[0-9]+ \(/, ""); name = $0; sub(/\).*/, "", name); sub(/^[^)]*\) /, "");
           print name, $12 + $13 }' "$t/stat" 2>/dev/null
  done | awk '{ s[$1] += $2 } END { for (n in s) print n, s[n] }' | sort
}
count_stored() {
  "$medic" audit notifications --db "$work/medic.db" --format csv --limit 1 | awk -F, 'NR==2 {print $1}'
}

echo "POST /webhook, 3-alert payload, $conns connections, ${duration}s each, wrk -t$wrk_threads${LOAD_CPUS:+ on CPUs $LOAD_CPUS}, $(nproc) cores"
before_n=$(count_stored); before_n=${before_n:-0}
thread_ticks >"$work/ticks.before"
run medic $medic_port
thread_ticks >"$work/ticks.after"
after_n=$(count_stored)
hz=$(getconf CLK_TCK)
join "$work/ticks.before" "$work/ticks.after" | awk -v n=$(( after_n - before_n )) -v hz="$hz" '
  { d = $3 - $2; if (d > 0) printf "  thread %-14s %6.1f s CPU  %6.1f us per notification\n", $1, d / hz, d / hz * 1e6 / n }
  $1 == "medic-audit" { w = ($3 - $2) / hz * 1e6 / n }
  END { printf "audit writer CPU per notification: %.1f us (%d notifications)\n", w, n }'
run floor $floor_port
run nginx $nginx_port
stored=$(( $(count_stored) - before_n ))
echo "medic committed $stored notifications ($(( stored * 3 )) alerts), every one before its 200"
awk -v m="$(cat "$work/medic.rps")" -v f="$(cat "$work/floor.rps")" -v n="$(cat "$work/nginx.rps")" \
  'BEGIN { printf "ratio medic/durable floor: %.2f   medic/nginx: %.2f\n", m / f, m / n }'
