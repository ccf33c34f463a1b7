#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""drain and resume in a real Slurm cluster (munge, slurmctld, slurmd nodes
on 127.0.0.1): medic drains with its mark in the reason, confirmed by
reading the node back, resumes its own drain when the alert resolves, and
never touches an operator's drain, nor a drain a person made again over
medic's (whatever text they kept); alert text that looks like Slurm's own
fields never confuses medic; an unknown Slurm node fails clearly; a reboot
through Slurm is confirmed by the node's new boot."""

import json
import os
import subprocess
import time

from lab import Medic, SlurmCluster, Suite, wait_until, write_secret

TOKEN = "slurm-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def payload(node, starts_at, status="firing", ends_at=None, alertname="GPUDoubleBitECC",
            annotations=None):
    import datetime

    def ts(t):
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"version": "4", "groupKey": f"g-{node}", "status": status,
                       "receiver": "medic", "alerts": [{
                           "status": status,
                           "labels": {"alertname": alertname, "instance": node,
                                      "gpu": "3"},
                           "annotations": annotations or {}, "startsAt": ts(starts_at),
                           "endsAt": ts(ends_at) if ends_at else "0001-01-01T00:00:00Z"}]})


def outcomes(medic, kinds=("drain", "resume")):
    """Outcomes of the Slurm actions on nodes, oldest first (not the notes to
    on-call, nor the health check before each resume: test_repair's)."""
    return [a for a in reversed(medic.audit("actions"))
            if a["phase"] == "outcome" and a["action"] in kinds]


ECC_POLICIES = ("  - name: ecc\n    match: '{alertname=\"GPUDoubleBitECC\"}'\n"
                "    steps: [ { action: drain, reason: 'DBE on GPU {{ $labels.gpu }}' } ]\n"
                "    on_resolved: [ { action: resume } ]\n"
                "  - name: long\n    match: '{alertname=\"GPULongStory\"}'\n"
                "    steps: [ { action: drain, reason: '{{ $annotations.description }}' } ]\n"
                "    on_resolved: [ { action: resume } ]\n")


def start_medic(suite, cluster, name="medic", policies=ECC_POLICIES):
    workdir = suite.subdir(name)
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"slurm: {{ conf: {cluster.conf} }}\n"
                  "inventory:\n  nodes:\n"
                  "    - { name: gpu-node-01, slurm: { node: gpu-node-01 } }\n"
                  "    - { name: gpu-node-02, slurm: { node: gpu-node-02 } }\n"
                  "    - { name: gpu-node-09, slurm: { node: no-such-node } }\n"
                  "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
                  "safety: { max_disruptive_in_flight: 3, max_disrupted_fraction: 1,\n"
                  "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                  "policies:\n" + policies)
    medic.start()
    suite.on_exit(medic.stop)
    return medic


