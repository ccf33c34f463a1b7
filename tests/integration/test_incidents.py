#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Incidents against a real Slurm cluster and real ipmi_sim BMCs: a power
cycle waits for its drain to succeed (a drain that fails - a stand-in
scontrol that exits 1 - never leads to a power cycle, and on-call hears);
a node an operator resumed by hand is not power-cycled; a node's eight
GPU alerts make one drain, and the node is resumed only when the last of
them resolved; an alert Alertmanager keeps re-sending (each copy a
duplicate) does not expire, and its ladder goes on. Every change of every
incident is in the audit log."""

import json
import os
import subprocess
import time

from lab import (AUDIT_BACKEND, GatedScontrol, IpmiBmc, Medic, RecordingReceiver, SlurmCluster,
                 SteppedClock, Suite, wait_until, write_secret)

TOKEN = "incident-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def rfc3339(t):
    import datetime
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def payload(node, starts_at, gpus=("0",), status="firing"):
    alerts = [{"status": status,
               "labels": {"alertname": "GPUXidError", "instance": node, "gpu": g, "xid": "79"},
               "annotations": {}, "startsAt": rfc3339(starts_at),
               "endsAt": rfc3339(time.time()) if status == "resolved" else
               "0001-01-01T00:00:00Z"} for g in gpus]
    return json.dumps({"version": "4", "groupKey": f"g-{node}", "status": status,
                       "receiver": "medic", "alerts": alerts})


XID_STEPS = "      - { action: drain }\n      - { after: 3s, action: ipmi_power_cycle }\n"


def start_medic(suite, name, cluster_conf, bmcs, oncall, scontrol=None, safety="",
                xid_steps=XID_STEPS, xid_extra="", more_policies="", env=None, labels=None):
    workdir = suite.subdir(name)
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         "bmc-lab: { username: admin, password: secret }\n")
    nodes = "".join(
        f"    - {{ name: {n}, slurm: {{ node: {n} }}, bmc: {{ address: '{b.address}', "
        "credentials: bmc-lab, workarounds: [opensesspriv] }"
        + (f", labels: {{ {(labels or {})[n]} }}" if n in (labels or {}) else "") + " }\n"
        for n, b in bmcs.items())
    slurm = f"slurm: {{ conf: {cluster_conf}" + (f", scontrol: {scontrol}" if scontrol else "")
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"credentials_file: {creds}\n{slurm} }}\n"
                  f"inventory:\n  nodes:\n{nodes}"
                  f"notifiers: {{ oncall: {{ type: webhook, url: '{oncall.url}/hook' }} }}\n"
                  "engine: { tick_interval: 200ms }\n"
                  f"safety: {{ max_disruptive_in_flight: 4, max_disrupted_fraction: 1, {safety}\n"
                  "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                  "policies:\n  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
                  f"    steps:\n{xid_steps}{xid_extra}"
                  "    on_resolved: [ { action: resume } ]\n"
                  "  - name: canary\n    match: '{alertname=\"Canary\"}'\n"
                  "    steps: [ { action: notify, notifier: oncall } ]\n" + more_policies)
    medic.env = env
    medic.start()
    suite.on_exit(medic.stop)
    return medic


def lab(suite, *nodes):
    cluster = SlurmCluster(suite.workdir, list(nodes))
    suite.on_exit(cluster.stop)
    cluster.start()
    bmcs = {}
    for n in nodes:
        b = IpmiBmc(suite.workdir, n).boots(cluster, n)  # a power cycle reboots the node
        b.start()
        suite.on_exit(b.stop)
        bmcs[n] = b
    oncall = RecordingReceiver()
    suite.on_exit(oncall.stop)
    return cluster, bmcs, oncall


def incident(medic, node):
    rows = medic.audit("incidents", "--node", node)
    return rows[0] if rows else None


def wait_state(medic, node, state):
    """Waits until node's latest incident is in state; returns its row."""
    return wait_until(f"the {state} incident on {node}", lambda: (
        incident(medic, node) or {}).get("state") == state and incident(medic, node), timeout=30)


def outcomes(medic, action):
    return [a for a in medic.audit("actions") if a["phase"] == "outcome"
            and a["action"] == action]


