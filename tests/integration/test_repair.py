#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The repair loop against a real Slurm cluster, real ipmi_sim BMCs and
`medic agent` on each node. No GPU exists here: each agent loads the
STAND-IN NVML library and runs the STAND-IN nvidia-smi for its resets
(tests/nvml_standin; 8 fake GPUs each, faults set by the test). A GPU
reset that fails leads to exactly one power cycle; a reset on a GPU with a
compute process on it is refused, and never run; a node that comes back
with 7 of its 8 GPUs is quarantined, not resumed, until a person releases
it; a node with three incidents in the window is quarantined at its third,
listed by `medic audit quarantined`, and released by `medic node
release`."""

import datetime
import json
import os
import re
import subprocess
import time

from lab import Medic, Suite, wait_until, write_secret
from test_agent import Agent, TOKEN as AGENT_TOKEN
from test_incidents import incident, lab, outcomes, wait_state

TOKEN = "repair-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def payload(node, starts_at, gpu, uuid, alertname="GPUXidError", status="firing"):
    return json.dumps({"version": "4", "groupKey": f"g-{node}-{alertname}", "status": status,
                       "receiver": "medic", "alerts": [{
                           "status": status,
                           "labels": {"alertname": alertname, "instance": node, "gpu": gpu,
                                      "UUID": uuid, "xid": "79"},
                           "annotations": {}, "startsAt": rfc3339(starts_at),
                           "endsAt": rfc3339(time.time()) if status == "resolved" else
                           "0001-01-01T00:00:00Z"}]})


def start_medic(suite, name, cluster, bmcs, agents, oncall, policies, safety=""):
    workdir = suite.subdir(name)
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         "bmc-lab: { username: admin, password: secret }\n"
                         f"agent-lab: {{ token: {AGENT_TOKEN} }}\n")
    nodes = "".join(
        f"    - {{ name: {n}, slurm: {{ node: {n} }}, bmc: {{ address: '{b.address}', "
        "credentials: bmc-lab, workarounds: [opensesspriv] }, "
        f"agent: {{ url: '{agents[n].url}', credentials: agent-lab }}, gpus: 8 }}\n"
        for n, b in bmcs.items())
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token}, "
                  f"admin_bearer_token_file: {token} }}\n"
                  f"credentials_file: {creds}\nslurm: {{ conf: {cluster.conf} }}\n"
                  f"inventory:\n  nodes:\n{nodes}"
                  f"notifiers: {{ oncall: {{ type: webhook, url: '{oncall.url}/hook' }} }}\n"
                  "engine: { tick_interval: 200ms }\n"
                  f"safety: {{ max_disruptive_in_flight: 4, max_disrupted_fraction: 1, {safety}\n"
                  "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                  f"policies:\n{policies}")
    medic.start()
    suite.on_exit(medic.stop)
    return medic


def agents_for(suite, nodes, faults=None):
    agents = {}
    for n in nodes:
        agents[n] = Agent(suite, f"agent-{n}", faults=(faults or {}).get(n, "")).start()
        suite.on_exit(agents[n].stop)
    return agents


def told(oncall, text):
    return [r for r in oncall.received() if text.encode() in r["body"]]


RESET_FIRST = (
    "  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n    cooldown: 1h\n"
    "    steps:\n"
    "      - { action: drain }\n"
    "      - { after: 1s, action: gpu_reset }\n"
    "      - { after: 2s, action: ipmi_power_cycle, if_failed: true }\n"
    "      - { after: 3s, action: verify, within: 30s }\n"
    "    on_resolved: [ { action: resume } ]\n")


def test_failed_reset_then_one_power_cycle(suite):
    nodes = ["gpu-node-21", "gpu-node-22"]
    cluster, bmcs, oncall = lab(suite, *nodes)
    # gpu-node-21's GPU 3 needs a reset that the driver refuses; a compute
    # process runs on gpu-node-22's GPU 5
    agents = agents_for(suite, nodes, {"gpu-node-21": "3:recovery=1 3:reset_fails=1",
                                       "gpu-node-22": "5:processes=1"})
    medic = start_medic(suite, "reset", cluster, bmcs, agents, oncall, RESET_FIRST)
    t0 = time.time()
    for n, g in (("gpu-node-21", 3), ("gpu-node-22", 5)):
        assert medic.post("/webhook", payload(n, t0, str(g), agents[n].uuid(g)),
                          headers=AUTH)[0] == 200
    resets = wait_until("both resets' outcomes", lambda: len(outcomes(medic, "gpu_reset")) == 2
                        and outcomes(medic, "gpu_reset"), timeout=60)
    by_node = {o["node"]: o for o in resets}
    assert by_node["gpu-node-21"]["result"] == "failed", by_node
    assert "in use by another process" in by_node["gpu-node-21"]["detail"], by_node
    assert by_node["gpu-node-22"]["result"] == "refused", by_node
    assert "1 compute process runs on GPU 5" in by_node["gpu-node-22"]["detail"], by_node
    # the agent ran nvidia-smi once, with the alert's UUID as one argument;
    # never on the GPU with a process
    assert agents["gpu-node-21"].resets() == [["--gpu-reset", "-i", agents["gpu-node-21"].uuid(3)]]
    assert agents["gpu-node-22"].resets() == []
    cycles = wait_until("the fallback power cycles", lambda: len(
        outcomes(medic, "ipmi_power_cycle")) == 2 and outcomes(medic, "ipmi_power_cycle"),
        timeout=60)
    assert all(c["result"] == "succeeded" for c in cycles), cycles
    # the power cycle cleared the GPU (as a reboot does): the verify passes
    agents["gpu-node-21"].fault("3:recovery=0")
    for n in nodes:
        wait_state(medic, n, "verified")
    # exactly one power cycle each: the BMC saw one power-off
    for n in nodes:
        assert [e for e in bmcs[n].log() if e == ["set", "power", "0"]] == [["set", "power", "0"]], \
            bmcs[n].log()
    verify = [o for o in outcomes(medic, "verify") if o["node"] == "gpu-node-21"]
    assert verify[0]["result"] == "succeeded" and "8 GPU(s) visible" in verify[0]["detail"], verify
    # the resolve: the node passed since its last disruption, so it is resumed
    assert medic.post("/webhook", payload("gpu-node-21", t0, "3", agents["gpu-node-21"].uuid(3),
                                          status="resolved"), headers=AUTH)[0] == 200
    wait_state(medic, "gpu-node-21", "recovered")
    assert "DRAIN" not in cluster.node("gpu-node-21")[0]
    changes = [c["state"] for c in reversed(medic.audit("changes", "--node", "gpu-node-21"))]
    assert changes == ["open", "draining", "drained", "resetting", "open", "cycling", "cycled",
                       "verifying", "verified", "undoing", "recovered"], changes


def test_node_back_without_a_gpu_is_quarantined(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-23")
    agents = agents_for(suite, ["gpu-node-23"])
    policies = ("  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n    cooldown: 1h\n"
                "    steps:\n"
                "      - { action: drain }\n"
                "      - { after: 1s, action: ipmi_power_cycle }\n"
                "      - { after: 2s, action: verify, within: 10s }\n"
                "    on_resolved: [ { action: resume } ]\n")
    medic = start_medic(suite, "missing", cluster, bmcs, agents, oncall, policies)
    agent = agents["gpu-node-23"]
    t0 = time.time()
    # GPU 7 fell off the bus, and stays off after the power cycle
    agent.fault("7:missing=1")
    assert medic.post("/webhook", payload("gpu-node-23", t0, "7", agent.uuid(7)),
                      headers=AUTH)[0] == 200
    wait_until("the power cycle", lambda: outcomes(medic, "ipmi_power_cycle"), timeout=60)
    quarantined = wait_state(medic, "gpu-node-23", "quarantined")
    assert "7 of 8 GPUs visible" in quarantined["cause"], quarantined
    message = wait_until("on-call told", lambda: told(oncall, "medic quarantined node"),
                         timeout=30)
    assert b"medic node release gpu-node-23" in message[0]["body"], message
    assert b"GPU 7" in message[0]["body"], message
    # the resolve does not give the node back: it stays drained
    assert medic.post("/webhook", payload("gpu-node-23", t0, "7", agent.uuid(7),
                                          status="resolved"), headers=AUTH)[0] == 200
    wait_until("the resolve evaluated", lambda: len(medic.audit("alerts")) >= 2, timeout=10)
    canary = payload("gpu-node-23", time.time(), "0", agent.uuid(0), alertname="Canary")
    assert medic.post("/webhook", canary, headers=AUTH)[0] == 200
    wait_until("a round after it (the canary's no_match)", lambda: [
        d for d in medic.audit("decisions") if d["alertname"] == "Canary"], timeout=10)
    assert outcomes(medic, "resume") == []
    assert "DRAIN" in cluster.node("gpu-node-23")[0]
    assert len(told(oncall, "medic quarantined node")) == 1
    listed = medic.audit("quarantined")
    assert [q["node"] for q in listed] == ["gpu-node-23"], listed
    assert medic.metric("medic_disrupted_nodes", headers=AUTH) == 1
    # a person replaced the GPU and gives the node back
    agent.fault("7:missing=0")
    token_file = write_secret(os.path.join(suite.workdir, "admin.token"), TOKEN)
    out = subprocess.run([suite.medic, "node", "release", "gpu-node-23", "--reason",
                          "GPU 7 reseated", "--url", medic.url, "--token-file", token_file],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out
    released = wait_state(medic, "gpu-node-23", "released")
    assert "released by" in released["cause"] and "GPU 7 reseated" in released["cause"], released
    assert "DRAIN" not in cluster.node("gpu-node-23")[0]
    assert medic.audit("quarantined") == []
    # released twice: refused, with why
    again = subprocess.run([suite.medic, "node", "release", "gpu-node-23", "--reason", "x",
                            "--url", medic.url, "--token-file", token_file],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "is not quarantined" in again.stderr, again


def test_repeat_offender_quarantined_and_released(suite):
    cluster, bmcs, oncall = lab(suite, "gpu-node-24")
    agents = agents_for(suite, ["gpu-node-24"])
    policies = ("  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
                "    max_actions_per_node: { count: 10, window: 1h }\n"
                "    steps: [ { action: drain } ]\n"
                "    on_resolved: [ { action: resume } ]\n")
    medic = start_medic(suite, "offender", cluster, bmcs, agents, oncall, policies,
                        safety="quarantine: { incidents: 3, window: 1h },")
    agent = agents["gpu-node-24"]
    for i in range(3):
        t = time.time()
        assert medic.post("/webhook", payload("gpu-node-24", t, "2", agent.uuid(2)),
                          headers=AUTH)[0] == 200
        if i == 2:
            break
        wait_until(f"drain {i + 1}", lambda: len([o for o in outcomes(medic, "drain")
                                                  if o["result"] == "succeeded"]) == i + 1,
                   timeout=30)
        assert medic.post("/webhook", payload("gpu-node-24", t, "2", agent.uuid(2),
                                              status="resolved"), headers=AUTH)[0] == 200
        wait_until(f"resume {i + 1}", lambda: len([o for o in outcomes(medic, "resume")
                                                   if o["result"] == "succeeded"]) == i + 1,
                   timeout=30)
    # the third incident: drained and quarantined, not another ladder
    quarantined = wait_state(medic, "gpu-node-24", "quarantined")
    assert "repeat offender" in quarantined["cause"], quarantined
    assert "DRAIN" in cluster.node("gpu-node-24")[0]
    assert "medic quarantine" in cluster.node("gpu-node-24")[1], cluster.node("gpu-node-24")
    message = wait_until("on-call told", lambda: told(oncall, "medic quarantined node"),
                         timeout=30)
    assert b"3 failure(s) with repairs" in message[0]["body"], message
    # the API refuses a release without a reason, and of a node not quarantined
    status, _, body = medic.post("/api/v1/nodes/gpu-node-24/release", "{}", headers=AUTH)
    assert status == 400 and b"reason" in body, body
    status, _, body = medic.post("/api/v1/nodes/gpu-node-99/release",
                                 json.dumps({"reason": "x"}), headers=AUTH)
    assert status == 400 and b"not in the inventory" in body, body
    status, _, body = medic.post("/api/v1/nodes/gpu-node-24/release",
                                 json.dumps({"reason": "x"}))
    assert status == 401, body
    # the on-call page: the node's next move names the release page, whose
    # form (with its anti-forgery token) releases it
    status, _, page = medic.get("/nodes/gpu-node-24", headers=AUTH)
    assert status == 200 and b"/release/gpu-node-24" in page, page
    status, _, page = medic.get("/release/gpu-node-24", headers=AUTH)
    assert status == 200 and b"is quarantined" in page and b"repeat offender" in page, page
    csrf = re.search(rb'name="csrf" value="([0-9a-f]+)"', page).group(1).decode()
    form = {"Content-Type": "application/x-www-form-urlencoded", **AUTH}
    status, _, done = medic.post("/release/gpu-node-24", "reason=no+token", headers=form,
                                 content_type=None)
    assert status == 403 and "DRAIN" in cluster.node("gpu-node-24")[0], done
    status, _, done = medic.post(
        "/release/gpu-node-24", f"csrf={csrf}&reason=firmware+updated%2C+burn-in+passed",
        headers=form, content_type=None)
    assert status == 200 and b"Done" in done, done
    released = wait_state(medic, "gpu-node-24", "released")
    assert "firmware updated, burn-in passed" in released["cause"], released
    assert "DRAIN" not in cluster.node("gpu-node-24")[0]
    assert len([o for o in outcomes(medic, "resume") if o["result"] == "succeeded"]) == 3


def test_recovery_action_picks_the_policy(suite):
    """when.recovery_action: medic asks each alerting node's agent what the
    driver recommends for the alert's GPU, and the policy that takes it
    depends on that: a reset where the driver says a reset will do, a drain
    for a person where it says nothing."""
    nodes = ["gpu-node-25", "gpu-node-26"]
    cluster, bmcs, oncall = lab(suite, *nodes)
    agents = agents_for(suite, nodes, {"gpu-node-25": "3:recovery=1"})
    policies = ("  - name: reset-recommended\n    match: '{alertname=\"GPUXidError\"}'\n"
                "    cooldown: 1h\n    when: { recovery_action: [gpu_reset, drain_and_reset] }\n"
                "    steps:\n      - { action: drain }\n"
                "      - { after: 1s, action: gpu_reset }\n"
                "      - { after: 2s, action: verify, within: 20s }\n"
                "    on_resolved: [ { action: resume } ]\n"
                "  - name: for-a-person\n    match: '{alertname=\"GPUXidError\"}'\n"
                "    cooldown: 1h\n    steps: [ { action: drain } ]\n")
    medic = start_medic(suite, "recovery", cluster, bmcs, agents, oncall, policies)
    t0 = time.time()
    for n in nodes:
        assert medic.post("/webhook", payload(n, t0, "3", agents[n].uuid(3)),
                          headers=AUTH)[0] == 200
    verified = wait_state(medic, "gpu-node-25", "verified")
    assert verified["policy"] == "reset-recommended", verified
    assert agents["gpu-node-25"].resets() == [["--gpu-reset", "-i", agents["gpu-node-25"].uuid(3)]]
    # the verify passed on evidence of the reset: GPU 3 enumerated since
    passed = [o for o in outcomes(medic, "verify") if o["node"] == "gpu-node-25"]
    assert [o["result"] for o in passed] == ["succeeded"], passed
    assert re.search(r"reset: GPU 3 enumerated at \S+, after ", passed[0]["detail"]), passed
    other = wait_state(medic, "gpu-node-26", "drained")
    assert other["policy"] == "for-a-person", other
    assert agents["gpu-node-26"].resets() == []
    skipped = [d for d in medic.audit("decisions", "--node", "gpu-node-26")]
    assert all(d["policy"] == "for-a-person" for d in skipped if d["action"]), skipped
    # the node's page shows what the driver says of each GPU now
    agents["gpu-node-26"].fault("5:recovery=2 6:missing=1")
    status, _, page = medic.get("/nodes/gpu-node-26", headers=AUTH)
    assert status == 200, page
    assert b"7 GPU(s) visible, fewer than the inventory's gpus" in page, page
    assert b"<td>5</td><td>GPU-5ta0d1n0-0000-0000-0000-000000000005</td><td>node_reboot</td>" \
        in page, page


def test_health_criteria_decide_what_passes(suite):
    """safety.health says what a verify accepts: a driver that recommends
    draining peer-to-peer traffic passes where the configuration accepts
    it, and a GPU missing passes within missing_gpus; a recommended GPU
    reset, which it does not accept, still quarantines its node."""
    nodes = ["gpu-node-28", "gpu-node-29"]
    cluster, bmcs, oncall = lab(suite, *nodes)
    agents = agents_for(suite, nodes, {"gpu-node-28": "3:recovery=3 6:missing=1",
                                       "gpu-node-29": "3:recovery=1"})
    policies = ("  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n    cooldown: 1h\n"
                "    steps:\n"
                "      - { action: drain }\n"
                "      - { after: 1s, action: verify, within: 10s }\n")
    medic = start_medic(suite, "health", cluster, bmcs, agents, oncall, policies,
                        safety="health: { missing_gpus: 1, recovery_actions: [none, drain_p2p] },")
    t0 = time.time()
    for n in nodes:
        assert medic.post("/webhook", payload(n, t0, "3", agents[n].uuid(3)),
                          headers=AUTH)[0] == 200
    verified = wait_state(medic, "gpu-node-28", "verified")
    passed = [o for o in outcomes(medic, "verify") if o["node"] == "gpu-node-28"]
    assert [o["result"] for o in passed] == ["succeeded"], passed
    assert "missing_gpus allows fewer" in passed[0]["detail"], passed
    quarantined = wait_state(medic, "gpu-node-29", "quarantined")
    assert "GPU 3: the driver recommends gpu_reset" in quarantined["cause"], quarantined
    assert verified["policy"] == quarantined["policy"] == "xid"


def test_restart_while_verifying_looks_again(suite):
    """medic stops while a verify before a resume waits for the node (a GPU
    still missing): the verify is recorded interrupted, and after the
    restart medic looks again instead of quarantining the node; once the
    GPU is back it passes and the node is resumed, once."""
    cluster, bmcs, oncall = lab(suite, "gpu-node-27")
    agents = agents_for(suite, ["gpu-node-27"])
    agent = agents["gpu-node-27"]
    policies = ("  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n    cooldown: 1h\n"
                "    steps: [ { action: drain } ]\n    on_resolved: [ { action: resume } ]\n")
    medic = start_medic(suite, "restart-verify", cluster, bmcs, agents, oncall, policies)
    t0 = time.time()
    assert medic.post("/webhook", payload("gpu-node-27", t0, "1", agent.uuid(1)),
                      headers=AUTH)[0] == 200
    wait_state(medic, "gpu-node-27", "drained")
    agent.fault("1:missing=1")
    assert medic.post("/webhook", payload("gpu-node-27", t0, "1", agent.uuid(1),
                                          status="resolved"), headers=AUTH)[0] == 200
    wait_state(medic, "gpu-node-27", "verifying")
    assert medic.stop() == 0
    medic.start()
    again = wait_until("a second verify", lambda: [
        d for d in medic.audit("decisions", "--node", "gpu-node-27")
        if d["action"] == "verify" and "cut short" in d["reason"]], timeout=30)
    assert len(again) == 1, again
    assert [o["result"] for o in outcomes(medic, "verify")] == ["interrupted"], \
        outcomes(medic, "verify")
    assert incident(medic, "gpu-node-27")["state"] == "verifying"
    agent.fault("1:missing=0")
    wait_state(medic, "gpu-node-27", "recovered")
    assert [o["result"] for o in outcomes(medic, "resume")] == ["succeeded"]
    assert "DRAIN" not in cluster.node("gpu-node-27")[0]
    assert medic.audit("quarantined") == []


def test_power_cycle_verified_by_a_boot(suite):
    """The verify after a power cycle passes on evidence that the repair
    happened: the BMC's power cycle really restarts the node's slurmd, and
    Slurm's SlurmdStartTime, later than the cycle, is in the verify's
    detail. A node whose BMC cycles power but that never boots (its slurmd
    goes on as before, as when the BMC lies or the cycle never reached the
    machine) fails its verify though Slurm, the agent and the BMC all look
    fine: it is quarantined, not resumed."""
    nodes = ["gpu-node-28", "gpu-node-29"]
    cluster, bmcs, oncall = lab(suite, *nodes)
    os.unlink(os.path.join(bmcs["gpu-node-29"].dir, "on-power"))  # it never boots
    agents = agents_for(suite, nodes)
    policies = ("  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n    cooldown: 1h\n"
                "    steps:\n      - { action: drain }\n"
                "      - { after: 1s, action: ipmi_power_cycle }\n"
                "      - { after: 2s, action: verify, within: 20s }\n"
                "    on_resolved: [ { action: resume } ]\n")
    before = {n: cluster.slurmd_started(n) for n in nodes}
    medic = start_medic(suite, "boot", cluster, bmcs, agents, oncall, policies)
    t0 = time.time()
    for n in nodes:
        assert medic.post("/webhook", payload(n, t0, "2", agents[n].uuid(2)),
                          headers=AUTH)[0] == 200
    wait_state(medic, "gpu-node-28", "verified")
    passed = [o for o in outcomes(medic, "verify") if o["node"] == "gpu-node-28"][0]
    assert passed["result"] == "succeeded" and "boot: after the restart" in \
        passed["detail"], passed
    assert cluster.slurmd_started("gpu-node-28") > before["gpu-node-28"]
    assert f"SlurmdStartTime={cluster.slurmd_started('gpu-node-28')}" in passed["detail"]
    # the node that never booted: every other check passes, the verify fails
    wait_state(medic, "gpu-node-29", "quarantined")
    failed = [o for o in outcomes(medic, "verify") if o["node"] == "gpu-node-29"][0]
    assert failed["result"] == "failed" and "boot: none since the restart" in \
        failed["detail"], failed
    assert "8 GPU(s) visible" in failed["detail"] and "bmc: power on" in failed["detail"], failed
    assert cluster.slurmd_started("gpu-node-29") == before["gpu-node-29"]
    assert bmcs["gpu-node-29"].log().count(["set", "power", "0"]) == 1
    assert "DRAIN" in cluster.node("gpu-node-29")[0]


if __name__ == "__main__":
    Suite(__doc__).run([test_power_cycle_verified_by_a_boot,
                        test_restart_while_verifying_looks_again,
                        test_recovery_action_picks_the_policy,
                        test_health_criteria_decide_what_passes,
                        test_failed_reset_then_one_power_cycle,
                        test_node_back_without_a_gpu_is_quarantined,
                        test_repeat_offender_quarantined_and_released])