def test_drain_resume_and_operator_drains(suite):
    cluster = SlurmCluster(suite.workdir, ["gpu-node-01", "gpu-node-02"])
    suite.on_exit(cluster.stop)
    cluster.start()
    medic = start_medic(suite, cluster)

    t0 = time.time()
    medic.post("/webhook", payload("gpu-node-01", t0), headers=AUTH)
    drained = wait_until("the drain", lambda: outcomes(medic), timeout=30)
    assert drained[0]["result"] == "succeeded", drained
    state, reason = cluster.node("gpu-node-01")
    assert "DRAIN" in state, state
    assert reason.startswith("DBE on GPU 3 (medic policy ecc)"), reason
    assert "drained: State=" in drained[0]["detail"]

    medic.post("/webhook", payload("gpu-node-01", t0, "resolved", time.time()), headers=AUTH)
    resumed = wait_until("the resume", lambda: len(outcomes(medic)) == 2 and outcomes(medic),
                         timeout=30)
    assert resumed[1]["action"] == "resume" and resumed[1]["result"] == "succeeded", resumed
    assert "DRAIN" not in cluster.node("gpu-node-01")[0]
    # the resume came after the node passed its health check (Slurm answering)
    checked = outcomes(medic, ("drain", "verify", "resume"))
    assert [o["action"] for o in checked] == ["drain", "verify", "resume"], checked
    assert checked[1]["detail"] == "healthy after 1 check(s): slurm: IDLE+DRAIN", checked

    # an operator drains gpu-node-02 for maintenance; an alert comes and goes
    assert cluster.scontrol("update", "NodeName=gpu-node-02", "State=DRAIN",
                            "Reason=bad DIMM, ticket 4711").returncode == 0
    t1 = time.time()
    medic.post("/webhook", payload("gpu-node-02", t1), headers=AUTH)
    left = wait_until("the drain outcome", lambda: len(outcomes(medic)) == 3 and outcomes(medic),
                      timeout=30)[2]
    assert left["result"] == "succeeded" and "already drained by someone else" in left["detail"]
    assert "an operator's drain" in left["detail"], left
    assert cluster.node("gpu-node-02")[1].startswith("bad DIMM, ticket 4711")
    # the drain found someone else's: medic holds nothing there, so the
    # caps do not count it and the resolve resumes nothing
    assert medic.metric("medic_disrupted_nodes", headers=AUTH) == 0
    medic.post("/webhook", payload("gpu-node-02", t1, "resolved", time.time()), headers=AUTH)
    held = wait_until("the resume not taken", lambda: [
        d for d in medic.audit("decisions", "--node", "gpu-node-02")
        if d["action"] == "resume"], timeout=30)[0]
    assert held["verdict"] == "suppressed" and "holds no drain" in held["reason"], held
    state, reason = cluster.node("gpu-node-02")
    assert "DRAIN" in state and reason.startswith("bad DIMM, ticket 4711"), (state, reason)
    assert not [o for o in outcomes(medic) if o["action"] == "resume" and
                o["node"] == "gpu-node-02"]

    # a node Slurm does not know
    medic.post("/webhook", payload("gpu-node-09", time.time()), headers=AUTH)
    unknown = wait_until("the unknown node", lambda: len(outcomes(medic)) == 4 and
                         outcomes(medic)[3], timeout=30)
    assert unknown["result"] == "failed" and "no-such-node" in unknown["detail"], unknown

    # a reason longer than Slurm's 200 characters never loses medic's mark,
    # so medic can still resume its own drain (the text is cut instead, at a
    # character boundary)
    story = {"description": "é" * 300}
    t2 = time.time()
    medic.post("/webhook", payload("gpu-node-01", t2, alertname="GPULongStory",
                                   annotations=story), headers=AUTH)
    long_drain = wait_until("the long drain", lambda: len(outcomes(medic)) == 5 and
                            outcomes(medic)[4], timeout=30)
    assert long_drain["result"] == "succeeded", long_drain
    state, reason = cluster.node("gpu-node-01")
    assert "DRAIN" in state and "é (medic policy long)" in reason, reason
    assert reason.startswith("éé"), reason
    medic.post("/webhook", payload("gpu-node-01", t2, "resolved", time.time(),
                                   alertname="GPULongStory", annotations=story), headers=AUTH)
    long_resume = wait_until("the resume of the long drain", lambda: len(outcomes(medic)) == 6
                             and outcomes(medic)[5], timeout=30)
    assert long_resume["result"] == "succeeded", long_resume
    assert "DRAIN" not in cluster.node("gpu-node-01")[0]


def test_redrain_by_a_person_and_reasons_that_look_like_fields(suite):
    cluster = SlurmCluster(suite.workdir, ["gpu-node-01", "gpu-node-02"], name="slurm-redrain")
    suite.on_exit(cluster.stop)
    cluster.start()
    medic = start_medic(suite, cluster, "redrain")

    # medic drains gpu-node-02; a person drains it again for an RMA and,
    # as people do, keeps medic's text in the new reason
    t0 = time.time()
    medic.post("/webhook", payload("gpu-node-02", t0), headers=AUTH)
    drained = wait_until("the drain", lambda: outcomes(medic), timeout=30)[0]
    assert drained["result"] == "succeeded", drained
    medics = cluster.node("gpu-node-02")[1].rsplit(" [", 1)[0]
    assert medics == "DBE on GPU 3 (medic policy ecc)", medics
    assert cluster.scontrol("update", "NodeName=gpu-node-02", "State=DRAIN",
                            f"Reason=RMA-1234 do not resume; was: {medics}").returncode == 0
    medic.post("/webhook", payload("gpu-node-02", t0, "resolved", time.time()), headers=AUTH)
    refused = wait_until("the refused resume", lambda: [
        o for o in outcomes(medic) if o["action"] == "resume"], timeout=30)[0]
    assert refused["result"] == "refused", refused
    assert "drained again by someone else" in refused["detail"], refused
    # medic's drain is gone: the caps no longer count the node
    wait_until("the node no longer counted", lambda: medic.metric("medic_disrupted_nodes", headers=AUTH) == 0,
               timeout=30)
    state, reason = cluster.node("gpu-node-02")
    assert "DRAIN" in state and reason.startswith("RMA-1234 do not resume"), (state, reason)

    # an annotation that quotes Slurm's own field syntax ends up in the
    # drain reason: medic still recognises its drain and resumes it
    tricky = {"description": "fan 3 Comment=RMA Reason=x [ops@2026-01-01T00:00:00] Extra=y"}
    t1 = time.time()
    medic.post("/webhook", payload("gpu-node-01", t1, alertname="GPULongStory",
                                   annotations=tricky), headers=AUTH)
    wait_until("the second drain", lambda: len(outcomes(medic)) == 3, timeout=30)
    assert outcomes(medic)[2]["result"] == "succeeded", outcomes(medic)
    state, reason = cluster.node("gpu-node-01")
    assert "DRAIN" in state, state
    # what medic wrote cannot be read as Slurm's fields or stamp
    assert "Comment:RMA Reason:x (ops@2026-01-01T00:00:00)" in reason, reason
    medic.post("/webhook", payload("gpu-node-01", t1, "resolved", time.time(),
                                   alertname="GPULongStory", annotations=tricky), headers=AUTH)
    resumed = wait_until("the resume", lambda: len(outcomes(medic)) == 4 and outcomes(medic),
                         timeout=30)[3]
    assert resumed["action"] == "resume" and resumed["result"] == "succeeded", resumed
    assert "DRAIN" not in cluster.node("gpu-node-01")[0]


