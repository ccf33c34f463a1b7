#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `medic audit archive` on a log of real notifications: its time and memory
# at one size and at eight times it, and what it costs the webhooks of a
# medic serve writing the same log meanwhile.
#
#   bench/archive-bench.sh [SECONDS]
#
# medic serve (bearer auth, durable SQLite, embedded policies) takes the
# 3-alert payload from wrk for SECONDS (default 8); the log is copied and
# grown eight times by SQL (its notifications and their alerts copied
# with new keys). Each is archived whole (--before 90m, the archive
# run's clock an hour and a half ahead through the clock stand-in
# build/dev/tests/libclock_shift.so, a TEST STAND-IN: rows up to a minute
# old move). Then wrk again for
# 12 s against medic serve on the first log, once alone and once with its
# archive running from its second second on (under nice -n 19, as the
# systemd unit in docs/audit.md runs it). Needs wrk (apt-get install
# wrk) and a built medic.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
fill=${1:-8}
medic=${MEDIC:-$top/build/dev/medic}
shift_lib=${CLOCK_SHIFT:-$top/build/dev/tests/libclock_shift.so}
payload=$top/tests/fixtures/alertmanager/am-webhook-multi-alert.json
command -v wrk >/dev/null || { echo "archive-bench: install wrk" >&2; exit 1; }
[ -x "$medic" ] && [ -f "$shift_lib" ] || { echo "archive-bench: build medic first" >&2; exit 1; }
work=$(mktemp -d /tmp/medic-archive-bench-XXXXXX)
port=19896
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; sleep 0.3; rm -rf "$work"; }
trap cleanup EXIT
printf 'bench-token\n' >"$work/token"
chmod 600 "$work/token"
echo 5460 >"$work/offset"  # --before 90m: a minute before now

serve() { # DB
  cat >"$work/medic.yaml" <<YAML
listen: 127.0.0.1:$port
audit: { path: $1 }
auth: { webhook_bearer_token_file: $work/token }
log_level: warn
YAML
  "$medic" serve --config "$work/medic.yaml" 2>>"$work/medic.log" &
  pid=$!
  for _ in $(seq 100); do
    curl -fs -o /dev/null "http://127.0.0.1:$port/-/ready" && return
    sleep 0.1
  done
  echo "archive-bench: medic did not start" >&2
  exit 1
}
stop() { kill "$pid"; wait "$pid" || true; pid=; }
load() { # SECONDS PREFIX
  wrk -t1 -c32 -d"$1s" --latency -s "$top/bench/webhook-post.lua" "http://127.0.0.1:$port" \
    -- "$payload" bench-token "$2" >"$work/wrk.out"
  awk '/^Requests\/sec/ {r = $2} $1 == "99%" {p = $2} END {printf "%.0f/s, p99 %s", r, p}' \
    "$work/wrk.out"
}
archive() { # DB OUT
  LD_PRELOAD=$shift_lib MEDIC_TEST_CLOCK_OFFSET_FILE=$work/offset ${NICE:-} /usr/bin/time \
    -f '%e s, %M kB max RSS' "$medic" audit archive --db "$1" --before 90m --out "$2" \
    2>"$work/archive.err" >"$work/archive.out"
  printf '%s; %s' "$(cut -d: -f1 "$work/archive.out" | sed 's/ in .*//')" \
    "$(tail -1 "$work/archive.err")"
}
grow() { # DB: its notifications and alerts copied once, with new keys
  sqlite3 "$1" "BEGIN;
    CREATE TEMP TABLE m AS SELECT max(id) AS top FROM notifications;
    INSERT INTO notifications (id, received_at, group_key, status, receiver, external_url,
      truncated_alerts, alert_count, dedupe_key, dedupe_prefix, duplicate_of, remote_addr, payload,
      payload_encoding, payload_bytes, evaluated_at)
    SELECT id + (SELECT top FROM m), received_at, group_key, status, receiver, external_url,
      truncated_alerts, alert_count, dedupe_key || '-' || id, dedupe_prefix + id, NULL,
      remote_addr, payload, payload_encoding, payload_bytes, evaluated_at
    FROM notifications WHERE duplicate_of IS NULL;
    INSERT INTO alerts (notification_id, position, received_at, fingerprint, status, alertname,
      node, starts_at, ends_at, generator_url, labels, annotations)
    SELECT notification_id + (SELECT top FROM m), position, received_at, fingerprint, status,
      alertname, node, starts_at, ends_at, generator_url, labels, annotations
    FROM alerts WHERE notification_id <= (SELECT top FROM m);
    COMMIT;"
}

serve "$work/small.db"
echo "filling: $(load "$fill" fill), $(nproc) cores"
stop
cp "$work/small.db" "$work/large.db"
for _ in 1 2 3; do grow "$work/large.db"; done
for size in small large; do
  n=$(sqlite3 "$work/$size.db" "SELECT count(*) FROM notifications")
  a=$(sqlite3 "$work/$size.db" "SELECT count(*) FROM alerts")
  cp "$work/$size.db" "$work/$size-copy.db"
  echo "$size: $n notifications, $a alerts: $(archive "$work/$size-copy.db" "$work/$size-archive.db")"
done
cp "$work/small.db" "$work/served.db"
serve "$work/served.db"
load 3 warm >/dev/null
echo "webhooks alone:              $(load 12 alone)"
(sleep 1; NICE="nice -n 19" archive "$work/served.db" "$work/served-archive.db" \
  >"$work/during.txt") &
during=$!
echo "webhooks during the archive: $(load 12 during)"
wait "$during" || true
echo "the archive meanwhile:       $(cat "$work/during.txt")"
stop
"$medic" audit verify --db "$work/served.db" --archive "$work/served-archive.db"