def test_group_cap_holds_a_second_node_of_a_rack(suite):
    """safety.group_caps: two nodes of one rack alerting at once get one
    drain, the other rack's node its own; the page and /metrics show what
    the rack holds, and the held drain runs once the first node is back."""
    nodes = ["gpu-node-40", "gpu-node-41", "gpu-node-42"]
    cluster, bmcs, oncall = lab(suite, *nodes)
    medic = start_medic(suite, "group-caps", cluster.conf, bmcs, oncall,
                        safety="group_caps: [ { label: rack, max_disrupted: 1 } ],",
                        xid_steps="      - { action: drain }\n",
                        labels={"gpu-node-40": "rack: r1", "gpu-node-41": "rack: r1",
                                "gpu-node-42": "rack: r2"})
    t0 = time.time()
    for n in nodes:
        assert medic.post("/webhook", payload(n, t0), headers=AUTH)[0] == 200
    wait_until("two drains", lambda: len([o for o in outcomes(medic, "drain")
                                          if o["result"] == "succeeded"]) == 2, timeout=30)
    drained = sorted(o["node"] for o in outcomes(medic, "drain"))
    held = wait_until("the held drain's decision", lambda: [
        d for d in medic.audit("decisions", "--node", drained[0] == "gpu-node-40" and
                               "gpu-node-41" or "gpu-node-40")
        if d["verdict"] == "suppressed" and "group cap" in d["reason"]], timeout=10)
    assert "of the 2 nodes of rack=r1 already disrupted" in held[0]["reason"], held
    # steps counted from 1, as the reason ("step 1 is decided again") and medic dry-run count
    assert held[0]["step"] == 1 and "step 1 is decided again" in held[0]["reason"], held
    assert "gpu-node-42" in drained and len(set(drained) & {"gpu-node-40", "gpu-node-41"}) == 1
    r1 = 'medic_group_disrupted_nodes{label="rack",group="r1"}'
    assert medic.metric(r1, headers=AUTH) == 1
    assert medic.metric('medic_group_max_disrupted_nodes{label="rack",group="r1"}',
                        headers=AUTH) == 1
    status, _, page = medic.get("/", headers=AUTH)
    assert status == 200 and b"group caps:" in page and b"rack=r1" in page, page
    # on-call hears that a broken node stays in service (the held steps' notice)
    told = wait_until("the held steps' notice", lambda: [
        r for r in oncall.received() if b"medic held or suppressed disruptive steps" in r["body"]],
        timeout=30)
    assert len(told) == 1 and b"group cap" in told[0]["body"], told
    # the rack's drained node comes back: the held drain runs
    first = [n for n in drained if n != "gpu-node-42"][0]
    assert medic.post("/webhook", payload(first, t0, status="resolved"), headers=AUTH)[0] == 200
    wait_until("the resume", lambda: [o for o in outcomes(medic, "resume")
                                      if o["result"] == "succeeded"], timeout=60)
    wait_until("the held drain", lambda: len([o for o in outcomes(medic, "drain")
                                              if o["result"] == "succeeded"]) == 3, timeout=60)
    assert medic.metric(r1, headers=AUTH) == 1
    assert "DRAIN" not in cluster.node(first)[0]


def test_slurm_maintenance_reservation_holds_a_drain(suite):
    """safety.maintenance_from_slurm: a node in a Slurm maintenance
    reservation (Flags=MAINT, made with scontrol against real slurmctld)
    has its drain held as in a maintenance window; a node outside it is
    drained."""
    nodes = ["gpu-node-60", "gpu-node-61"]
    cluster, bmcs, oncall = lab(suite, *nodes)
    made = cluster.scontrol("create", "reservation", "ReservationName=pdu-swap",
                            "Nodes=gpu-node-60", "StartTime=now", "Duration=60", "Users=root",
                            "Flags=MAINT")
    assert made.returncode == 0, made.stdout + made.stderr
    wait_until("the node in maintenance", lambda: "MAINT" in cluster.node("gpu-node-60")[0],
               timeout=20)
    medic = start_medic(suite, "slurm-maint", cluster.conf, bmcs, oncall,
                        safety="maintenance_from_slurm: true,",
                        xid_steps="      - { action: drain }\n")
    # the reader's first look at Slurm is at the start; the alert comes after it
    wait_until("medic's first look at Slurm",
               lambda: medic.metric("medic_slurm_maintenance_nodes", headers=AUTH) == 1,
               timeout=30)
    t0 = time.time()
    for n in nodes:
        assert medic.post("/webhook", payload(n, t0), headers=AUTH)[0] == 200
    drained = wait_until("the drain outside the reservation", lambda: [
        o for o in outcomes(medic, "drain") if o["result"] == "succeeded"], timeout=30)
    assert [o["node"] for o in drained] == ["gpu-node-61"], drained
    held = wait_until("the held drain", lambda: [
        d for d in medic.audit("decisions", "--node", "gpu-node-60")
        if d["verdict"] == "suppressed"], timeout=10)
    assert "is in a Slurm maintenance reservation" in held[0]["reason"], held
    assert "DRAIN" not in cluster.node("gpu-node-60")[0]


def test_slurm_maintenance_unknown_holds(suite):
    """safety.maintenance_from_slurm fails closed: while medic cannot read
    Slurm's reservations (an scontrol that cannot reach slurmctld), a drain
    is held with the reason and nothing reaches Slurm; once the read works,
    the held drain runs."""
    node = "gpu-node-62"
    cluster, bmcs, oncall = lab(suite, node)
    gate = os.path.join(suite.workdir, "slurmctld-away")
    open(gate, "w").close()
    scontrol = os.path.join(suite.workdir, "away-scontrol")
    with open(scontrol, "w") as f:
        f.write(f"#!/bin/sh\nif [ -e {gate} ]; then case \" $* \" in *\" show \"*)\n"
                "  echo 'slurm_load_node error: Unable to contact slurm controller' >&2; exit 1;;\n"
                "esac; fi\nexec /usr/bin/scontrol \"$@\"\n")
    os.chmod(scontrol, 0o755)
    medic = start_medic(suite, "slurm-maint-unknown", cluster.conf, bmcs, oncall,
                        scontrol=scontrol, safety="maintenance_from_slurm: true,",
                        xid_steps="      - { action: drain }\n")
    assert medic.post("/webhook", payload(node, time.time()), headers=AUTH)[0] == 200
    held = wait_until("the held drain", lambda: [
        d for d in medic.audit("decisions", "--node", node) if d["verdict"] == "suppressed"],
        timeout=30)
    assert "Slurm's maintenance reservations are not known" in held[0]["reason"], held
    assert medic.metric("medic_slurm_maintenance_known", headers=AUTH) == 0
    assert outcomes(medic, "drain") == [] and "DRAIN" not in cluster.node(node)[0]
    os.unlink(gate)  # slurmctld reachable again: the reader's retry sees it
    drained = wait_until("the drain once Slurm is read", lambda: [
        o for o in outcomes(medic, "drain") if o["result"] == "succeeded"], timeout=30)
    assert drained[0]["node"] == node and "DRAIN" in cluster.node(node)[0]
    assert medic.metric("medic_slurm_maintenance_known", headers=AUTH) == 1


