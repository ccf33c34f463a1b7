#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Real data: the InfiniteHBD fault trace (400 GPU servers, 348 days) turned
into Alertmanager notifications and played, time-compressed, through
medic serve in dry-run with a 400-node inventory. Asserts that every fault
start gets its decisions and that no fleet cap, cooldown or budget is ever
exceeded; prints a summary."""

import collections
import datetime
import json
import os
import sqlite3
import subprocess
import time

from lab import Medic, Suite, wait_until, write_secret

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "..", "data", "infinitehbd-trace", "fault_trace.json")

# One trace day lasts this long on the wall clock; every duration of the
# policies below is scaled the same way (a day is 150 ms: 6 h is 37.5 ms).
DAY = 0.15
NODES = 400


def scaled(hours):
    """A duration of the trace's time as a medic duration string."""
    ms = hours / 24.0 * DAY * 1000
    return f"{max(1, int(round(ms)))}ms"


# Fault classes as the alerts a DCGM/node-exporter rule set would raise.
ALERTS = {
    "GPU DBE(Double Bit ECC) > Threshold": "GPUDoubleBitECC",
    "GPU SBE(Single Bit ECC) > Threshold": "GPUSingleBitECC",
    "GPU xid Error": "GPUXidError",
    "GPU Lost": "GPUFellOffBus",
    "GPU device not found": "GPUFellOffBus",
    "GPU device unknow error": "GPUDeviceError",
    "nvidia-smi Timeout": "GPUDeviceError",
    "Silent Data Corruption": "GPUDeviceError",
    "GPU PCI link width low": "GPUPCIeLinkDegraded",
    "GPU P2P Bandwidth Low": "GPUPCIeLinkDegraded",
    "GPU Temperature High": "GPUTemperatureHigh",
}


def alertname(fault):
    if fault["Desc"] in ALERTS:
        return ALERTS[fault["Desc"]]
    if fault["Level"] == "Hardware Failure":
        cls = fault["Class"]
        if cls in ("NIC", "Parameter Plane Cable", "Change"):
            return "NodeNetworkFault"
        return "NodeHardwareFault"
    return "NodeSoftwareFault"


CONFIG = f"""
mode: dry-run
engine: {{ tick_interval: 20ms }}
inventory:
  file: inventory.yaml
  node_labels: [instance]
notifiers:
  oncall: {{ type: webhook, url: http://127.0.0.1:9/hook }}
safety:
  max_disruptive_in_flight: 8
  max_disrupted_fraction: 0.02
  storm: {{ max_alerting_nodes: 12, window: {scaled(24)}, notifier: oncall }}
  max_alert_age: {scaled(24)}
  quarantine: {{ incidents: 3, window: {scaled(24 * 7)} }}
policies:
  - name: gpu-fatal
    match: '{{alertname=~"GPUDoubleBitECC|GPUFellOffBus|GPUXidError|GPUDeviceError"}}'
    cooldown: {scaled(6)}
    max_actions_per_node: {{ count: 3, window: {scaled(24 * 7)} }}
    steps:
      - action: drain
        reason: '{{{{ $labels.fault }}}}'
      - after: {scaled(0.5)}
        action: ipmi_power_cycle
      - after: {scaled(4)}
        action: notify
        notifier: oncall
    on_resolved:
      - action: resume
  - name: gpu-hot
    match: '{{alertname="GPUTemperatureHigh"}}'
    steps: [ {{ action: power_limit, watts: 300 }} ]
    on_resolved: [ {{ action: restore_power_limit }} ]
  - name: node-hardware
    match: '{{alertname="NodeHardwareFault"}}'
    cooldown: {scaled(12)}
    steps:
      - action: drain
        reason: '{{{{ $labels.fault }}}}'
      - after: {scaled(1)}
        action: notify
        notifier: oncall
    on_resolved: [ {{ action: resume }} ]
  - name: tell-oncall
    match: '{{alertname=~"GPUPCIeLinkDegraded|GPUSingleBitECC|NodeNetworkFault"}}'
    steps: [ {{ action: notify, notifier: oncall }} ]
"""


def fingerprint(labels):
    """Prometheus' label-set fingerprint, as medic computes it."""
    h = 14695981039346656037
    for name in sorted(labels):
        for part in (name, labels[name]):
            for byte in part.encode():
                h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
            h = ((h ^ 0xFF) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec="microseconds").replace("+00:00", "Z")


def notification(alert, status):
    return json.dumps({"version": "4", "status": status, "receiver": "medic",
                       "groupKey": "{}:{alertname=\"%s\", instance=\"%s\"}" % (
                           alert["labels"]["alertname"], alert["labels"]["instance"]),
                       "groupLabels": {}, "commonLabels": alert["labels"],
                       "commonAnnotations": {}, "externalURL": "",
                       "alerts": [dict(alert, status=status)]})


