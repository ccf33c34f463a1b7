#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# medic agent against a real NVIDIA driver: run it on any GPU host.
#
#   tests/gpu/real-driver.sh [--medic PATH] [--out DIR] [--set-limits] [--reset]
#
# Starts `medic agent` on 127.0.0.1 with the driver's libnvidia-ml.so.1 and
# checks what it reports against nvidia-smi: GPU enumeration, UUIDs, power
# limits and bounds, the health report (recovery action, persistence mode,
# remapped rows, volatile double-bit ECC errors, compute processes), the
# evidence a verify reads after a repair (the boot id and time, when NVML
# found each GPU), the refusals (a limit outside the bounds, a GPU that is
# not there, a restore with nothing remembered, a missing token, a reset of
# a GPU that is not there), what a reset of GPU 0 would do (check_only: its
# compute processes, persistence mode, the command) and a clean stop on
# SIGTERM.
#
# Reading only, by default: nothing on the GPU is changed. --set-limits also
# sets GPU 0's power limit to its minimum through the agent, reads it back
# with nvidia-smi and restores it; --reset resets GPU 0 through the agent
# (persistence mode off and back on, nvidia-smi --gpu-reset) and checks it
# came back: both only on a host whose GPU is yours to change and idle.
#
# Everything the driver said is kept in DIR (default: a new temporary
# folder): nvidia-smi.csv, nvidia-smi-q.txt, gpus.json, health.json,
# agent.log and summary.txt. Exit status 0 when every check passed.
set -u

medic=build/dev/medic
out=
set_limits=0
reset=0
while [ $# -gt 0 ]; do
    case "$1" in
    --medic) medic=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --set-limits) set_limits=1; shift ;;
    --reset) reset=1; shift ;;
    -h | --help) sed -n '3,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "real-driver.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -x "$medic" ] || { echo "real-driver.sh: no medic at $medic: build it or pass --medic PATH" >&2; exit 2; }
command -v nvidia-smi >/dev/null || { echo "real-driver.sh: nvidia-smi not found: is this a GPU host?" >&2; exit 2; }
command -v curl >/dev/null || { echo "real-driver.sh: curl is needed to call the agent" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/medic-real-driver.XXXXXX)
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
failures=0

say() { echo "$*" | tee -a "$summary"; }
check() { # check NAME CONDITION-EXIT-STATUS DETAIL
    if [ "$2" -eq 0 ]; then say "PASS $1: $3"; else say "FAIL $1: $3"; failures=$((failures + 1)); fi
}
# json FILE PYTHON-EXPRESSION-ON-d: a value from a JSON answer
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

say "host: $(uname -n) $(uname -r)"
nvidia-smi --query-gpu=index,uuid,name,driver_version,power.limit,power.min_limit,power.max_limit,power.default_limit,persistence_mode \
    --format=csv,noheader,nounits >"$out/nvidia-smi.csv" 2>&1
nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1
say "nvidia-smi: $(head -c 400 "$out/nvidia-smi.csv")"
smi_count=$(grep -c . "$out/nvidia-smi.csv")

work=$(mktemp -d /tmp/medic-real-driver-work.XXXXXX)
trap 'rm -rf "$work"' EXIT
token_file=$work/agent.token
umask 077
echo "real-driver-$$-$(date +%s)" >"$token_file"
token=$(cat "$token_file")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
agent_started=$(date +%s)
"$medic" agent --listen "127.0.0.1:$port" --token-file "$token_file" --state "$work/agent.state" \
    >"$out/agent.log" 2>&1 &
agent=$!
up=1
for _ in $(seq 100); do
    curl -sf "$url/-/healthy" >/dev/null && { up=0; break; }
    kill -0 $agent 2>/dev/null || break
    sleep 0.1
done
check "agent starts on the real libnvidia-ml.so.1" $up "$(tail -n 3 "$out/agent.log" | tr '\n' ' ')"
[ $up -eq 0 ] || { say "cannot go on without the agent"; exit 1; }

last=$work/last.json
call() { # call METHOD PATH [BODY] -> HTTP status, the body in $last
    curl -s -o "$last" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/json' ${3:+--data "$3"} "$url$2"
}