def test_failed_drain_stops_the_ladder(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-01")
    # the stand-in for an scontrol that cannot reach slurmctld: exits 1
    failing = os.path.join(suite.workdir, "failing-scontrol")
    with open(failing, "w") as f:
        f.write("#!/bin/sh\necho 'slurm_update error: Unable to contact slurm controller' >&2\n"
                "exit 1\n")
    os.chmod(failing, 0o755)
    medic = start_medic(suite, "failing", cluster.conf, bmcs, oncall, scontrol=failing)
    assert medic.post("/webhook", payload("gpu-node-01", time.time()), headers=AUTH)[0] == 200
    failed = wait_state(medic, "gpu-node-01", "failed")
    assert "drain failed" in failed["cause"], failed
    told = wait_until("on-call told", lambda: [
        r for r in oncall.received() if b"medic stopped incident" in r["body"]], timeout=30)
    assert b"gpu-node-01" in told[0]["body"]
    # the power cycle was due 3 s after the alert: once that passed, a
    # canary alert's decision proves the engine ran a round after it
    due = time.time() + 4
    wait_until("the power cycle's time to pass", lambda: time.time() > due, timeout=10)
    canary = payload("canary", time.time()).replace("GPUXidError", "Canary")
    assert medic.post("/webhook", canary, headers=AUTH)[0] == 200
    wait_until("the canary's decision", lambda: [
        d for d in medic.audit("decisions") if d["policy"] == "canary"], timeout=10)
    assert bmcs["gpu-node-01"].log() == [], bmcs["gpu-node-01"].log()
    assert outcomes(medic, "ipmi_power_cycle") == []
    changes = [c["state"] for c in reversed(medic.audit("changes", "--node", "gpu-node-01"))]
    assert changes == ["open", "draining", "failed"], changes


def test_operator_resume_is_not_power_cycled(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-02")
    medic = start_medic(suite, "resumed", cluster.conf, bmcs, oncall)
    assert medic.post("/webhook", payload("gpu-node-02", time.time()), headers=AUTH)[0] == 200
    wait_until("the drain", lambda: [o for o in outcomes(medic, "drain")
                                     if o["result"] == "succeeded"], timeout=30)
    # the operator puts the node back in service by hand before the cycle
    assert cluster.scontrol("update", "NodeName=gpu-node-02", "State=RESUME").returncode == 0
    refused = wait_until("the refused power cycle", lambda: outcomes(medic, "ipmi_power_cycle"),
                         timeout=30)[0]
    assert refused["result"] == "refused" and "no longer drained" in refused["detail"], refused
    assert bmcs["gpu-node-02"].log() == [], bmcs["gpu-node-02"].log()
    state = wait_state(medic, "gpu-node-02", "failed")
    assert "ipmi_power_cycle refused" in state["cause"], state
    failed = medic.audit("incidents", "--state", "failed")
    assert [i["node"] for i in failed] == ["gpu-node-02"], failed


def test_drains_reconciled_with_slurm(suite):
    """What medic records as its drain is what Slurm shows: an operator
    resumes a node medic drained; at the next read of Slurm's nodes medic
    lets its drain go (recorded, on-call told), the node no longer holds
    its group's cap, and the drain the cap held on another node runs. Before
    the resume, reads go on and change nothing."""
    nodes = ["gpu-node-43", "gpu-node-44"]
    cluster, bmcs, oncall = lab(suite, *nodes)
    medic = start_medic(suite, "reconcile", cluster.conf + ", read_interval: 1s", bmcs, oncall,
                        safety="group_caps: [ { nodes: 'gpu-node-[43-44]', max_disrupted: 1 } ],",
                        xid_steps="      - { action: drain }\n")
    t0 = time.time()
    assert medic.post("/webhook", payload("gpu-node-43", t0), headers=AUTH)[0] == 200
    wait_until("the drain", lambda: [o for o in outcomes(medic, "drain")
                                     if o["result"] == "succeeded"], timeout=30)
    assert medic.post("/webhook", payload("gpu-node-44", t0), headers=AUTH)[0] == 200
    wait_until("the cap holding gpu-node-44", lambda: [
        d for d in medic.audit("decisions", "--node", "gpu-node-44")
        if d["verdict"] == "suppressed" and "group cap" in d["reason"]], timeout=30)
    # Slurm shows medic's drain: reads go on, and nothing changes
    reads = medic.metric("medic_slurm_node_reads_total", headers=AUTH)
    wait_until("two more reads of Slurm", lambda: medic.metric(
        "medic_slurm_node_reads_total", headers=AUTH) >= reads + 2, timeout=30)
    assert medic.metric("medic_disrupted_nodes", headers=AUTH) == 1
    assert not [c for c in medic.audit("changes") if "Slurm shows" in c["cause"]]
    assert len(outcomes(medic, "drain")) == 1
    # the operator puts gpu-node-43 back in service by hand
    assert cluster.scontrol("update", "NodeName=gpu-node-43", "State=RESUME").returncode == 0
    change = wait_until("the drain let go", lambda: [
        c for c in medic.audit("changes", "--node", "gpu-node-43")
        if "Slurm shows node gpu-node-43 in service" in c["cause"]], timeout=30)
    assert "someone resumed it: medic holds no drain there now" in change[0]["cause"], change
    told = wait_until("on-call told", lambda: [
        r for r in oncall.received() if b"drain of node 'gpu-node-43' is gone" in r["body"]],
        timeout=30)
    assert len(told) == 1, told
    # the slot is free: gpu-node-44's held drain runs, and only it holds the cap
    wait_until("gpu-node-44 drained", lambda: [
        o for o in outcomes(medic, "drain") if o["node"] == "gpu-node-44"
        and o["result"] == "succeeded"], timeout=30)
    assert "DRAIN" in cluster.node("gpu-node-44")[0]
    assert "DRAIN" not in cluster.node("gpu-node-43")[0]
    assert medic.metric("medic_disrupted_nodes", headers=AUTH) == 1
    # the resolve of gpu-node-43 resumes nothing: medic holds no drain there
    assert medic.post("/webhook", payload("gpu-node-43", t0, status="resolved"),
                      headers=AUTH)[0] == 200
    wait_until("gpu-node-43's incident closed", lambda: (incident(medic, "gpu-node-43") or {}).get(
        "state") in ("recovered", "closed"), timeout=30)
    assert [o for o in outcomes(medic, "resume") if o["node"] == "gpu-node-43"] == []


def test_eight_gpus_one_incident(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-03")
    medic = start_medic(suite, "eight", cluster.conf, bmcs, oncall)
    t0 = time.time()
    gpus = [str(g) for g in range(8)]
    assert medic.post("/webhook", payload("gpu-node-03", t0, gpus), headers=AUTH)[0] == 200
    cycled = wait_until("the power cycle", lambda: [
        o for o in outcomes(medic, "ipmi_power_cycle") if o["result"] == "succeeded"], timeout=60)
    assert len(cycled) == 1
    assert len(outcomes(medic, "drain")) == 1
    assert [e[1:] for e in bmcs["gpu-node-03"].log()].count(["power", "0"]) <= 1
    # GPU 0 resolves while the other seven still fire: the node stays out
    assert medic.post("/webhook", payload("gpu-node-03", t0, gpus[:1], "resolved"),
                      headers=AUTH)[0] == 200
    wait_until("the resolve evaluated", lambda: len(medic.audit("alerts")) >= 9, timeout=10)
    canary = payload("canary", time.time()).replace("GPUXidError", "Canary")
    assert medic.post("/webhook", canary, headers=AUTH)[0] == 200
    wait_until("a round after it (the canary's decision)", lambda: [
        d for d in medic.audit("decisions") if d["policy"] == "canary"], timeout=10)
    assert medic.metric("medic_open_incidents", headers=AUTH) == 2  # the node's and the canary's
    assert outcomes(medic, "resume") == []
    assert "DRAIN" in cluster.node("gpu-node-03")[0]
    # the last of them resolves: resumed once
    assert medic.post("/webhook", payload("gpu-node-03", t0, gpus[1:], "resolved"),
                      headers=AUTH)[0] == 200
    resumed = wait_until("the resume", lambda: outcomes(medic, "resume"), timeout=30)
    assert len(resumed) == 1 and resumed[0]["result"] == "succeeded", resumed
    assert "DRAIN" not in cluster.node("gpu-node-03")[0]
    wait_state(medic, "gpu-node-03", "recovered")
    assert medic.metric("medic_disrupted_nodes", headers=AUTH) == 0
    # the node's whole story in one timeline, oldest first
    story = medic.audit("timeline", "--node", "gpu-node-03")
    assert [r["time"] for r in story] == sorted(r["time"] for r in story), story
    kinds = [r["kind"] for r in story]
    assert kinds[0] == "alert" and story[0]["what"] == "GPUXidError firing", story[0]
    assert kinds.count("alert") == 16, kinds  # eight firing, eight resolved
    assert [r["what"].split(": ")[1] for r in story if r["kind"] == "incident"] == [
        f"{c['from']} -> {c['state']}"
        for c in reversed(medic.audit("changes", "--node", "gpu-node-03"))]
    done = [r["what"].split()[0] for r in story
            if r["kind"] == "action" and " outcome " in r["what"]]
    assert done == ["drain", "ipmi_power_cycle", "verify", "resume"], story
    assert len([r for r in story if r["kind"] == "decision"]) == len(
        medic.audit("decisions", "--node", "gpu-node-03"))
    assert not [r for r in story if "canary" in r["what"] + r["detail"]], story
    # the newest rows when limited, still oldest first
    assert medic.audit("timeline", "--node", "gpu-node-03", "--limit", "3") == story[-3:]
    for bad in ([], ["--node", "gpu-node-03", "--verdict", "execute"]):
        out = subprocess.run([suite.medic, "audit", "timeline", "--db", medic.db, *bad],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and "--node" in out.stderr, out


def test_reload_closes_orphaned_incidents(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-04")
    medic = start_medic(suite, "reload", cluster.conf, bmcs, oncall)
    assert medic.post("/webhook", payload("gpu-node-04", time.time()), headers=AUTH)[0] == 200
    wait_until("the drain", lambda: [o for o in outcomes(medic, "drain")
                                     if o["result"] == "succeeded"], timeout=30)
    # the policy is renamed (and narrowed) while its incident holds the drain
    text = open(medic.config_path).read()
    with open(medic.config_path, "w") as f:
        f.write(text.replace("- name: xid\n", "- name: xid-v2\n")
                .replace('alertname="GPUXidError"', 'alertname="GPUXidErrorV2"'))
    status, _, body = medic.post("/-/reload", "", content_type=None, headers=AUTH)
    assert status == 200, body
    resumed = wait_until("the resume", lambda: outcomes(medic, "resume"), timeout=30)
    assert resumed[0]["result"] == "succeeded", resumed
    assert "DRAIN" not in cluster.node("gpu-node-04")[0]
    decision = [d for d in medic.audit("decisions") if d["action"] == "resume"][0]
    assert "no longer configured" in decision["reason"], decision
    closed = wait_state(medic, "gpu-node-04", "closed")
    assert "reload" in closed["cause"], closed
    assert medic.metric("medic_disrupted_nodes", headers=AUTH) == 0


def test_lost_resolve_expires(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-05")
    medic = start_medic(suite, "expiry", cluster.conf, bmcs, oncall,
                        safety="alert_expiry: 2s, max_alert_age: 1h,")
    # the power cycle after 3 s would come after the expiry: the alert is
    # sent once and never again (its resolve is lost)
    assert medic.post("/webhook", payload("gpu-node-05", time.time()), headers=AUTH)[0] == 200
    expired = wait_state(medic, "gpu-node-05", "expired")
    assert "alert_expiry" in expired["cause"], expired
    resumed = outcomes(medic, "resume")
    assert resumed and resumed[0]["result"] == "succeeded", resumed
    assert "DRAIN" not in cluster.node("gpu-node-05")[0]
    assert outcomes(medic, "ipmi_power_cycle") == [] and bmcs["gpu-node-05"].log() == []


def test_repeats_keep_the_incident_open(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-07")
    medic = start_medic(suite, "repeats", cluster.conf, bmcs, oncall,
                        safety="alert_expiry: 2s, max_alert_age: 1h,")
    fired = payload("gpu-node-07", time.time())
    answers = []

    def resend_until_power_cycled():
        """Alertmanager re-sends the byte-identical notification (every
        repeat_interval; here every 0.3 s at least): each is a duplicate."""
        status, _, body = medic.post("/webhook", fired, headers=AUTH)
        answers.append((status, json.loads(body), time.monotonic()))
        return [o for o in outcomes(medic, "ipmi_power_cycle") if o["result"] == "succeeded"]
    # the power cycle, 3 s after the alert fired, comes after alert_expiry
    # (2 s): it runs only if the repeats kept the alert from expiring
    wait_until("the power cycle of the alert kept firing", resend_until_power_cycled,
               timeout=30, interval=0.3)
    assert all(status == 200 for status, _, _ in answers), answers
    assert all(a["duplicate"] for _, a, _ in answers[1:]), answers
    # the repeats outlived alert_expiry (2 s), and none came more than
    # alert_expiry after the one before it: counted by time, not by number
    # (a slow machine sends fewer in the same span)
    sent = [at for _, _, at in answers]
    assert sent[-1] - sent[0] > 2, answers
    assert max(b - a for a, b in zip(sent, sent[1:])) < 2, answers
    assert incident(medic, "gpu-node-07")["state"] != "expired"
    assert "DRAIN" in cluster.node("gpu-node-07")[0] and bmcs["gpu-node-07"].log()
    # a repeat decides nothing again: one drain, one power cycle
    decided = [d for d in medic.audit("decisions", "--node", "gpu-node-07") if d["action"]]
    assert sorted(d["action"] for d in decided) == ["drain", "ipmi_power_cycle"], decided
    # the repeats stop (the resolve is lost): the incident expires, the node is resumed
    expired = wait_state(medic, "gpu-node-07", "expired")
    assert "alert_expiry" in expired["cause"], expired
    wait_until("the resume", lambda: [o for o in outcomes(medic, "resume")
                                      if o["result"] == "succeeded"], timeout=30)
    assert "DRAIN" not in cluster.node("gpu-node-07")[0]


def block_audit_log(suite, medic):
    """The audit log can no longer commit: on SQLite a file size limit of
    one byte on medic's process (a full disk; its own log, a file, cannot be
    written either), on PostgreSQL the server stopped. Returns what lets it
    commit again."""
    if AUDIT_BACKEND == "postgresql":
        suite.postgres.stop()
        return suite.postgres.restart
    pid = str(medic.process.pid)
    subprocess.run(["prlimit", "--pid", pid, "--fsize=1:unlimited"], check=True)
    return lambda: subprocess.run(["prlimit", "--pid", pid, "--fsize=unlimited:unlimited"],
                                  check=True)


def test_outcome_kept_while_the_log_cannot_commit(suite):
    """The audit log cannot commit while a drain runs (a full disk under
    SQLite, the server down under PostgreSQL): the drain's outcome is kept,
    written when the store commits again, and the incident goes on: the
    resolve resumes the node and its cap slot is let go."""
    cluster, bmcs, oncall = lab(suite, "gpu-node-05")
    # a stand-in around the real scontrol that holds a drain until the
    # test opens the gate, so that the log stops committing while it runs
    gated = GatedScontrol(suite.workdir)
    medic = start_medic(suite, "full", cluster.conf, bmcs, oncall, scontrol=gated.path)
    started = time.time()
    assert medic.post("/webhook", payload("gpu-node-05", started), headers=AUTH)[0] == 200
    gated.wait_held()
    unblock = block_audit_log(suite, medic)
    gated.release()
    wait_until("Slurm to drain the node", lambda: "DRAIN" in cluster.node("gpu-node-05")[0],
               timeout=30)
    wait_until("medic to keep the outcome it cannot write",
               lambda: medic.metric("medic_action_outcomes_unrecorded", headers=AUTH) == 1, timeout=30)
    if AUDIT_BACKEND == "sqlite":  # (reading the log needs the server on PostgreSQL)
        assert incident(medic, "gpu-node-05")["state"] == "draining"
    unblock()
    wait_until("the kept outcome", lambda: [o for o in outcomes(medic, "drain")
                                            if o["result"] == "succeeded"], timeout=30)
    # (a reader may see the row before its sync ends and medic counts it)
    wait_until("nothing kept unrecorded", lambda: medic.metric(
        "medic_action_outcomes_unrecorded", headers=AUTH) == 0, timeout=30)
    wait_until("the incident to go on", lambda: incident(medic, "gpu-node-05")["state"]
               in ("drained", "cycling", "cycled"), timeout=30)
    resolved = payload("gpu-node-05", started, status="resolved")
    wait_until("the resolve to be taken", lambda: medic.post("/webhook", resolved,
                                                             headers=AUTH)[0] == 200, timeout=30)
    wait_state(medic, "gpu-node-05", "recovered")
    assert "DRAIN" not in cluster.node("gpu-node-05")[0], cluster.node("gpu-node-05")
    wait_until("the cap slot let go", lambda: medic.metric("medic_disrupted_nodes", headers=AUTH) == 0,
               timeout=30)
    assert [o["result"] for o in outcomes(medic, "resume")] == ["succeeded"]


def test_restart_waits_for_the_alert_again(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-06")
    medic = start_medic(suite, "restart", cluster.conf, bmcs, oncall)
    fired = payload("gpu-node-06", time.time())
    assert medic.post("/webhook", fired, headers=AUTH)[0] == 200
    wait_until("the drain", lambda: [o for o in outcomes(medic, "drain")
                                     if o["result"] == "succeeded"], timeout=30)
    medic.stop()
    # medic is down across the power cycle's time (3 s after the alert)
    due = time.time() + 4
    wait_until("the power cycle's time to pass", lambda: time.time() > due, timeout=10)
    medic.start()
    canary = payload("canary", time.time()).replace("GPUXidError", "Canary")
    assert medic.post("/webhook", canary, headers=AUTH)[0] == 200
    wait_until("a round after the start (the canary's decision)", lambda: [
        d for d in medic.audit("decisions") if d["policy"] == "canary"], timeout=10)
    assert outcomes(medic, "ipmi_power_cycle") == [] and bmcs["gpu-node-06"].log() == []
    # Alertmanager re-sends the alert: it still fires, so the overdue step runs
    again = fired.replace('"groupKey": "g-gpu-node-06"', '"groupKey": "g-gpu-node-06-again"')
    assert medic.post("/webhook", again, headers=AUTH)[0] == 200
    cycled = wait_until("the power cycle", lambda: outcomes(medic, "ipmi_power_cycle"),
                        timeout=30)
    assert cycled[0]["result"] == "succeeded", cycled
    assert ["set", "power", "0"] in bmcs["gpu-node-06"].log()
    wait_state(medic, "gpu-node-06", "cycled")
    # what on-call sees over HTTP, and the chains intact
    status, _, body = medic.get("/api/v1/incidents?node=gpu-node-06", headers=AUTH)
    assert status == 200 and json.loads(body)["data"][0]["state"] == "cycled", body
    status, _, body = medic.get("/api/v1/changes?node=gpu-node-06", headers=AUTH)
    states = [c["state"] for c in reversed(json.loads(body)["data"])]
    assert states == ["open", "draining", "drained", "cycling", "cycled"], states
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0 and "incident changes" in verify.stdout, verify


def test_restart_grace_decides_from_the_stored_state(suite):
    """medic is down across a power cycle's time; after the restart no
    alert is re-sent (Alertmanager's next re-send is hours away): once
    safety.restart_grace has passed, the due power cycle is decided from
    the stored state, its guards checked again, and says so. An alert whose
    resolve Alertmanager retries within the grace is resumed instead, never
    cycled."""
    cluster, bmcs, oncall = lab(suite, "gpu-node-10", "gpu-node-11")
    medic = start_medic(suite, "grace", cluster.conf, bmcs, oncall, safety="restart_grace: 6s,")
    started = time.time()
    for node in ("gpu-node-10", "gpu-node-11"):
        assert medic.post("/webhook", payload(node, started), headers=AUTH)[0] == 200
    wait_until("both drains", lambda: len([o for o in outcomes(medic, "drain")
                                           if o["result"] == "succeeded"]) == 2, timeout=30)
    medic.stop()
    due = time.time() + 4  # medic is down across the power cycles' time
    wait_until("the power cycles' time to pass", lambda: time.time() > due, timeout=10)
    medic.start()
    restarted = time.monotonic()
    resolved = payload("gpu-node-11", started, status="resolved")
    assert medic.post("/webhook", resolved, headers=AUTH)[0] == 200
    wait_state(medic, "gpu-node-11", "recovered")
    assert time.monotonic() - restarted < 6, "the resolve came after the grace; widen it"
    cycled = wait_until("the power cycle after the grace", lambda: outcomes(
        medic, "ipmi_power_cycle"), timeout=30)
    assert time.monotonic() - restarted >= 5.5, "the power cycle did not wait for the grace"
    assert [c["node"] for c in cycled] == ["gpu-node-10"] and cycled[0]["result"] == "succeeded"
    assert ["set", "power", "0"] in bmcs["gpu-node-10"].log() and bmcs["gpu-node-11"].log() == []
    decided = [d for d in medic.audit("decisions", "--node", "gpu-node-10")
               if d["action"] == "ipmi_power_cycle"]
    assert len(decided) == 1 and "restart_grace" in decided[0]["reason"], decided
    assert "DRAIN" not in cluster.node("gpu-node-11")[0]


def off_and_idle(medic, offset, node):
    """On PostgreSQL, a replica whose clock is off from the database's
    leads nothing: it shows the offset, and decides nothing meanwhile."""
    wait_until("the clock's offset seen", lambda: abs(medic.metric(
        "medic_ha_clock_offset_seconds", headers=AUTH) - offset) < 60, timeout=15)
    assert medic.audit("decisions", "--node", node) == []


def test_clock_set_right_after_start(suite):
    """medic starts on a wall clock 3 h slow (the clock stand-in), and time
    sync sets it right a moment later, while nothing is disrupted: the
    engine's clock follows (its lead back to 0), so an alert that started
    2 h ago is stale and drains nothing. An alert that arrives before the
    fix, saying it started 2 h ago (3 h ahead of medic's wrong clock), is
    held, not drained, and stays undrained once the clock is right. On
    PostgreSQL the replica with the wrong clock decides nothing until the
    clock is right (it does not lead), then judges the same alerts stale."""
    cluster, bmcs, oncall = lab(suite, "gpu-node-14", "gpu-node-15")
    clock = SteppedClock(suite.subdir("slow-clock"))
    clock.set(-3 * 3600)
    medic = start_medic(suite, "slow-clock", cluster.conf, bmcs, oncall,
                        safety="max_alert_age: 1h,", xid_steps="      - { action: drain }\n",
                        env=clock.env())
    two_hours_ago = time.time() - 2 * 3600
    assert medic.post("/webhook", payload("gpu-node-14", two_hours_ago), headers=AUTH)[0] == 200
    if AUDIT_BACKEND == "postgresql":
        off_and_idle(medic, -3 * 3600, "gpu-node-14")
    else:
        held = wait_until("the drain held", lambda: [
            d for d in medic.audit("decisions", "--node", "gpu-node-14")
            if d["action"] == "drain" and d["verdict"] == "suppressed"], timeout=30)
        assert "ahead of medic's clock: one of the two clocks is wrong" in held[0]["reason"], \
            held
    # time sync sets the clock right
    clock.set(0)
    if AUDIT_BACKEND == "sqlite":
        wait_until("the engine's clock following the step", lambda: abs(medic.metric(
            "medic_wall_clock_lead_seconds", headers=AUTH)) < 5 and medic.metric(
            "medic_wall_clock_steps_total", headers=AUTH) >= 1, timeout=15)
    assert medic.post("/webhook", payload("gpu-node-15", two_hours_ago), headers=AUTH)[0] == 200
    stale = wait_until("the stale alert suppressed", lambda: [
        d for d in medic.audit("decisions", "--node", "gpu-node-15")
        if d["action"] == "drain" and d["verdict"] == "suppressed"], timeout=30)
    assert "older than max_alert_age 1h" in stale[0]["reason"], stale
    # the held one is decided again on the right clock: stale too
    wait_until("gpu-node-14 judged stale", lambda: [
        d for d in medic.audit("decisions", "--node", "gpu-node-14")
        if d["action"] == "drain" and "older than max_alert_age" in d["reason"]], timeout=30)
    assert outcomes(medic, "drain") == []
    assert all("DRAIN" not in cluster.node(n)[0] for n in ("gpu-node-14", "gpu-node-15"))


def test_clock_fast_at_start_decides_again(suite):
    """medic starts on a wall clock 3 h fast: a fresh alert looks 3 h old
    and its drain is suppressed as stale. Once time sync sets the clock
    right (nothing disrupted), the ladder the wrong clock stopped is decided
    again, and the node is drained. On PostgreSQL the replica decides
    nothing while its clock is off, then drains the node once it is right."""
    cluster, bmcs, oncall = lab(suite, "gpu-node-16")
    clock = SteppedClock(suite.subdir("fast-clock"))
    clock.set(3 * 3600)
    medic = start_medic(suite, "fast-clock", cluster.conf, bmcs, oncall,
                        safety="max_alert_age: 1h,", xid_steps="      - { action: drain }\n",
                        env=clock.env())
    assert medic.post("/webhook", payload("gpu-node-16", time.time()), headers=AUTH)[0] == 200
    if AUDIT_BACKEND == "postgresql":
        off_and_idle(medic, 3 * 3600, "gpu-node-16")
    else:
        stale = wait_until("the drain suppressed as stale", lambda: [
            d for d in medic.audit("decisions", "--node", "gpu-node-16")
            if d["action"] == "drain" and "older than max_alert_age" in d["reason"]], timeout=30)
        assert stale and outcomes(medic, "drain") == []
    clock.set(0)
    drained = wait_until("the drain decided again and run", lambda: [
        o for o in outcomes(medic, "drain") if o["result"] == "succeeded"], timeout=30)
    assert len(drained) == 1 and "DRAIN" in cluster.node("gpu-node-16")[0]
    if AUDIT_BACKEND == "sqlite":
        changes = [c["cause"] for c in medic.audit("changes", "--node", "gpu-node-16")]
        assert any("is decided again" in c for c in changes), changes


def test_wall_clock_steps_undo_nothing(suite):
    """The wall clock steps a day forward, then an hour back (the stand-in
    tests/clock_shift; the monotonic clock stays real), while a node is
    drained: the incident neither expires nor is resumed, the power cycle an
    hour away does not come due, a re-send is taken; an alert from an
    Alertmanager on the correct clock is fresh (drained), a node's cooldown
    still holds a new alert, and a ladder's `after: 4s` step still comes
    4 s later. What is recorded carries the wall clock."""
    cluster, bmcs, oncall = lab(suite, "gpu-node-12", "gpu-node-13")
    clock = SteppedClock(suite.subdir("clock"))
    ladder = ("  - name: ladder\n    match: '{alertname=\"Ladder\"}'\n"
              "    steps: [ { action: notify, notifier: oncall },\n"
              "             { after: 4s, action: notify, notifier: oncall } ]\n")
    medic = start_medic(suite, "clock", cluster.conf, bmcs, oncall,
                        xid_steps="      - { action: drain }\n"
                                  "      - { after: 1h, action: ipmi_power_cycle }\n",
                        xid_extra="    cooldown: 10m\n", more_policies=ladder, env=clock.env())
    t12 = time.time()
    fired = payload("gpu-node-12", t12)
    assert medic.post("/webhook", fired, headers=AUTH)[0] == 200
    wait_state(medic, "gpu-node-12", "drained")
    clock.set(86400)
    wait_until("the step seen", lambda: medic.metric(
        "medic_wall_clock_steps_total", headers=AUTH) == 1, timeout=10)
    # the scheduler is alive: ticks go on after the step
    ticks = medic.metric("medic_engine_ticks_total", headers=AUTH)
    wait_until("ticks after the step", lambda: medic.metric(
        "medic_engine_ticks_total", headers=AUTH) >= ticks + 10, timeout=15)
    assert 86390 < medic.metric("medic_wall_clock_lead_seconds", headers=AUTH) < 86410
    assert incident(medic, "gpu-node-12")["state"] == "drained"
    assert outcomes(medic, "resume") == [] and outcomes(medic, "ipmi_power_cycle") == []
    assert "DRAIN" in cluster.node("gpu-node-12")[0] and bmcs["gpu-node-12"].log() == []
    # Alertmanager's byte-identical re-send
    status, _, body = medic.post("/webhook", fired, headers=AUTH)
    assert status == 200 and json.loads(body)["duplicate"], body
    # an alert from an Alertmanager on the correct clock is fresh
    assert medic.post("/webhook", payload("gpu-node-13", time.time()), headers=AUTH)[0] == 200
    wait_state(medic, "gpu-node-13", "drained")
    drain = [d for d in medic.audit("decisions", "--node", "gpu-node-13") if d["action"]]
    import datetime
    at = datetime.datetime.fromisoformat(drain[0]["created_at"].replace("Z", "+00:00"))
    assert abs(at.timestamp() - (time.time() + 86400)) < 60, drain  # the wall clock, recorded
    # the resolve resumes; a new alert within the 10 minutes' cooldown is held
    assert medic.post("/webhook", payload("gpu-node-12", t12, status="resolved"),
                      headers=AUTH)[0] == 200
    wait_state(medic, "gpu-node-12", "recovered")
    again = payload("gpu-node-12", time.time()).replace('"g-gpu-node-12"', '"g-again"')
    assert medic.post("/webhook", again, headers=AUTH)[0] == 200
    held = wait_until("the new alert's decision", lambda: [
        d for d in medic.audit("decisions", "--node", "gpu-node-12")
        if d["action"] == "drain" and d["verdict"] != "execute"], timeout=30)
    assert "cooldown" in held[0]["reason"], held
    assert [o["result"] for o in outcomes(medic, "drain")
            if o["node"] == "gpu-node-12"] == ["succeeded"]
    # a ladder opened before a step back still takes its after: 4s step
    ladder_alert = payload("gpu-node-13", time.time()).replace("GPUXidError", "Ladder")
    assert medic.post("/webhook", ladder_alert.replace('"g-gpu-node-13"', '"g-ladder"'),
                      headers=AUTH)[0] == 200

    def ladder_steps():
        return [d for d in medic.audit("decisions", "--policy", "ladder") if d["action"]]
    wait_until("the ladder's first step", ladder_steps, timeout=30)
    opened = time.monotonic()
    clock.set(-3600)
    wait_until("the step back seen", lambda: medic.metric(
        "medic_wall_clock_steps_total", headers=AUTH) == 2, timeout=10)
    wait_until("the ladder's after: 4s step", lambda: len(ladder_steps()) == 2, timeout=20)
    assert time.monotonic() - opened >= 3, ladder_steps()
    xid = [i for i in medic.audit("incidents", "--node", "gpu-node-13") if i["policy"] == "xid"]
    assert [i["state"] for i in xid] == ["drained"], xid
    assert outcomes(medic, "ipmi_power_cycle") == []


if __name__ == "__main__":
    Suite(__doc__).run([test_group_cap_holds_a_second_node_of_a_rack, test_clock_set_right_after_start,
                        test_clock_fast_at_start_decides_again,
                        test_drains_reconciled_with_slurm,
                        test_slurm_maintenance_reservation_holds_a_drain,
                        test_slurm_maintenance_unknown_holds,
                        test_failed_drain_stops_the_ladder,
                        test_operator_resume_is_not_power_cycled,
                        test_eight_gpus_one_incident,
                        test_reload_closes_orphaned_incidents,
                        test_lost_resolve_expires,
                        test_repeats_keep_the_incident_open,
                        test_restart_waits_for_the_alert_again, test_outcome_kept_while_the_log_cannot_commit,
                        test_restart_grace_decides_from_the_stored_state,
                        test_wall_clock_steps_undo_nothing])
