#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`medic check live` against a real Slurm cluster, real ipmi_sim BMCs and
`medic agent` on each node (the agents load the STAND-IN NVML library: no
GPU exists here). Each node's line says what its BMC, agent and Slurm node
answered; a wrong BMC password, a wrong agent token, an agent that is down,
a Slurm node Slurm does not know and an agent short of the inventory's GPUs
each fail their node; Slurm's rights are asked once, changing nothing, and
a user Slurm refuses (nobody) is told what to grant. Nothing is sent to a
chassis or a node: no power change, no drain."""

import os
import subprocess

from lab import Medic, Suite, write_secret
from test_agent import TOKEN as AGENT_TOKEN
from test_incidents import lab
from test_repair import agents_for

NODES = ["gpu-node-41", "gpu-node-42", "gpu-node-43", "gpu-node-44", "gpu-node-45"]


def config(suite, cluster, bmcs, agents):
    workdir = suite.subdir("check-live")
    os.chmod(workdir, 0o755)
    token = write_secret(os.path.join(workdir, "webhook.token"), "check-live-webhook")
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         "bmc-lab: { username: admin, password: secret }\n"
                         "bmc-wrong: { username: admin, password: not-the-password }\n"
                         f"agent-lab: {{ token: {AGENT_TOKEN} }}\n"
                         "agent-wrong: { token: not-the-agents-token }\n")
    bmc_creds = {"gpu-node-42": "bmc-wrong"}
    agent_creds = {"gpu-node-43": "agent-wrong"}
    gpus = {"gpu-node-45": 16}  # the agent sees 8
    slurm = {"gpu-node-44": "gpu-node-99"}  # a Slurm node Slurm does not have
    nodes = "".join(
        f"    - {{ name: {n}, slurm: {{ node: {slurm.get(n, n)} }}, "
        f"bmc: {{ address: '{b.address}', credentials: {bmc_creds.get(n, 'bmc-lab')}, "
        "workarounds: [opensesspriv] }, "
        f"agent: {{ url: '{agents[n].url}', credentials: {agent_creds.get(n, 'agent-lab')} }}, "
        f"gpus: {gpus.get(n, 8)} }}\n"
        for n, b in bmcs.items())
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"credentials_file: {creds}\nslurm: {{ conf: {cluster.conf} }}\n"
                  f"inventory:\n  nodes:\n{nodes}policies: []\n")
    return medic


def check_live(suite, medic, *args, user=None):
    prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user else []
    out = subprocess.run(prefix + [suite.medic, "check", "live", medic.config_path, *args],
                         capture_output=True, text=True, timeout=120)
    lines = {}
    for line in out.stdout.splitlines():
        word, _, rest = line.partition(" ")
        name, _, detail = rest.partition(":")
        lines[name] = (word, detail)
    return out.returncode, lines, out


def test_check_live(suite):
    cluster, bmcs, _ = lab(suite, *NODES)
    agents = agents_for(suite, NODES)
    medic = config(suite, cluster, bmcs, agents)
    agents["gpu-node-41"]  # every node's agent runs, but 44's is stopped below
    power_before = {n: b.log() for n, b in bmcs.items()}
    states_before = {n: cluster.node(n)[0] for n in NODES}

    # the healthy node alone passes, and so does Slurm's rights check (root)
    rc, lines, out = check_live(suite, medic, "--nodes", "gpu-node-41")
    assert rc == 0, out
    word, detail = lines["gpu-node-41"]
    assert word == "ok", out.stdout
    assert "bmc ok, chassis power on" in detail and "agent ok, 8 GPU(s), driver stand-in" in detail \
        and "slurm ok, IDLE" in detail, detail
    word, detail = lines["slurm updates"]
    assert word == "ok" and "allowed for user root" in detail \
        and "Invalid node name specified" in detail, out.stdout

    # every node: each fault fails its own node, and only its own part
    agents["gpu-node-44"].process.stop()
    rc, lines, out = check_live(suite, medic, "--jobs", "3")
    assert rc == 1, out
    assert lines["gpu-node-41"][0] == "ok", out.stdout
    word, detail = lines["gpu-node-42"]
    assert word == "FAIL" and "bmc FAIL" in detail and "agent ok" in detail, detail
    word, detail = lines["gpu-node-43"]
    assert word == "FAIL" and "agent FAIL HTTP 401" in detail \
        and "not the agent's" in detail and "bmc ok" in detail, detail
    word, detail = lines["gpu-node-44"]
    assert word == "FAIL" and "agent FAIL" in detail and "slurm FAIL" in detail \
        and "gpu-node-99" in detail, detail
    word, detail = lines["gpu-node-45"]
    assert word == "FAIL" and "agent FAIL 8 of the inventory's 16 GPU(s) visible" in detail, detail
    assert "5 node(s) checked" in out.stdout and "1 passed, 4 failed, 0 unchecked" in out.stdout, \
        out.stdout

    # a sample: two nodes spread over the five
    rc, lines, out = check_live(suite, medic, "--sample", "2")
    assert sorted(n for n in lines if n.startswith("gpu-node")) == ["gpu-node-41", "gpu-node-43"], \
        out.stdout

    # as a user Slurm refuses: the rights fail, with what to grant
    os.chown(medic.workdir, 65534, 65534)
    for f in os.listdir(medic.workdir):
        os.chown(os.path.join(medic.workdir, f), 65534, 65534)
    rc, lines, out = check_live(suite, medic, "--nodes", "gpu-node-41", user=65534)
    assert rc == 1, out
    assert lines["gpu-node-41"][0] == "ok", out.stdout
    word, detail = lines["slurm updates"]
    assert word == "FAIL" and "refused for user nobody" in detail \
        and "Invalid user id" in detail and "adminlevel=Admin" in detail, out.stdout

    # a BMC that does not answer (3 s of IPMI session timeout) and a time
    # limit of 1 s, one node at a time: the nodes after it are unchecked
    bmcs["gpu-node-41"].stop()
    rc, lines, out = check_live(suite, medic, "--jobs", "1", "--time-limit", "1s")
    assert rc == 1, out
    assert lines["gpu-node-41"][0] == "FAIL" and "bmc FAIL" in lines["gpu-node-41"][1], out.stdout
    for n in NODES[1:]:
        assert lines[n] == ("UNCHECKED", " not checked: the time limit (1s) passed first"), \
            out.stdout
    assert "1 node(s) checked" in out.stdout and "4 unchecked" in out.stdout, out.stdout

    # a policy that reboots through Slurm, and a Slurm with no RebootProgram
    with open(medic.config_path) as f:
        text = f.read()
    rebooting = os.path.join(medic.workdir, "reboots.yaml")
    with open(rebooting, "w") as f:
        f.write(text.replace(
            "policies: []\n",
            "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
            "safety: { storm: { notifier: oncall } }\n"
            "policies:\n  - name: reboot\n    match: '{alertname=\"X\"}'\n    cooldown: 1h\n"
            "    steps: [ { action: drain }, { after: 1m, action: slurm_reboot } ]\n"))
    out = subprocess.run([suite.medic, "check", "live", rebooting, "--nodes", "gpu-node-42"],
                         capture_output=True, text=True, timeout=120)
    reboot_line = [line for line in out.stdout.splitlines() if "slurm reboots" in line]
    assert out.returncode == 1 and reboot_line, out
    assert reboot_line[0].startswith("FAIL slurm reboots: RebootProgram = (null)") and \
        "set one in slurm.conf" in reboot_line[0], out.stdout
    rc, lines, out = check_live(suite, medic, "--nodes", "gpu-node-42")
    assert "slurm reboots" not in lines, out.stdout  # not asked: no policy reboots

    # a node the inventory lacks is a usage error; nothing was changed
    rc, _, out = check_live(suite, medic, "--nodes", "gpu-node-77")
    assert rc == 2 and "not in the inventory" in out.stderr, out
    assert {n: b.log() for n, b in bmcs.items()} == power_before, power_before
    assert {n: cluster.node(n)[0] for n in NODES} == states_before, \
        {n: cluster.node(n) for n in NODES}


if __name__ == "__main__":
    Suite(__doc__).run([test_check_live])
