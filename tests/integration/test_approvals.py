#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A person in the loop, against a real Slurm cluster and real ipmi_sim
BMCs.

Approve mode: a
drain waits for a person (verdict pending, on-call told with the node's
page), runs once approved with `medic approve` under an approver's own
token (the audit log names her), and not again; the power cycle after it
waits too, survives a restart of medic while it waits, and a denial
through the API with the admin token means no power-off at the BMC and
holds the drained node for a person: its resolve does not resume it, a
release does. GET /api/v1/approvals lists the waiting step with the exact
action an approval runs, for approvers, the admin and readers; ids that
are not plain decimals are refused. The
read-only token cannot answer; an unknown or answered id, a body that is
not an answer, and a denial without a reason are refused and change
nothing. A power cycle approved after an operator resumed its node by
hand is refused by the node's real state: nothing reaches the BMC.

Live mode with a step's own approval: the drain runs unattended, the power
cycle waits for a person; `medic deny --undo` resumes the node at once.

The pause (`medic pause`, live mode): a new alert's drain and a drained
node's power cycle are held with who paused and why, while a resolve still
resumes its node; the pause shows in /metrics and on the page, survives a
restart, and once ended (DELETE /api/v1/pause) the held drain runs;
ending it twice is refused. A pause that arrives while a drain is under
way lets it finish; nothing new starts.