def test_infinitehbd_trace(suite):
    with open(TRACE) as f:
        events = json.load(f)
    workdir = suite.subdir("trace")
    names = {}
    for e in events:
        names.setdefault(e["node_id"], f"gpu-node-{len(names) + 1:03d}")
    with open(os.path.join(workdir, "inventory.yaml"), "w") as f:
        f.write("nodes:\n")
        for i in range(1, NODES + 1):
            f.write(f"  - {{ name: gpu-node-{i:03d} }}\n")
    token = write_secret(os.path.join(workdir, "webhook.token"), "trace")
    medic = Medic(suite.medic, workdir, f"auth: {{ webhook_bearer_token_file: {token} }}\n" + CONFIG)
    medic.start()
    suite.on_exit(medic.stop)
    auth = {"Authorization": "Bearer trace"}

    # play: each event at its compressed time; an open fault per (node, class)
    open_alerts = {}
    starts = []
    t0 = time.time() + 0.5
    for e in events:
        at = t0 + e["event_time"] * DAY
        delay = at - time.time()
        if delay > 0:
            time.sleep(delay)
        node = names[e["node_id"]]
        fault = e["fault_type"]
        key = (node, fault["Class"], fault["Desc"])
        if e["event_type"] == "fault_start":
            labels = {"alertname": alertname(fault), "instance": f"{node}:9400",
                      "fault": f'{fault["Class"]}: {fault["Desc"]}'}
            alert = {"labels": labels, "annotations": {}, "startsAt": rfc3339(at),
                     "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "",
                     "fingerprint": fingerprint(labels)}
            if key in open_alerts:
                continue  # the same fault again while open: Alertmanager keeps one alert
            open_alerts[key] = alert
            starts.append(alert)
            body = notification(alert, "firing")
        else:
            alert = open_alerts.pop(key, None)
            if alert is None:
                continue
            body = notification(dict(alert, endsAt=rfc3339(at)), "resolved")
        status, _, resp = medic.post("/webhook", body, headers=auth)
        assert status == 200, resp
    played = time.time() - t0
    # let the engine catch up, the scheduler finish the ladders
    def pending():
        with sqlite3.connect(f"file:{medic.db}?mode=ro", uri=True) as db:
            return db.execute("SELECT count(*) FROM notifications WHERE evaluated_at IS NULL"
                              " AND duplicate_of IS NULL").fetchone()[0]
    wait_until("every notification evaluated", lambda: pending() == 0, timeout=60)
    time.sleep(1)
    decisions = list(reversed(medic.audit("decisions")))

    # 1. every fault start has its decisions
    by_fingerprint = collections.defaultdict(list)
    for d in decisions:
        by_fingerprint[d["fingerprint"]].append(d)
    missing = [a["labels"] for a in starts if not by_fingerprint.get(a["fingerprint"])]
    assert not missing, f"{len(missing)} fault starts without a decision: {missing[:3]}"

    # 2. the caps hold at every moment: replay the decisions' effect
    policy_cooldown = {"gpu-fatal": 6, "node-hardware": 12}
    policy_budget = {"gpu-fatal": (3, 24 * 7)}
    disruptive = {"drain", "ipmi_power_cycle", "power_limit"}
    drained, limited = set(), set()
    peak = 0
    first_steps = collections.defaultdict(list)  # (node, policy) -> times of ladder starts
    acts = collections.defaultdict(list)         # (node, policy) -> times of disruptive acts
    verdicts = collections.Counter()
    storms = 0
    for d in decisions:
        verdicts[d["verdict"]] += 1
        if d["reason"] and d["reason"].startswith("storm started"):
            storms += 1
        if d["verdict"] not in ("execute", "dry_run"):
            continue
        t = datetime.datetime.fromisoformat(d["created_at"].replace("Z", "+00:00")).timestamp()
        if d["action"] == "drain":
            drained.add(d["node"])
        elif d["action"] == "resume":
            drained.discard(d["node"])
        elif d["action"] == "power_limit":
            limited.add(d["node"])
        elif d["action"] == "restore_power_limit":
            limited.discard(d["node"])
        peak = max(peak, len(drained | limited))
        assert len(drained | limited) <= 8, f"fleet cap exceeded at {d}"
        if d["action"] in disruptive:
            acts[(d["node"], d["policy"])].append(t)
            if d["step"] == 1:
                first_steps[(d["node"], d["policy"])].append(t)
    for (node, policy), times in first_steps.items():
        cooldown = policy_cooldown.get(policy)
        for a, b in zip(times, times[1:]):
            assert cooldown is None or b - a >= cooldown / 24 * DAY * 0.999, (
                f"cooldown of {policy} broken on {node}: {b - a:.4f}s apart")
    for (node, policy), times in acts.items():
        if policy in policy_budget:
            count, hours = policy_budget[policy]
            window = hours / 24 * DAY
            for i, t in enumerate(times):
                inside = [x for x in times if t - window < x <= t]
                assert len(inside) <= count, f"budget of {policy} broken on {node} at {t}"

    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    print(f"  trace: {len(events)} events, {len(starts)} fault starts on {len(names)} of "
          f"{NODES} nodes, played in {played:.1f}s (1 day = {DAY}s)")
    print(f"  decisions: {len(decisions)} " +
          ", ".join(f"{v} {k}" for k, v in sorted(verdicts.items())))
    print(f"  peak concurrent disruptions: {peak} (cap 8); storm activations: {storms}")
    reasons = collections.Counter(" ".join(d["reason"].split(":")[0].split()[:5])
                                  for d in decisions if d["verdict"] == "suppressed")
    print("  suppressed by: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common()))
    # repeat offenders (safety.quarantine, 3 incidents in 7 trace days): no
    # person releases them in this replay, so they stay out of service
    # and count against max_disrupted_fraction for the rest of the trace
    quarantined = medic.audit("quarantined")
    print(f"  quarantined nodes (never released here): {len(quarantined)}")
    assert all("repeat offender" in q["cause"] for q in quarantined), quarantined[:3]


if __name__ == "__main__":
    Suite(__doc__).run([test_infinitehbd_trace])