status=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/gpus")
[ "$status" = 401 ]; check "no token is refused" $? "HTTP $status"

status=$(call GET /v1/gpus); cp "$last" "$out/gpus.json"
count=$(json "$out/gpus.json" 'len(d["gpus"])')
[ "$status" = 200 ] && [ "$count" = "$smi_count" ]
check "GET /v1/gpus enumerates what nvidia-smi sees" $? "HTTP $status, $count GPUs (nvidia-smi: $smi_count)"
i=0
while [ "$i" -lt "${count:-0}" ]; do
    agent_line=$(json "$out/gpus.json" "'%s %.0f %.0f %.0f' % (d['gpus'][$i]['uuid'], d['gpus'][$i]['power_limit_w'], d['gpus'][$i]['min_w'], d['gpus'][$i]['max_w'])")
    smi_line=$(sed -n "$((i + 1))p" "$out/nvidia-smi.csv" | awk -F', ' '{printf "%s %.0f %.0f %.0f", $2, $5, $6, $7}')
    [ "$agent_line" = "$smi_line" ]
    check "GPU $i: UUID, limit and bounds as nvidia-smi" $? "agent '$agent_line', nvidia-smi '$smi_line'"
    i=$((i + 1))
done

status=$(call GET /v1/health); cp "$last" "$out/health.json"
[ "$status" = 200 ] && [ "$(json "$out/health.json" 'd["gpu_count"]')" = "$smi_count" ]
check "GET /v1/health answers for every GPU" $? "HTTP $status, driver $(json "$out/health.json" 'd["driver_version"]')"
i=0
while [ "$i" -lt "${count:-0}" ]; do
    say "  GPU $i health: $(json "$out/health.json" "json.dumps({k: v for k, v in d['gpus'][$i].items() if k not in ('uuid', 'name')})")"
    smi_persist=$(sed -n "$((i + 1))p" "$out/nvidia-smi.csv" | awk -F', ' '{print $9}')
    agent_persist=$(json "$out/health.json" "{True: 'Enabled', False: 'Disabled', None: 'null'}[d['gpus'][$i]['persistence_mode']]")
    [ "$agent_persist" = "$smi_persist" ]
    check "GPU $i: persistence mode as nvidia-smi" $? "agent $agent_persist, nvidia-smi $smi_persist"
    i=$((i + 1))
done

# the evidence a verify reads after a repair: the node's boot (its boot id
# and time, as the kernel says) and when NVML found each GPU (after the
# agent started, not later than now)
boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)
btime=$(awk '/^btime/ {print $2}' /proc/stat)
[ "$(json "$out/health.json" 'd["boot_id"]')" = "$boot_id" ]
check "the boot id is the kernel's" $? "agent $(json "$out/health.json" 'd["boot_id"]'), kernel $boot_id"
[ "$(json "$out/health.json" 'int(__import__("datetime").datetime.fromisoformat(d["booted_at"].replace("Z", "+00:00")).timestamp())')" = "$btime" ]
check "the boot time is the kernel's" $? "agent $(json "$out/health.json" 'd["booted_at"]'), btime $btime"
enumerated=$(json "$out/health.json" "all($agent_started - 1 <= __import__('datetime').datetime.fromisoformat(g['enumerated_at'].replace('Z', '+00:00')).timestamp() <= $(date +%s) + 1 for g in d['gpus'])")
[ "$enumerated" = True ]
check "every GPU enumerated since the agent started" $? "$(json "$out/health.json" "[g['enumerated_at'] for g in d['gpus']]"), agent started at $agent_started"

status=$(call POST /v1/gpus/0/power-limit '{"watts": 1}')
[ "$status" = 400 ]; check "1 W is refused with GPU 0's bounds" $? "HTTP $status $(cat "$last")"
status=$(call POST /v1/gpus/0/power-limit '{"watts": 100000}')
[ "$status" = 400 ]; check "100,000 W is refused" $? "HTTP $status $(cat "$last")"
# 1 W: were the GPU there after all, the bounds would still refuse it
status=$(call POST "/v1/gpus/${count:-0}/power-limit" '{"watts": 1}')
[ "$status" = 404 ]; check "GPU ${count:-0} (not there) is refused" $? "HTTP $status $(cat "$last")"
status=$(call POST /v1/restore '{}')
[ "$status" = 409 ]; check "a restore with nothing remembered is refused" $? "HTTP $status"
before=$(sed -n 1p "$out/nvidia-smi.csv" | awk -F', ' '{print $5}')
after=$(nvidia-smi -i 0 --query-gpu=power.limit --format=csv,noheader,nounits)
[ "$before" = "$after" ]; check "the refusals left GPU 0's limit as it was" $? "$before W -> $after W"

