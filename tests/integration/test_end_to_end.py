#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""End to end, every component real but the GPU: a fault exposed by a DCGM
exporter stand-in makes a real Prometheus rule fire; a real Alertmanager
notifies medic in live mode; medic drains the node in a real slurmctld and,
as the policy's ladder says, power-cycles it through its ipmi_sim BMC; when
the fault clears the node is resumed. The audit log shows every step and
`medic audit verify` passes."""

import os
import subprocess
import time

from lab import (Alertmanager, DcgmExporterStandin, IpmiBmc, Medic, Prometheus, SlurmCluster,
                 Suite, wait_until, write_secret)

TOKEN = "e2e-token"
NODE = "gpu-node-01"

RULES = """groups:
  - name: gpu
    rules:
      - alert: GPUXidError
        expr: DCGM_FI_DEV_XID_ERRORS > 0
        labels: { severity: critical, xid: '{{ $value }}' }
        annotations: { summary: 'Xid {{ $value }} on GPU {{ $labels.gpu }}' }
"""


def test_fault_to_drain_cycle_and_resume(suite):
    exporter = DcgmExporterStandin([NODE, "gpu-node-02"])
    suite.on_exit(exporter.stop)
    cluster = SlurmCluster(suite.workdir, [NODE, "gpu-node-02"])
    suite.on_exit(cluster.stop)
    cluster.start()
    bmc = IpmiBmc(suite.workdir, NODE).boots(cluster, NODE)  # a power cycle reboots it
    suite.on_exit(bmc.stop)
    bmc.start()

    workdir = suite.subdir("medic")
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         "bmc-lab: { username: admin, password: secret }\n")
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"credentials_file: {creds}\nslurm: {{ conf: {cluster.conf} }}\n"
                  "engine: { tick_interval: 250ms }\n"
                  "inventory:\n  node_labels: [Hostname, instance]\n  nodes:\n"
                  f"    - {{ name: {NODE}, bmc: {{ address: '{bmc.address}', credentials: bmc-lab,"
                  f" workarounds: [opensesspriv] }}, slurm: {{ node: {NODE} }} }}\n"
                  "    - { name: gpu-node-02, slurm: { node: gpu-node-02 } }\n"
                  "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
                  "safety: { max_disruptive_in_flight: 1, max_disrupted_fraction: 0.5,\n"
                  "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                  "policies:\n  - name: xid-fell-off-bus\n"
                  "    match: '{alertname=\"GPUXidError\", xid=~\"79|48\"}'\n"
                  "    steps:\n"
                  "      - { action: drain, reason: 'Xid {{ $labels.xid }} on GPU {{ $labels.gpu }}' }\n"
                  "      - { after: 6s, action: ipmi_power_cycle }\n"
                  "    on_resolved: [ { action: resume } ]\n")
    medic.start()
    suite.on_exit(medic.stop)
    am = Alertmanager(suite.workdir, medic.url + "/webhook", bearer_token=TOKEN, name="am",
                      route={"group_wait": "1s", "group_interval": "2s"})
    am.start()
    suite.on_exit(am.stop)
    prom = Prometheus(suite.workdir, [f"127.0.0.1:{exporter.port}"], RULES, am.port)
    prom.start()
    suite.on_exit(prom.stop)
    time.sleep(3)  # a few clean scrapes first

    t0 = time.monotonic()
    exporter.set(NODE, 1, "DCGM_FI_DEV_XID_ERRORS", 79)
    wait_until("the node drained", lambda: "DRAIN" in cluster.node(NODE)[0], timeout=60)
    drained_after = time.monotonic() - t0
    state, reason = cluster.node(NODE)
    assert reason.startswith("Xid 79 on GPU 1 (medic policy xid-fell-off-bus)"), reason
    wait_until("the power cycle", lambda: ["set", "power", "0"] in bmc.log(), timeout=60)
    wait_until("power back on", lambda: bmc.power() == 1 and bmc.log()[-1] == ["set", "power", "1"],
               timeout=30)
    cycled_after = time.monotonic() - t0
    assert "DRAIN" in cluster.node(NODE)[0]  # still out of service while the fault lasts

    exporter.set(NODE, 1, "DCGM_FI_DEV_XID_ERRORS", 0)
    wait_until("the node resumed", lambda: "DRAIN" not in cluster.node(NODE)[0], timeout=60)
    resumed_after = time.monotonic() - t0
    print(f"  drained {drained_after:.1f}s after the fault, power-cycled by "
          f"{cycled_after:.1f}s, resumed {resumed_after:.1f}s after (fault cleared at "
          f"~{cycled_after:.1f}s)")

    decisions = list(reversed(medic.audit("decisions")))
    acted = [(d["action"], d["verdict"]) for d in decisions if d["action"]]
    # the resume comes once the node passed its health check (Slurm
    # answering, the BMC's power on)
    assert acted == [("drain", "execute"), ("ipmi_power_cycle", "execute"),
                     ("verify", "execute"), ("resume", "execute")], decisions
    # Slurm shows the node resumed as soon as scontrol ran; the resume's
    # outcome is committed right after: wait for its row
    outcomes = wait_until("the resume's outcome", lambda: (lambda rows: len(rows) == 4 and rows)(
        [a for a in reversed(medic.audit("actions")) if a["phase"] == "outcome"]), timeout=20)
    assert [(a["action"], a["result"]) for a in outcomes] == [
        ("drain", "succeeded"), ("ipmi_power_cycle", "succeeded"), ("verify", "succeeded"),
        ("resume", "succeeded")], outcomes
    alerts = medic.audit("alerts", "--node", NODE)
    assert {a["status"] for a in alerts} == {"firing", "resolved"}, alerts
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0 and "4 decisions, 8 actions and" in verify.stdout, verify.stdout


if __name__ == "__main__":
    Suite(__doc__).run([test_fault_to_drain_cycle_and_resume])