def test_slurm_reboot(suite):
    """slurm_reboot against real slurmctld/slurmd: Slurm's RebootProgram
    restarts the node's slurmd as after a boot (the lab's boot stand-in).
    After medic's drain, the reboot is confirmed by a BootTime later than
    the request, the node stays drained through it, the verify after it
    asks for that boot, and the resume of medic's drain still works though
    Slurm re-stamped its reason. A reboot step with no drain before it is
    refused and nothing reboots, while the same cluster rebooted the other
    node."""
    cluster = SlurmCluster(suite.workdir, ["gpu-node-01", "gpu-node-02"], name="slurm-reboot",
                           reboots=True)
    suite.on_exit(cluster.stop)
    cluster.start()
    medic = start_medic(suite, cluster, "medic-reboot", policies=(
        "  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n    cooldown: 1h\n"
        "    steps:\n"
        "      - { action: drain, reason: 'Xid on GPU {{ $labels.gpu }}' }\n"
        "      - { after: 1s, action: slurm_reboot, within: 2m }\n"
        "      - { after: 2s, action: verify, within: 1m }\n"
        "    on_resolved: [ { action: resume } ]\n"
        "  - name: careless\n    match: '{alertname=\"GPUFellOffBus\"}'\n    cooldown: 1h\n"
        "    steps: [ { action: slurm_reboot } ]\n"))
    check = subprocess.run([suite.medic, "check", "config", medic.config_path], capture_output=True,
                           text=True, timeout=60)
    assert "policy 'careless' step 1 (slurm_reboot) has no drain before it" in check.stderr, \
        check.stderr
    live = subprocess.run([suite.medic, "check", "live", medic.config_path], capture_output=True,
                          text=True, timeout=60)
    assert f"ok slurm reboots: RebootProgram = {cluster.dir}/reboot.sh" in live.stdout, live
    booted_before = cluster.boot_time("gpu-node-01")

    t0 = time.time()
    medic.post("/webhook", payload("gpu-node-01", t0, alertname="GPUXidError"), headers=AUTH)
    steps = ("drain", "slurm_reboot", "verify", "resume")
    done = wait_until("drain, reboot and verify", lambda: len(outcomes(medic, steps)) >= 3 and
                      outcomes(medic, steps), timeout=120)
    assert [o["action"] for o in done] == ["drain", "slurm_reboot", "verify"], done
    assert all(o["result"] == "succeeded" for o in done), done
    reboots = cluster.reboots()
    assert [n for n, _ in reboots] == ["gpu-node-01"], reboots
    assert reboots[0][1] >= int(t0), (reboots, t0)
    # evidence: Slurm shows a boot after the request, not the one before
    booted = cluster.boot_time("gpu-node-01")
    assert booted != booted_before and booted in done[1]["detail"], (booted, done[1])
    assert "rebooted after" in done[1]["detail"] and "State=IDLE+DRAIN" in done[1]["detail"]
    # drained through the reboot: verify decides the return, not Slurm
    state, reason = cluster.node("gpu-node-01")
    assert "DRAIN" in state and "(medic policy xid)" in reason, (state, reason)
    assert "reboot issued" in reason, reason
    verify = [d for d in medic.audit("decisions", "--node", "gpu-node-01")
              if d["action"] == "verify"][0]
    assert "booted_after" in json.dumps(verify), verify
    assert "boot: after the restart" in done[2]["detail"] and booted in done[2]["detail"], done[2]

    medic.post("/webhook", payload("gpu-node-01", t0, "resolved", time.time(),
                                   alertname="GPUXidError"), headers=AUTH)
    resumed = wait_until("the resume", lambda: len(outcomes(medic, steps)) == 4 and
                         outcomes(medic, steps)[3], timeout=30)
    assert resumed["action"] == "resume" and resumed["result"] == "succeeded", resumed
    assert "DRAIN" not in cluster.node("gpu-node-01")[0]

    # no drain before it: refused, and the node is never rebooted
    medic.post("/webhook", payload("gpu-node-02", time.time(), alertname="GPUFellOffBus"),
               headers=AUTH)
    refused = wait_until("the refused reboot", lambda: [
        o for o in outcomes(medic, ("slurm_reboot",)) if o["node"] == "gpu-node-02"],
        timeout=30)[0]
    assert refused["result"] == "refused", refused
    assert "the reboot is not sent" in refused["detail"], refused
    assert [n for n, _ in cluster.reboots()] == ["gpu-node-01"], cluster.reboots()
    assert "DRAIN" not in cluster.node("gpu-node-02")[0]