status=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data '{}' "$url/v1/gpus/0/reset")
[ "$status" = 401 ]; check "a reset without the token is refused" $? "HTTP $status"
status=$(call POST "/v1/gpus/${count:-0}/reset" '{}')
[ "$status" = 404 ]; check "a reset of GPU ${count:-0} (not there) is refused" $? "HTTP $status $(cat "$last")"
status=$(call POST /v1/gpus/0/reset '{"uuid": "GPU-00000000-0000-0000-0000-000000000000"}')
[ "$status" = 404 ]; check "a reset of a UUID that is not enumerated is refused" $? "HTTP $status $(cat "$last")"
uuid0=$(json "$out/gpus.json" 'd["gpus"][0]["uuid"]')
status=$(call POST /v1/gpus/0/reset "{\"uuid\": \"$uuid0\", \"check_only\": true}"); cp "$last" "$out/reset-check.json"
smi_procs=$(nvidia-smi -i 0 --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c .)
if [ "$smi_procs" -gt 0 ]; then
    [ "$status" = 409 ]; check "a reset of GPU 0 is refused while $smi_procs process(es) compute on it" $? "HTTP $status $(cat "$last")"
else
    [ "$status" = 200 ] && [ "$(json "$out/reset-check.json" 'd["command"][3]')" = "$uuid0" ]
    check "GPU 0 could be reset (check only)" $? "HTTP $status $(cat "$last")"
fi
after=$(nvidia-smi -i 0 --query-gpu=power.limit,persistence_mode --format=csv,noheader,nounits)
[ "$after" = "$(sed -n 1p "$out/nvidia-smi.csv" | awk -F', ' '{print $5 ", " $9}')" ]
check "the reset checks left GPU 0 as it was" $? "limit, persistence mode: $after"

if [ $reset -eq 1 ]; then
    status=$(call POST /v1/gpus/0/reset "{\"uuid\": \"$uuid0\"}"); cp "$last" "$out/reset.json"
    [ "$status" = 200 ]; check "GPU 0 reset and confirmed back" $? "HTTP $status $(cat "$last")"
    now=$(nvidia-smi -i 0 --query-gpu=uuid,persistence_mode --format=csv,noheader)
    say "  after the reset, nvidia-smi: $now"
else
    say "SKIP resetting GPU 0: reading only (pass --reset on an idle GPU that is yours to reset)"
fi

if [ $set_limits -eq 1 ]; then
    low=$(json "$out/gpus.json" 'd["gpus"][0]["min_w"]')
    status=$(call POST /v1/gpus/0/power-limit "{\"watts\": $low}")
    now=$(nvidia-smi -i 0 --query-gpu=power.limit --format=csv,noheader,nounits)
    [ "$status" = 200 ]; check "GPU 0 set to its minimum $low W" $? "HTTP $status $(cat "$last"), nvidia-smi: $now W"
    status=$(call POST /v1/restore '{}')
    now=$(nvidia-smi -i 0 --query-gpu=power.limit --format=csv,noheader,nounits)
    [ "$status" = 200 ] && [ "$now" = "$before" ]
    check "restore puts GPU 0's $before W back" $? "HTTP $status $(cat "$last"), nvidia-smi: $now W"
else
    say "SKIP setting a limit: reading only (pass --set-limits on a GPU that is yours to change)"
fi

kill -TERM $agent
wait $agent
rc=$?
[ $rc -eq 0 ] && grep -q 'medic agent stopping' "$out/agent.log"
check "SIGTERM stops the agent cleanly" $? "exit status $rc"
say "$failures check(s) failed; everything the driver said is in $out"
[ $failures -eq 0 ]