The on-call page in a real browser (Debian's headless Chromium, driven
through the DevTools protocol by tests/integration/cdp.py): loaded with the
admin token, the approve form of a pending power cycle leads to exactly
one power-off at the BMC, the deny form of another to none; forms posted
without their anti-forgery token or from another origin change nothing;
the pause form holds the fleet and the unpause form ends it."""

import json
import os
import re
import socket
import subprocess
import threading
import time

from lab import (AUDIT_BACKEND, GatedScontrol, IpmiBmc, Medic, RecordingReceiver, SlurmCluster,
                 SteppedClock, Suite, free_port, request, wait_until, write_secret)

WEBHOOK, READ, ADMIN, ALICE = "webhook-token", "read-token", "admin-token", "alice-token"


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def payload(node, starts_at, status="firing"):
    return json.dumps({"version": "4", "groupKey": f"g-{node}", "status": status,
                       "receiver": "medic", "alerts": [{
                           "status": status,
                           "labels": {"alertname": "GPUXidError", "instance": node, "gpu": "0",
                                      "xid": "79"},
                           "annotations": {}, "startsAt": rfc3339(starts_at),
                           "endsAt": rfc3339(time.time()) if status == "resolved" else
                           "0001-01-01T00:00:00Z"}]})


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


TOKENS = {"webhook": WEBHOOK, "read": READ, "admin": ADMIN, "alice": ALICE}


def xid_policy(cycle_after=None):
    """Drain on an Xid alert, power cycle cycle_after later (when given),
    resume on its resolve."""
    cycle = f", {{ after: {cycle_after}, action: ipmi_power_cycle }}" if cycle_after else ""
    return ("policies:\n  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
            f"    steps: [ {{ action: drain }}{cycle} ]\n"
            "    on_resolved: [ { action: resume } ]\n")


def lab_medic(suite, workdir, mode, policies, nodes, tokens, cluster=None, bmcs=None,
              scontrol=None, top="", safety="", more_nodes=""):
    """medic in mode with the token files named in tokens (TOKENS' keys;
    alice is an approver), nodes in its inventory (in Slurm's cluster when
    one is given, each at its ipmi_sim BMC when bmcs are), on-call a
    recording webhook receiver, a 200 ms tick and room for two disruptive
    actions. Returns (medic, token files, on-call); medic is not started."""
    oncall = RecordingReceiver()
    suite.on_exit(oncall.stop)
    files = {name: write_secret(os.path.join(workdir, f"{name}.token"), TOKENS[name])
             for name in tokens}
    auth = [f"{name}_bearer_token_file: {files[name]}" for name in ("webhook", "read", "admin")
            if name in files]
    if "alice" in files:
        auth.append(f"approvers: [ {{ name: alice, token_file: {files['alice']} }} ]")
    config = f"mode: {mode}\n{top}auth: {{ " + ",\n        ".join(auth) + " }\n"
    if bmcs:
        creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                             "bmc-lab: { username: admin, password: secret }\n")
        config += f"credentials_file: {creds}\n"
    if cluster:
        held = f", scontrol: {scontrol}" if scontrol else ""
        config += f"slurm: {{ conf: {cluster.conf}{held} }}\n"
    config += "inventory:\n  nodes:\n"
    for n in nodes:
        parts = [f"name: {n}"]
        if cluster:
            parts.append(f"slurm: {{ node: {n} }}")
        if bmcs:
            parts.append(f"bmc: {{ address: '{bmcs[n].address}', credentials: bmc-lab, "
                         "workarounds: [opensesspriv] }")
        config += "    - { " + ", ".join(parts) + " }\n"
    config += more_nodes
    config += (f"notifiers: {{ oncall: {{ type: webhook, url: '{oncall.url}/hook' }} }}\n"
               "engine: { tick_interval: 200ms }\n"
               f"safety: {{ max_disruptive_in_flight: 2, max_disrupted_fraction: 1,{safety}\n"
               "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n" + policies)
    medic = Medic(suite.medic, workdir, config)
    suite.on_exit(medic.stop)
    return medic, files, oncall


def lab_cluster(suite, nodes, name):
    cluster = SlurmCluster(suite.workdir, nodes, name=name)
    suite.on_exit(cluster.stop)
    cluster.start()
    return cluster


def lab_bmcs(suite, nodes, cluster=None):
    bmcs = {}
    for n in nodes:
        bmcs[n] = IpmiBmc(suite.workdir, n)
        if cluster:
            bmcs[n].boots(cluster, n)
        bmcs[n].start()
        suite.on_exit(bmcs[n].stop)
    return bmcs


def test_approve_deny_restart(suite):
    node = "gpu-node-01"
    cluster = lab_cluster(suite, [node], "slurm-approve")
    bmc = lab_bmcs(suite, [node])[node]
    medic, files, oncall = lab_medic(
        suite, suite.subdir("approve"), "approve", xid_policy("3s"), [node],
        ("webhook", "read", "admin", "alice"), cluster, {node: bmc},
        top="external_url: https://medic.example.org\n")
    medic.start()

    def decisions(action, verdict):
        return [d for d in medic.audit("decisions", "--node", node)
                if d["action"] == action and d["verdict"] == verdict]

    def answer(decision_id, body, token):
        status, _, raw = medic.post(f"/api/v1/approvals/{decision_id}", json.dumps(body),
                                    headers=bearer(token))
        return status, json.loads(raw)

    def cli(verb, decision_id, token_file, *extra):
        return subprocess.run([suite.medic, verb, str(decision_id), "--url", medic.url,
                               "--token-file", token_file, *extra],
                              capture_output=True, text=True, timeout=60)

    started = time.time()
    assert medic.post("/webhook", payload(node, started), headers=bearer(WEBHOOK))[0] == 200
    pending = wait_until("the drain pending", lambda: decisions("drain", "pending"), timeout=30)
    drain_id = pending[0]["id"]
    told = wait_until("on-call told", lambda: [r for r in oncall.received("/hook")
                                               if b"waits for your approval" in r["body"]],
                      timeout=30)
    # the notice names the pending decision, the command and the step's page
    body = told[0]["body"]
    assert f"https://medic.example.org/approvals/{drain_id}".encode() in body, body
    assert f"medic approve {drain_id} --reason TEXT".encode() in body, body
    assert b"drain {\\\"reason\\\":\\\"GPUXidError on gpu-node-01 (medic policy xid)" in body, body
    assert "DRAIN" not in cluster.node(node)[0]  # nothing runs before a person says so
    # refused, and nothing changes: the read token, a body that is no
    # answer, a denial without a reason, an id that is not pending
    status, _ = answer(drain_id, {"decision": "approve"}, READ)
    assert status == 401, status
    assert answer(drain_id, {"decision": "maybe"}, ADMIN)[0] == 400
    assert answer(drain_id, {"decision": "deny"}, ADMIN)[0] == 400
    status, got = answer(drain_id + 1000, {"decision": "approve"}, ADMIN)
    assert status == 409 and "not a step waiting" in got["error"], got
    assert "no decision has that id" in got["error"], got
    assert answer(drain_id, {"approve": False}, ADMIN)[0] == 400  # the contract's body, no reason
    for odd in ("+1", "%201", "99999999999999999999", f"0{drain_id}", f"{drain_id}%20"):
        status, _, raw = medic.post(f"/api/v1/approvals/{odd}", json.dumps({"approve": True}),
                                    headers=bearer(ADMIN))
        assert status == 400 and b"ID the pending decision's id" in raw, (odd, status, raw)
    assert decisions("drain", "execute") == [] and decisions("drain", "suppressed") == []
    # the steps waiting, with the exact action an approval runs, for the
    # approvers, the admin and the readers
    for token in (ALICE, ADMIN, READ):
        status, _, raw = medic.get("/api/v1/approvals", headers=bearer(token))
        assert status == 200, (token, status, raw)
        waiting = json.loads(raw)["data"]
        assert [(w["id"], w["node"], w["action"], w["step"]) for w in waiting] == [
            (drain_id, node, "drain", 1)], waiting
        assert waiting[0]["params"]["reason"] == "GPUXidError on gpu-node-01 (medic policy xid)"
    assert medic.get("/api/v1/approvals", headers=bearer(WEBHOOK))[0] == 401
    assert medic.metric("medic_pending_approvals", headers=bearer(READ)) == 1
    assert medic.metric("medic_pending_approval_oldest_seconds", headers=bearer(READ)) > 0
    # the node's page shows the step that waits, what it runs and where to answer
    status, _, page = medic.get(f"/nodes/{node}", headers=bearer(READ))
    assert status == 200 and b"Waiting for approval" in page, page
    assert f'href="/approvals/{drain_id}"'.encode() in page and b"drain {" in page, page
    assert f"step 1 waits for approval (/approvals/{drain_id}".encode() in page, page
    # alice approves from the command line and waits: the drain is queued,
    # then runs, once, and the command prints its outcome
    out = cli("approve", drain_id, files["alice"], "--reason", "checked the Xid log", "--wait",
              "--wait-limit", "45s")
    assert out.returncode == 0, out.stdout + out.stderr
    queued = re.search(r"decision ([0-9]+): approved, drain queued: execute: approved by alice "
                       r"\(checked the Xid log\)", out.stdout)
    assert queued and int(queued[1]) > drain_id, out.stdout  # the decision the approval made
    ran = queued[1]
    assert re.search(rf"decision {ran}: drain succeeded after [0-9.]+ s: drained: ", out.stdout), \
        out.stdout
    drained = [o for o in medic.audit("actions", "--decision", ran) if o["phase"] == "outcome"]
    assert [(o["action"], o["result"]) for o in drained] == [("drain", "succeeded")], drained
    assert "DRAIN" in cluster.node(node)[0]
    status, _, raw = medic.get(f"/api/v1/incidents?decision={ran}", headers=bearer(READ))
    assert status == 400 and b"applies to decisions and actions" in raw, raw
    again = cli("approve", drain_id, files["alice"])
    assert again.returncode == 1 and "not a step waiting" in again.stderr, again.stderr
    assert "it was answered already: approved by alice" in again.stderr, again.stderr
    assert len(decisions("drain", "execute")) == 1
    # the power cycle waits for a person too, and still after a restart
    cycle = wait_until("the power cycle pending", lambda: decisions("ipmi_power_cycle",
                                                                    "pending"), timeout=30)
    # what still waits for a person: the power cycle, not the approved drain
    waiting = medic.audit("decisions", "--waiting")
    assert [(d["id"], d["action"]) for d in waiting] == [(cycle[0]["id"], "ipmi_power_cycle")], \
        waiting
    medic.stop()
    medic.start()
    status, got = answer(cycle[0]["id"], {"decision": "deny", "reason": "a job checkpoints"},
                         ADMIN)
    assert status == 200, got
    assert got["data"]["verdict"] == "suppressed" and "denied by admin: a job checkpoints" in \
        got["data"]["result"], got
    denied = decisions("ipmi_power_cycle", "suppressed")
    assert len(denied) == 1 and "denied by admin" in denied[0]["reason"], denied
    wait_until("a tick past the power cycle's time", lambda: medic.metric(
        "medic_engine_ticks_total", headers=bearer(READ)) > 20, timeout=30)
    assert bmc.log() == [] and decisions("ipmi_power_cycle", "execute") == []
    # the answers are in the audit log (who, why, what came of it), and the
    # chains hold
    status, _, raw = medic.get("/api/v1/answers", headers=bearer(READ))
    assert status == 200 and len(json.loads(raw)["data"]) == 2, raw
    answers = medic.audit("approvals", "--node", node)
    assert [(a["answer"], a["by"]) for a in reversed(answers)] == [
        ("approve", "alice"), ("deny", "admin")], answers
    assert answers[0]["result"].startswith("suppressed: step 2 denied by admin"), answers
    assert answers[1]["reason"] == "checked the Xid log" and answers[1]["taken_at"], answers
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # the denial holds the node for a person: the resolve does not resume it
    held = wait_until("the node held", lambda: medic.audit("quarantined"), timeout=30)
    assert held[0]["node"] == node and "denied by admin" in json.dumps(held), held
    ticks = medic.metric("medic_engine_ticks_total", headers=bearer(READ))
    assert medic.post("/webhook", payload(node, started, "resolved"),
                      headers=bearer(WEBHOOK))[0] == 200
    wait_until("ten more rounds", lambda: medic.metric(
        "medic_engine_ticks_total", headers=bearer(READ)) > ticks + 10, timeout=30)
    assert "DRAIN" in cluster.node(node)[0]
    assert decisions("resume", "execute") == [] and decisions("verify", "execute") == []
    # the person releases it: resumed
    out = subprocess.run([suite.medic, "node", "release", node, "--reason", "rebooted by hand",
                          "--url", medic.url, "--token-file", files["admin"]],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    wait_until("the resume", lambda: "DRAIN" not in cluster.node(node)[0], timeout=30)
    # pointed at a port nobody listens on, the command says where it looked
    nowhere = f"http://127.0.0.1:{free_port()}"
    out = subprocess.run([suite.medic, "approve", str(drain_id), "--url", nowhere,
                          "--token-file", files["alice"]], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1 and f"cannot reach medic at {nowhere}" in out.stderr and \
        "is medic serve listening there?" in out.stderr, out.stderr


def test_per_step_approval_and_deny_undo(suite):
    """In live mode, one ladder drains unattended and waits for a person
    before the power cycle (a step's own approval); the person denies with
    --undo: medic resumes the node now, and the BMC never hears of it."""
    node = "gpu-node-07"
    cluster = lab_cluster(suite, [node], "slurm-undo")
    bmc = lab_bmcs(suite, [node])[node]
    policy = ("policies:\n  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
              "    steps:\n      - { action: drain, approval: none }\n"
              "      - { after: 2s, action: ipmi_power_cycle, approval: required }\n"
              "    on_resolved: [ { action: resume } ]\n")
    medic, files, _ = lab_medic(suite, suite.subdir("undo"), "live", policy, [node],
                                ("webhook", "read", "admin"), cluster, {node: bmc})
    medic.start()
    started = time.time()
    assert medic.post("/webhook", payload(node, started), headers=bearer(WEBHOOK))[0] == 200
    wait_until("drained unattended", lambda: "DRAIN" in cluster.node(node)[0], timeout=30)
    cycle = wait_until("the power cycle pending", lambda: [
        d for d in medic.audit("decisions", "--node", node)
        if d["action"] == "ipmi_power_cycle" and d["verdict"] == "pending"], timeout=30)
    out = subprocess.run([suite.medic, "deny", str(cycle[0]["id"]), "--reason",
                          "not this node, it is being reflashed", "--undo", "--url", medic.url,
                          "--token-file", files["admin"]], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "medic undoes what the incident holds" in out.stdout, \
        out.stdout + out.stderr
    wait_until("resumed at once", lambda: "DRAIN" not in cluster.node(node)[0], timeout=30)
    assert medic.audit("quarantined") == []
    assert bmc.log() == []
    # the approve flag and --undo do not go together
    bad = subprocess.run([suite.medic, "approve", "1", "--undo", "--url", medic.url],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--undo goes with medic deny" in bad.stderr, bad.stderr


def test_approved_after_an_operator_resumed(suite):
    """The drain is approved and runs; an operator puts the node back in
    service by hand; the power cycle waits for a person, who approves it:
    medic checks the node's real state as for any step, finds it no longer
    drained, and sends nothing to the BMC."""
    node = "gpu-node-06"
    cluster = lab_cluster(suite, [node], "slurm-resumed")
    bmc = lab_bmcs(suite, [node])[node]
    medic = lab_medic(suite, suite.subdir("resumed"), "approve", xid_policy("2s"), [node],
                      ("webhook", "admin"), cluster, {node: bmc})[0]
    medic.start()

    def pending(action):
        return [d for d in medic.audit("decisions", "--node", node)
                if d["action"] == action and d["verdict"] == "pending"]

    def approve(decision_id):
        status, _, body = medic.post(f"/api/v1/approvals/{decision_id}",
                                     json.dumps({"decision": "approve"}), headers=bearer(ADMIN))
        return status, json.loads(body)

    assert medic.post("/webhook", payload(node, time.time()), headers=bearer(WEBHOOK))[0] == 200
    drain = wait_until("the drain pending", lambda: pending("drain"), timeout=30)
    assert approve(drain[0]["id"])[0] == 200
    wait_until("drained", lambda: "DRAIN" in cluster.node(node)[0], timeout=30)
    cycle = wait_until("the power cycle pending", lambda: pending("ipmi_power_cycle"), timeout=30)
    # the operator puts the node back in service by hand, then someone approves
    assert cluster.scontrol("update", f"NodeName={node}", "State=RESUME").returncode == 0
    status, got = approve(cycle[0]["id"])
    assert status == 200 and "approved by admin" in got["data"]["result"], got
    refused = wait_until("the refused power cycle", lambda: [
        o for o in medic.audit("actions") if o["action"] == "ipmi_power_cycle"
        and o["phase"] == "outcome"], timeout=30)
    assert refused[0]["result"] == "refused" and "no longer drained" in refused[0]["detail"], \
        refused
    assert bmc.log() == [], bmc.log()


class HungServer:
    """A server that accepts connections and never answers (a hung
    Prometheus or agent): each request to it waits out its timeout."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    def stop(self):
        self.sock.close()
        for c in self.held:
            c.close()


def test_resolve_before_approval_wins(suite):
    """People's requests and notifications are applied in the order medic
    accepted them: the engine is busy (a round waits on a hung Prometheus)
    while the alert's resolve is accepted and then, after it, an approval
    of the drain: the resolve is taken first, withdrawing the step, and the
    approval is refused; nothing is drained, nothing resumed."""
    node = "gpu-node-07"
    cluster = lab_cluster(suite, [node], "slurm-order")
    prometheus = HungServer()
    suite.on_exit(prometheus.stop)
    medic = lab_medic(suite, suite.subdir("order"), "approve", xid_policy(), [node, "gpu-node-08"],
                      ("webhook", "admin"), cluster,
                      top=f"prometheus: {{ url: 'http://127.0.0.1:{prometheus.port}', "
                          "timeout: 3s }\nmodel: { fleet_interval: off }\n")[0]
    medic.start()
    t0 = time.time()
    assert medic.post("/webhook", payload(node, t0), headers=bearer(WEBHOOK))[0] == 200
    pending = wait_until("the drain pending", lambda: [
        d for d in medic.audit("decisions", "--node", node)
        if d["action"] == "drain" and d["verdict"] == "pending"], timeout=30)
    # another node's alert: its round waits on Prometheus
    asked = len(prometheus.held)
    assert medic.post("/webhook", payload("gpu-node-08", t0), headers=bearer(WEBHOOK))[0] == 200
    wait_until("the round asking Prometheus", lambda: len(prometheus.held) > asked, timeout=10)
    # meanwhile: the resolve is accepted, then the approval
    assert medic.post("/webhook", payload(node, t0, status="resolved"),
                      headers=bearer(WEBHOOK))[0] == 200
    status, _, raw = medic.post(f"/api/v1/approvals/{pending[0]['id']}",
                                json.dumps({"approve": True, "reason": "go"}),
                                headers=bearer(ADMIN))
    got = json.loads(raw)
    assert status == 409 and got["data"]["result"].startswith("refused"), got
    decisions = medic.audit("decisions", "--node", node)
    assert not [d for d in decisions if d["action"] in ("drain", "resume")
                and d["verdict"] == "execute"], decisions
    acted = medic.audit("actions", "--node", node)
    assert {a["action"] for a in acted} == {"notify"}, acted  # on-call's notice only
    assert "DRAIN" not in cluster.node(node)[0]
    changes = [c["cause"] for c in medic.audit("changes", "--node", node)]
    assert any("withdrawn" in c for c in changes), changes


def test_waiting_requests_hold_no_thread(suite):
    """People's requests wait for the engine without an HTTP thread: while
    a round waits on a hung Prometheus, eight pauses (more than the HTTP
    threads) wait for it, and a webhook sent meanwhile is answered at once;
    then each pause gets its answer."""
    prometheus = HungServer()
    suite.on_exit(prometheus.stop)
    medic = lab_medic(suite, suite.subdir("threads"), "live", xid_policy(), ["gpu-node-10"],
                      ("webhook", "admin"),
                      top=f"prometheus: {{ url: 'http://127.0.0.1:{prometheus.port}', "
                          "timeout: 5s }\nmodel: { fleet_interval: off }\n")[0]
    medic.start()
    asked = len(prometheus.held)
    assert medic.post("/webhook", payload("gpu-node-10", time.time()),
                      headers=bearer(WEBHOOK))[0] == 200
    wait_until("the round asking Prometheus", lambda: len(prometheus.held) > asked, timeout=10)
    answers = []

    def pause(i):
        # a pause the round after this one takes waits out two Prometheus
        # timeouts (5 s each): more than the lab client's default wait
        status, _, raw = request("POST", medic.url + "/api/v1/pause",
                                 json.dumps({"reason": f"pause {i}"}),
                                 dict(bearer(ADMIN), **{"Content-Type": "application/json"}),
                                 timeout=40)
        answers.append((status, time.monotonic(), raw))
    pausing = [threading.Thread(target=pause, args=(i,)) for i in range(8)]
    for t in pausing:
        t.start()
    wait_until("the pauses recorded", lambda: medic.metric(
        "medic_http_requests_in_flight", headers=bearer(ADMIN)) >= 8, timeout=10)
    assert medic.post("/webhook", payload("gpu-node-10", time.time()),
                      headers=bearer(WEBHOOK))[0] == 200
    answered = time.monotonic()
    assert answers == [], answers  # they still wait for the round, holding no thread
    for t in pausing:
        t.join(45)
    assert len(answers) == 8 and all(a[0] == 200 for a in answers), answers
    assert all(a[1] > answered for a in answers), "a pause was answered before the webhook"


def test_pages_hold_no_thread(suite):
    """Readers do not stall the webhook: eight clients load the page of a
    node whose agent hangs (each read waits out its 1 s), and a webhook sent
    meanwhile is answered at once; each page still comes, saying the agent
    did not answer."""
    agent = HungServer()
    suite.on_exit(agent.stop)
    workdir = suite.subdir("pages")
    creds = write_secret(os.path.join(workdir, "agent-credentials.yaml"),
                         "agent-lab: { token: agent-token }\n")
    medic = lab_medic(suite, workdir, "live", xid_policy(), [], ("webhook", "read"),
                      top=f"credentials_file: {creds}\n",
                      more_nodes="    - { name: gpu-node-11, agent: { url: "
                                 f"'http://127.0.0.1:{agent.port}', credentials: agent-lab }} }}\n")[0]
    medic.start()
    pages = []

    def load():
        status, _, body = medic.get("/nodes/gpu-node-11", headers=bearer(READ))
        pages.append((status, time.monotonic(), body))
    loading = [threading.Thread(target=load) for _ in range(8)]
    for t in loading:
        t.start()
    wait_until("the pages reading the agent", lambda: len(agent.held) >= 2, timeout=10)
    assert medic.post("/webhook", payload("gpu-node-11", time.time()),
                      headers=bearer(WEBHOOK))[0] == 200
    answered = time.monotonic()
    assert pages == [], "a page came before the webhook: it waited behind them"
    for t in loading:
        t.join(30)
    assert len(pages) == 8 and all(p[0] == 200 for p in pages), [p[:2] for p in pages]
    assert all(b"The agent did not answer" in p[2] for p in pages)
    assert all(p[1] > answered for p in pages)


def test_pause_until_across_clock_steps(suite):
    """A pause's `until` lasts as long as the person asked on the engine's
    clock, whatever the wall clock does: with the wall clock stepped 3 h
    back (the clock stand-in), `until: 2s` is taken and ends about 2 s
    later; stepped 1 h forward, `until: 3s` ends about 3 s later, not an
    hour on."""
    clock = SteppedClock(suite.subdir("pause-clock"))
    medic = lab_medic(suite, suite.subdir("pause-clock"), "live", xid_policy(), ["gpu-node-09"],
                      ("webhook", "admin"))[0]
    medic.env = clock.env()
    medic.start()

    def paused():
        return medic.metric("medic_paused", headers=bearer(ADMIN))

    def pause(until):
        status, _, raw = medic.post("/api/v1/pause", json.dumps({"reason": "clock test",
                                                                  "until": until}),
                                    headers=bearer(ADMIN))
        return status, json.loads(raw)

    # the engine runs before the clock steps (on PostgreSQL it starts once
    # the replica leads; a leader judges its clock by its engine's, which a
    # step does not move, so it keeps leading)
    wait_until("the engine's ticks", lambda: medic.metric(
        "medic_engine_ticks_total", headers=bearer(ADMIN)) > 2, timeout=15)
    for step, until, lasts in ((-3 * 3600, "2s", 2), (3600, "3s", 3)):
        steps = medic.metric("medic_wall_clock_steps_total", headers=bearer(ADMIN))
        clock.set(step)
        wait_until("the step seen", lambda: medic.metric(
            "medic_wall_clock_steps_total", headers=bearer(ADMIN)) > steps, timeout=15)
        status, got = pause(until)
        taken = time.monotonic()
        assert status == 200 and got["data"]["result"].startswith("execute: medic paused"), got
        assert paused() == 1
        wait_until("the pause's end", lambda: paused() == 0, timeout=lasts + 10)
        assert time.monotonic() - taken >= lasts - 0.5, "the pause ended early"


def test_pause(suite):
    nodes = ["gpu-node-02", "gpu-node-03"]
    cluster = lab_cluster(suite, nodes, "slurm-pause")
    bmcs = lab_bmcs(suite, nodes)
    medic, files, oncall = lab_medic(suite, suite.subdir("pause"), "live", xid_policy("4s"), nodes,
                                     ("webhook", "read", "admin"), cluster, bmcs,
                                     safety="\n          restart_grace: 1s,")
    medic.start()

    def decided(node, action, verdict):
        return [d for d in medic.audit("decisions", "--node", node)
                if d["action"] == action and d["verdict"] == verdict]

    def paused():
        return medic.metric("medic_paused", headers=bearer(READ))

    started = time.time()
    assert medic.post("/webhook", payload("gpu-node-02", started), headers=bearer(WEBHOOK))[0] == 200
    wait_until("node-02 drained", lambda: "DRAIN" in cluster.node("gpu-node-02")[0], timeout=30)
    assert paused() == 0
    # the daemon's address and the token from the environment, as on-call sets them once
    out = subprocess.run([suite.medic, "pause", "--reason", "rack 12 maintenance"],
                         env=dict(os.environ, MEDIC_URL=medic.url,
                                  MEDIC_TOKEN_FILE=files["admin"]),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "paused by admin (rack 12 maintenance)" in out.stdout, \
        out.stdout + out.stderr
    assert paused() == 1
    wait_until("on-call told", lambda: [r for r in oncall.received("/hook")
                                        if b"medic paused by admin" in r["body"]], timeout=30)
    # a new alert's drain is held, and node-02's power cycle (due at 4 s)
    t3 = time.time()
    assert medic.post("/webhook", payload("gpu-node-03", t3), headers=bearer(WEBHOOK))[0] == 200
    held = wait_until("node-03's drain held", lambda: decided("gpu-node-03", "drain",
                                                             "suppressed"), timeout=30)
    assert "paused by admin: rack 12 maintenance" in held[0]["reason"], held
    cycle = wait_until("node-02's power cycle held", lambda: decided(
        "gpu-node-02", "ipmi_power_cycle", "suppressed"), timeout=30)
    assert "paused by admin" in cycle[0]["reason"], cycle
    assert "DRAIN" not in cluster.node("gpu-node-03")[0] and bmcs["gpu-node-02"].log() == []
    status, _, page = medic.get("/", headers=bearer(READ))
    assert status == 200 and b"paused</b> by admin: rack 12 maintenance" in page, page[:3000]
    # a resolve still resumes what medic drained
    assert medic.post("/webhook", payload("gpu-node-02", started, "resolved"),
                      headers=bearer(WEBHOOK))[0] == 200
    wait_until("node-02 resumed while paused",
               lambda: "DRAIN" not in cluster.node("gpu-node-02")[0], timeout=30)
    # the pause survives a restart (restored with the engine's state: on
    # PostgreSQL once this medic takes the lease again)
    medic.stop()
    medic.start()
    wait_until("the pause restored", lambda: paused() == 1, timeout=15)
    # Alertmanager re-sends node-03's alert; the pause ends: its drain runs
    again = payload("gpu-node-03", t3).replace('"g-gpu-node-03"', '"g-gpu-node-03-again"')
    assert medic.post("/webhook", again, headers=bearer(WEBHOOK))[0] == 200
    status, _, body = request_delete(medic, "/api/v1/pause", ADMIN)
    assert status == 200 and "pause ended (unpaused by admin" in json.loads(body)["data"]["result"]
    wait_until("node-03 drained once the pause ended",
               lambda: "DRAIN" in cluster.node("gpu-node-03")[0], timeout=30)
    assert paused() == 0
    status, _, body = request_delete(medic, "/api/v1/pause", ADMIN)
    assert status == 409 and "not paused" in json.loads(body)["data"]["result"], body
    assert bmcs["gpu-node-02"].log() == []


def test_pause_while_a_drain_runs(suite):
    """A pause that arrives while a drain is under way (a stand-in around
    the real scontrol holds it until the test opens a gate): the drain
    finishes and is recorded, the node is drained; nothing new starts: a
    second node's drain is held."""
    nodes = ["gpu-node-07", "gpu-node-08"]
    cluster = lab_cluster(suite, nodes, "slurm-pause-running")
    workdir = suite.subdir("pause-running")
    gated = GatedScontrol(workdir)
    medic = lab_medic(suite, workdir, "live", xid_policy(), nodes, ("webhook", "admin"), cluster,
                      scontrol=gated.path)[0]
    medic.start()
    assert medic.post("/webhook", payload(nodes[0], time.time()), headers=bearer(WEBHOOK))[0] == 200
    gated.wait_held()
    status, _, body = medic.post("/api/v1/pause", json.dumps({"reason": "stop everything"}),
                                 headers=bearer(ADMIN))
    assert status == 200, body
    gated.release()
    wait_until("the drain under way finished", lambda: [
        o for o in medic.audit("actions") if o["action"] == "drain" and o["phase"] == "outcome"
        and o["result"] == "succeeded"], timeout=30)
    assert "DRAIN" in cluster.node(nodes[0])[0]
    assert medic.post("/webhook", payload(nodes[1], time.time()), headers=bearer(WEBHOOK))[0] == 200
    held_drain = wait_until("the new drain held", lambda: [
        d for d in medic.audit("decisions", "--node", nodes[1]) if d["action"] == "drain"],
        timeout=30)
    assert held_drain[0]["verdict"] == "suppressed" and "paused by admin" in \
        held_drain[0]["reason"], held_drain
    assert "DRAIN" not in cluster.node(nodes[1])[0]


def test_page_forms_in_chromium(suite):
    from cdp import Browser
    from lab import request, require_binary
    require_binary("chromium")
    nodes = ["gpu-node-04", "gpu-node-05"]
    bmcs = lab_bmcs(suite, nodes)
    medic = lab_medic(suite, suite.subdir("browser"), "approve",
                      "policies:\n  - name: cycle\n    match: '{alertname=\"GPUXidError\"}'\n"
                      "    steps: [ { action: ipmi_power_cycle } ]\n", nodes,
                      ("webhook", "read", "admin"), bmcs=bmcs)[0]
    medic.start()
    now = time.time()
    for n in nodes:
        assert medic.post("/webhook", payload(n, now), headers=bearer(WEBHOOK))[0] == 200

    def pending(node):
        return [d for d in medic.audit("decisions", "--node", node)
                if d["action"] == "ipmi_power_cycle" and d["verdict"] == "pending"]
    ids = {n: wait_until(f"{n}'s power cycle pending", lambda n=n: pending(n), timeout=30)[0]["id"]
           for n in nodes}
    # the front page lists both, linked to the page to answer on
    wait_until("the engine's state has the ids", lambda: all(
        f"/approvals/{i}".encode() in medic.get("/", headers=bearer(READ))[2]
        for i in ids.values()), timeout=30)
    # forged forms change nothing: no token; another site's origin
    path = f"/approvals/{ids['gpu-node-04']}"
    form = {"Content-Type": "application/x-www-form-urlencoded", **bearer(ADMIN)}
    status, _, body = request("POST", medic.url + path, body=b"decision=approve", headers=form)
    assert status == 403 and b"token does not match" in body, body
    status, _, page = medic.get(path, headers=bearer(ADMIN))
    token = page.decode().split('name="csrf" value="')[1].split('"')[0]
    status, _, body = request("POST", medic.url + path,
                              body=f"csrf={token}&decision=approve".encode(),
                              headers={**form, "Origin": "http://evil.example"})
    assert status == 403 and b"another site" in body, body
    assert pending("gpu-node-04") and bmcs["gpu-node-04"].log() == []
    browser = Browser(suite.subdir("chromium"), headers=bearer(ADMIN))
    try:
        browser.load(medic.url + path)
        assert "Step 1 of policy cycle on node gpu-node-04" in browser.text(), browser.text()
        browser.evaluate("document.querySelector('form input[name=reason]').value ="
                         " 'checked from the page'")
        browser.submit("form:nth-of-type(1)")
        shown = browser.text()
        assert "Done" in shown and "approved by admin (checked from the page)" in shown, shown
        browser.load(medic.url + f"/approvals/{ids['gpu-node-05']}")
        browser.evaluate("document.querySelectorAll('form')[1].querySelector('input[name=reason]')"
                         ".value = 'the job checkpoints first'")
        browser.submit("form:nth-of-type(2)")
        shown = browser.text()
        assert "denied by admin: the job checkpoints first" in shown, shown
        # the pause form, then the unpause form
        browser.load(medic.url + "/pause")
        browser.evaluate("document.querySelector('form[action=\"/pause\"] input[name=reason]')"
                         ".value = 'storm in rack 3'")
        browser.submit('form[action="/pause"]')
        assert "medic paused by admin (storm in rack 3)" in browser.text(), browser.text()
        assert medic.metric("medic_paused", headers=bearer(READ)) == 1
        browser.load(medic.url + "/pause")
        browser.submit('form[action="/unpause"]')
        assert "pause ended (unpaused by admin" in browser.text(), browser.text()
        assert medic.metric("medic_paused", headers=bearer(READ)) == 0
    finally:
        browser.close()
    wait_until("the approved power cycle", lambda: [
        o for o in medic.audit("actions") if o["action"] == "ipmi_power_cycle"
        and o["phase"] == "outcome" and o["result"] == "succeeded"], timeout=60)
    offs = [e for e in bmcs["gpu-node-04"].log() if e == ["set", "power", "0"]]
    assert len(offs) == 1, bmcs["gpu-node-04"].log()
    assert bmcs["gpu-node-05"].log() == []
    assert [d["verdict"] for d in medic.audit("decisions", "--node", "gpu-node-05")
            if d["action"] == "ipmi_power_cycle"] == ["suppressed", "pending"]


def request_delete(medic, path, token):
    from lab import request
    return request("DELETE", medic.url + path, headers=bearer(token))


if __name__ == "__main__":
    Suite(__doc__).run([test_approve_deny_restart, test_per_step_approval_and_deny_undo,
                        test_approved_after_an_operator_resumed, test_resolve_before_approval_wins,
                        test_pause_until_across_clock_steps, test_waiting_requests_hold_no_thread,
                        test_pages_hold_no_thread,
                        test_pause, test_pause_while_a_drain_runs, test_page_forms_in_chromium])
