#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The policy engine inside medic serve: decisions for committed
notifications, escalation by the scheduler, the state kept across a
restart (no step decided twice), POST /api/v1/dry-run without side effects,
and the decision chain intact under `medic audit verify`."""

import datetime
import json
import os
import subprocess
import time

from lab import Medic, Suite, wait_until, write_secret

TOKEN = "engine-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

CONFIG = """
mode: dry-run
inventory:
  nodes:
    - { name: gpu-node-01, aliases: [10.0.0.11] }
    - { name: gpu-node-02 }
    - { name: gpu-node-03 }
    - { name: gpu-node-04 }
notifiers:
  oncall: { type: webhook, url: http://127.0.0.1:9/hook }
safety: { max_disruptive_in_flight: 2, max_disrupted_fraction: 0.5 }
policies:
  - name: xid
    match: '{alertname="GPUXidError"}'
    steps:
      - action: drain
        reason: 'Xid {{ $labels.xid }} on GPU {{ $labels.gpu }}'
      - after: 4s
        action: ipmi_power_cycle
    on_resolved:
      - action: resume
"""


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def payload(status, instance, starts_at, ends_at=None, gpu="0"):
    alert = {"status": status,
             "labels": {"alertname": "GPUXidError", "instance": instance, "gpu": gpu,
                        "xid": "79"},
             "annotations": {}, "startsAt": rfc3339(starts_at),
             "endsAt": rfc3339(ends_at) if ends_at else "0001-01-01T00:00:00Z"}
    return json.dumps({"version": "4", "groupKey": f"{{}}:{{instance=\"{instance}\"}}",
                       "status": status, "receiver": "medic", "groupLabels": {},
                       "commonLabels": {}, "commonAnnotations": {}, "externalURL": "",
                       "alerts": [alert]})


def start(suite, name, config=CONFIG):
    workdir = suite.subdir(name)
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    medic = Medic(suite.medic, workdir,
                  f"auth: {{ webhook_bearer_token_file: {token} }}\n" + config)
    medic.start()
    suite.on_exit(medic.stop)
    return medic


def decisions(medic, *args):
    return list(reversed(medic.audit("decisions", *args)))  # oldest first


def test_decisions_escalation_restart_and_resume(suite):
    medic = start(suite, "ladder")
    t0 = time.time()
    status, _, body = medic.post("/webhook", payload("firing", "10.0.0.11:9400", t0), headers=AUTH)
    assert status == 200, body
    first = wait_until("the drain decision", lambda: decisions(medic), timeout=10)
    d = first[0]
    assert (d["node"], d["action"], d["verdict"], d["policy"]) == (
        "gpu-node-01", "drain", "dry_run", "xid"), d
    assert d["params"] == {"reason": "Xid 79 on GPU 0 (medic policy xid)"}, d
    assert d["alert_id"] and d["notification_id"], d
    # the scheduler decides the power cycle once the alert has fired 4 s
    cycle = wait_until("the power cycle", lambda: [x for x in decisions(medic)
                                                    if x["action"] == "ipmi_power_cycle"],
                       timeout=15)
    assert len(cycle) == 1 and cycle[0]["verdict"] == "dry_run", cycle
    # restart: the state comes back from the audit log
    assert medic.stop() == 0
    medic.start()
    # (on PostgreSQL once this medic takes the lease again)
    wait_until("the state restored", lambda: "policy engine state restored" in
               medic.process.tail(200), timeout=15)
    # Alertmanager re-sends the firing alert: it is evaluated (the engine
    # is alive and saw it), and nothing is decided again
    evaluated = lambda: medic.metric("medic_engine_notifications_evaluated_total", headers=AUTH)
    before = evaluated()
    medic.post("/webhook", payload("firing", "10.0.0.11:9400", t0), headers=AUTH)
    wait_until("the re-sent alert evaluated", lambda: evaluated() == before + 1, timeout=10)
    assert len(decisions(medic)) == 2, decisions(medic)
    # resolution: medic resumes what it drained, once the node passed a
    # health check (in a dry run, decided as passing)
    medic.post("/webhook", payload("resolved", "10.0.0.11:9400", t0, time.time()), headers=AUTH)
    resume = wait_until("the resume", lambda: [x for x in decisions(medic)
                                               if x["action"] == "resume"], timeout=10)
    assert resume[0]["verdict"] == "dry_run" and resume[0]["node"] == "gpu-node-01", resume
    assert [x["action"] for x in decisions(medic)] == ["drain", "ipmi_power_cycle", "verify",
                                                       "resume"], decisions(medic)
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0 and "4 decisions" in verify.stdout, verify
    assert medic.metric('medic_decisions_total{verdict="dry_run"}') == 2  # since the restart


def test_guards_in_serve(suite):
    # the power cycle an hour later: only the drains are decided, however
    # long the replay below takes to start
    config = CONFIG.replace("after: 4s", "after: 1h")
    medic = start(suite, "guards", config)
    now = time.time()
    for i, node in enumerate(["gpu-node-02", "gpu-node-03", "gpu-node-04", "rogue"]):
        medic.post("/webhook", payload("firing", node, now, gpu=str(i)), headers=AUTH)
    got = wait_until("four decisions", lambda: len(decisions(medic)) >= 4 and decisions(medic),
                     timeout=10)
    by_node = {d["node"]: d for d in got}
    assert by_node["gpu-node-02"]["verdict"] == "dry_run"
    assert by_node["gpu-node-03"]["verdict"] == "dry_run"
    assert by_node["gpu-node-04"]["verdict"] == "suppressed"
    assert "fleet cap" in by_node["gpu-node-04"]["reason"], by_node
    assert by_node["rogue"]["verdict"] == "suppressed"
    assert "not in the inventory" in by_node["rogue"]["reason"]
    assert medic.metric("medic_disrupted_nodes") == 2
    # the held drain is told (the held steps' notice: suppressed here, no
    # notifier), a decision of its own
    wait_until("the held steps' notice", lambda: [
        d for d in decisions(medic) if d["reason"].startswith("held steps notice: 1 incident")],
        timeout=10)
    # an SRE checks a tighter cap against what was recorded
    tighter = os.path.join(medic.workdir, "tighter.yaml")
    with open(tighter, "w") as f:
        f.write(config.replace("max_disruptive_in_flight: 2", "max_disruptive_in_flight: 1"))
    replay = subprocess.run([suite.medic, "replay", "--config", tighter, "--db", medic.db,
                             "--since", "1h", "--format", "json"],
                            capture_output=True, text=True, timeout=60)
    assert replay.returncode == 0, replay.stderr
    report = json.loads(replay.stdout)
    assert report["recorded"] == 5 and report["replayed"] == 5, report
    # gpu-node-03 is now suppressed; gpu-node-04 still is, for another reason
    assert report["execute_to_suppressed"] == 1 and report["changed"] == 2, report
    change = report["changes"][0]
    assert (change["node"], change["old_verdict"], change["new_verdict"]) == (
        "gpu-node-03", "dry_run", "suppressed"), change
    assert "max_disruptive_in_flight 1" in change["new_reason"], change
    assert "max_disruptive_in_flight 2" in report["changes"][1]["old_reason"], report
    same = subprocess.run([suite.medic, "replay", "--config", medic.config_path, "--db",
                           medic.db, "--since", "1h"], capture_output=True, text=True, timeout=60)
    assert "unchanged 5, changed 0, new 0, gone 0" in same.stdout, same.stdout
    # medic dry-run from the daemon's state: node-02 is already drained, so a
    # new alert there fits under the cap, one on gpu-node-01 does not
    payload_file = os.path.join(medic.workdir, "new.json")
    with open(payload_file, "w") as f:
        f.write(payload("firing", "gpu-node-01", time.time(), gpu="7"))
    dry = subprocess.run([suite.medic, "dry-run", "--config", medic.config_path, "--db", medic.db,
                          "--format", "json", payload_file],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    got = json.loads(dry.stdout)
    assert got[0]["verdict"] == "suppressed" and "fleet cap" in got[0]["reason"], got
    fresh = subprocess.run([suite.medic, "dry-run", "--config", medic.config_path, "--format",
                            "json", payload_file], capture_output=True, text=True, timeout=60)
    assert json.loads(fresh.stdout)[0]["verdict"] == "dry_run", fresh.stdout
    # a stale alert: started two hours ago
    medic.post("/webhook", payload("firing", "gpu-node-01", now - 7200), headers=AUTH)
    stale = wait_until("the stale decision", lambda: [d for d in decisions(medic)
                                                      if d["node"] == "gpu-node-01"], timeout=10)
    assert stale[0]["verdict"] == "suppressed" and "max_alert_age" in stale[0]["reason"], stale


def test_dry_run_endpoint_has_no_side_effects(suite):
    medic = start(suite, "dryrun")
    before = len(decisions(medic))
    status, _, body = medic.post("/api/v1/dry-run", payload("firing", "gpu-node-02", time.time()))
    assert status == 200, body
    data = json.loads(body)["data"]
    assert [(d["node"], d["action"], d["verdict"]) for d in data] == [
        ("gpu-node-02", "drain", "dry_run")], data
    # the same again: still a first decision, since nothing was kept
    status, _, body = medic.post("/api/v1/dry-run", payload("firing", "gpu-node-02", time.time()))
    assert len(json.loads(body)["data"]) == 1
    # an alert that started a minute ago: the drain and the power cycle due
    # after it, taken to succeed, as `medic dry-run` shows them too
    old = payload("firing", "gpu-node-03", time.time() - 60)
    status, _, body = medic.post("/api/v1/dry-run", old)
    api = [(d["node"], d["action"], d["verdict"]) for d in json.loads(body)["data"]]
    assert api == [("gpu-node-03", "drain", "dry_run"),
                   ("gpu-node-03", "ipmi_power_cycle", "dry_run")], api
    payload_file = os.path.join(suite.workdir, "old.json")
    with open(payload_file, "w") as f:
        f.write(old)
    cli = subprocess.run([suite.medic, "dry-run", "--config", medic.config_path, "--db", medic.db,
                          "--format", "json", payload_file],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert [(d["node"], d["action"], d["verdict"]) for d in json.loads(cli.stdout)] == api
    # the engine is alive (a real webhook is decided) and kept none of the above
    medic.post("/webhook", payload("firing", "gpu-node-04", time.time()), headers=AUTH)
    wait_until("the real webhook decided", lambda: any(
        d["node"] == "gpu-node-04" for d in decisions(medic)), timeout=10)
    assert [d["node"] for d in decisions(medic)][before:] == ["gpu-node-04"]
    status, _, body = medic.post("/api/v1/dry-run", "{not json")
    assert status == 400 and "invalid JSON" in json.loads(body)["error"], body
    assert medic.get("/api/v1/dry-run")[0] == 405


def test_reload_swaps_policies(suite):
    medic = start(suite, "reload")
    medic.post("/webhook", payload("firing", "gpu-node-02", time.time()), headers=AUTH)
    wait_until("the first decision", lambda: decisions(medic), timeout=10)
    good = open(medic.config_path).read()
    # a broken policy file keeps the running policies
    with open(medic.config_path, "w") as f:
        f.write(good.replace("action: drain", "action: reboot"))
    status, _, body = medic.post("/-/reload", "", content_type=None)
    assert status == 400 and "'reboot' is not one of" in json.loads(body)["error"], body
    assert medic.metric('medic_config_reloads_total{result="failure"}') == 1
    # a valid change: the drain's reason
    with open(medic.config_path, "w") as f:
        f.write(good.replace("reason: 'Xid", "reason: 'reloaded Xid"))
    assert medic.post("/-/reload", "", content_type=None)[0] == 200
    medic.post("/webhook", payload("firing", "gpu-node-03", time.time()), headers=AUTH)
    got = wait_until("the decision under the new policy",
                     lambda: [d for d in decisions(medic) if d["node"] == "gpu-node-03"],
                     timeout=10)
    assert got[0]["params"]["reason"].startswith("reloaded Xid 79"), got
    first = [d for d in decisions(medic) if d["node"] == "gpu-node-02"][0]
    assert first["config_hash"] != got[0]["config_hash"], (first, got)


if __name__ == "__main__":
    Suite(__doc__).run([
        test_decisions_escalation_restart_and_resume,
        test_guards_in_serve,
        test_dry_run_endpoint_has_no_side_effects,
        test_reload_swaps_policies,
    ])