def test_inventory_import_and_check(suite):
    """medic inventory import --slurm writes an inventory from what real
    slurmctld lists: like nodes in one hostlist entry, their partition, leaf
    switch (topology/tree) and key=value features (rack) as labels, and a
    warning that no node shows a GPU in its Gres; medic loads it, and
    group caps can use the labels; medic inventory check names an inventory
    node Slurm does not know, and exits 1."""
    nodes = ["gpu-node-50", "gpu-node-51", "gpu-node-52"]
    cluster = SlurmCluster(suite.workdir, nodes, name="slurm-import",
                           features={"gpu-node-50": "rack=r01,h100", "gpu-node-51": "rack=r01",
                                     "gpu-node-52": "rack=r02"},
                           topology="SwitchName=leaf1 Nodes=gpu-node-[50-51]\n"
                                    "SwitchName=leaf2 Nodes=gpu-node-52\n"
                                    "SwitchName=spine Switches=leaf[1-2]\n")
    suite.on_exit(cluster.stop)
    cluster.start()
    work = suite.subdir("import")
    inv = os.path.join(work, "inventory.yaml")
    out = subprocess.run([suite.medic, "inventory", "import", "--slurm", "--slurm-conf",
                          cluster.conf, "--bmc", "{{ node }}-bmc:623", "--out", inv],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 node(s) in 2 entries written" in out.stderr, out.stderr
    assert "warning: 3 of 3 node(s) show no GPU in their Gres" in out.stderr, out.stderr
    with open(inv) as f:
        text = f.read()
    assert "  - name: 'gpu-node-[50-51]'\n    slurm: { node: '{{ node }}' }\n" in text, text
    assert "labels: { partition: 'gpu', switch: 'leaf1', rack: 'r01' }" in text, text
    assert "  - name: 'gpu-node-52'\n" in text, text
    assert "labels: { partition: 'gpu', switch: 'leaf2', rack: 'r02' }" in text, text
    assert "'{{ node }}-bmc:623'" in text and text.endswith("\n"), text
    config = os.path.join(work, "medic.yaml")
    with open(config, "w") as f:
        f.write(f"inventory: {{ file: {inv} }}\n"
                "safety: { group_caps: [ { label: rack, max_disrupted: 1 },"
                " { label: switch, max_disrupted: 1 } ] }\n")
    ok = subprocess.run([suite.medic, "check", "config", config], capture_output=True, text=True,
                        timeout=60)
    assert ok.returncode == 0 and "3 inventory nodes" in ok.stdout, ok.stdout + ok.stderr
    checked = subprocess.run([suite.medic, "inventory", "check", "--config", config,
                              "--slurm-conf", cluster.conf], capture_output=True, text=True,
                             timeout=120)
    assert checked.returncode == 0 and "0 Slurm does not know" in checked.stdout, checked
    # a node the inventory names and Slurm does not know
    with open(inv, "a") as f:
        f.write("  - { name: gpu-node-99, slurm: { node: gpu-node-99 } }\n")
    checked = subprocess.run([suite.medic, "inventory", "check", "--config", config,
                              "--slurm-conf", cluster.conf], capture_output=True, text=True,
                             timeout=120)
    assert checked.returncode == 1, checked
    assert "not in Slurm: gpu-node-99 (slurm node gpu-node-99)" in checked.stdout, checked.stdout


if __name__ == "__main__":
    Suite(__doc__).run([test_drain_resume_and_operator_drains,
                        test_redrain_by_a_person_and_reasons_that_look_like_fields,
                        test_slurm_reboot,
                        test_inventory_import_and_check])
