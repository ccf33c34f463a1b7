#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Actions in live mode: notify through a generic webhook (bearer token from
the credentials file), a Slack-compatible webhook, PagerDuty's Events API v2
and SMTP, with an intent row before each and an outcome after; retries on
5xx, a clear failure on 4xx and on an unreachable endpoint; never twice
across a restart; an action cut off by a crash marked interrupted and not
run again."""

import json
import os
import socket
import subprocess
import time

from lab import Medic, RecordingReceiver, SmtpSink, Suite, free_port, wait_until, write_secret

TOKEN = "actions-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def payload(alertname, instance, starts_at, status="firing"):
    import datetime
    t = datetime.datetime.fromtimestamp(starts_at, datetime.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"version": "4", "groupKey": f"g-{alertname}-{instance}", "status": status,
                       "receiver": "medic", "alerts": [{
                           "status": status,
                           "labels": {"alertname": alertname, "instance": instance, "gpu": "2"},
                           "annotations": {}, "startsAt": t,
                           "endsAt": "0001-01-01T00:00:00Z"}]})


def start(suite, name, notifiers, policies, more_credentials=""):
    workdir = suite.subdir(name)
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         "hook-token: { token: hook-secret-123 }\n"
                         "pd-key: { routing_key: pd-routing-key-456 }\n" + more_credentials)
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"credentials_file: {creds}\n"
                  "inventory: { nodes: [ { name: gpu-node-01 }, { name: gpu-node-02 } ] }\n"
                  f"notifiers:\n{notifiers}policies:\n{policies}")
    medic.start()
    suite.on_exit(medic.stop)
    return medic


def actions(medic):
    return list(reversed(medic.audit("actions")))


def outcomes(medic):
    return [a for a in actions(medic) if a["phase"] == "outcome"]


def test_notify_four_ways(suite):
    hook = RecordingReceiver()
    smtp = SmtpSink()
    suite.on_exit(hook.stop)
    suite.on_exit(smtp.stop)
    # Slack's incoming webhook URL is a secret: it stays in the credentials file
    slack_path = "/slack/T0001/B0002/secret-789"
    notifiers = (f"  hook: {{ type: webhook, url: '{hook.url}/hook', credentials: hook-token }}\n"
                 f"  slack: {{ type: slack, credentials: slack-hook }}\n"
                 f"  pd: {{ type: pagerduty, url: '{hook.url}/pd', credentials: pd-key }}\n"
                 f"  mail: {{ type: smtp, url: 'smtp://127.0.0.1:{smtp.port}', "
                 f"from: medic@lab.test, to: [oncall@lab.test, ops@lab.test] }}\n")
    policies = "".join(
        f"  - name: tell-{n}\n"
        f"    match: '{{alertname=\"GPUPCIeLinkDegraded\"}}'\n"
        f"    continue: true\n"
        f"    steps: [ {{ action: notify, notifier: {n}, "
        f"message: 'PCIe of GPU {{{{ $labels.gpu }}}} on {{{{ $node }}}} is degraded' }} ]\n"
        for n in ("hook", "slack", "pd", "mail"))
    medic = start(suite, "four", notifiers, policies,
                  f"slack-hook: {{ url: '{hook.url}{slack_path}' }}\n")
    t0 = time.time()
    status, _, body = medic.post("/webhook", payload("GPUPCIeLinkDegraded", "gpu-node-01:9400",
                                                     t0), headers=AUTH)
    assert status == 200, body
    done = wait_until("four outcomes", lambda: len(outcomes(medic)) == 4 and outcomes(medic),
                      timeout=20)
    assert {a["result"] for a in done} == {"succeeded"}, done
    intents = [a for a in actions(medic) if a["phase"] == "intent"]
    assert len(intents) == 4 and all(a["result"] == "pending" for a in intents)
    assert {a["intent_id"] for a in done} == {a["id"] for a in intents}
    decisions = medic.audit("decisions")
    assert {d["verdict"] for d in decisions} == {"execute"}, decisions

    h = hook.received("/hook")[0]
    assert h["headers"]["Authorization"] == "Bearer hook-secret-123", h["headers"]
    j = json.loads(h["body"])
    assert j["node"] == "gpu-node-01" and j["policy"] == "tell-hook", j
    assert j["message"] == "PCIe of GPU 2 on gpu-node-01 is degraded", j
    assert j["decision_id"] in {d["id"] for d in decisions}
    s = json.loads(hook.received(slack_path)[0]["body"])
    assert s == {"text": "PCIe of GPU 2 on gpu-node-01 is degraded"}, s
    p = json.loads(hook.received("/pd")[0]["body"])
    assert p["routing_key"] == "pd-routing-key-456" and p["event_action"] == "trigger", p
    assert p["dedup_key"].startswith("medic-decision-") and p["payload"]["source"] == "gpu-node-01"
    assert p["payload"]["summary"] == "PCIe of GPU 2 on gpu-node-01 is degraded", p
    mail = smtp.messages[0]
    assert mail["from"] == "medic@lab.test" and mail["to"] == ["oncall@lab.test", "ops@lab.test"]
    assert "Subject: PCIe of GPU 2 on gpu-node-01 is degraded" in mail["data"], mail["data"]
    # secrets are in no audit row
    for row in actions(medic) + decisions:
        text = json.dumps(row)
        assert "hook-secret-123" not in text and "pd-routing-key-456" not in text, row
        assert "secret-789" not in text, row
    with open(os.path.join(suite.workdir, "four", "medic.yaml")) as f:
        assert "secret-789" not in f.read()
    assert medic.metric('medic_actions_total{action="notify",result="succeeded"}',
                        headers=AUTH) == 4

    # a restart and Alertmanager's re-send: nothing runs twice
    assert medic.stop() == 0
    medic.start()
    status, _, body = medic.post("/webhook", payload("GPUPCIeLinkDegraded", "gpu-node-01:9400",
                                                     t0), headers=AUTH)
    assert status == 200 and json.loads(body)["duplicate"] is True, body
    # the engine evaluated it (alive after the restart), and a scheduler
    # round ran since: nothing was decided or run again
    wait_until("the re-send evaluated", lambda: medic.metric(
        "medic_engine_notifications_evaluated_total", headers=AUTH) == 1, timeout=10)
    ticks = medic.metric("medic_engine_ticks_total", headers=AUTH)
    wait_until("a scheduler round", lambda: medic.metric(
        "medic_engine_ticks_total", headers=AUTH) > ticks, timeout=10)
    assert len(outcomes(medic)) == 4 and len(hook.received()) == 3 and len(smtp.messages) == 1


def test_retries_and_failures(suite):
    hook = RecordingReceiver()
    suite.on_exit(hook.stop)
    dead = free_port()  # nothing listens there
    notifiers = (f"  flaky: {{ type: webhook, url: '{hook.url}/flaky' }}\n"
                 f"  refusing: {{ type: webhook, url: '{hook.url}/refusing' }}\n"
                 f"  gone: {{ type: webhook, url: 'http://127.0.0.1:{dead}/x' }}\n")
    policies = "".join(
        f"  - name: {n}\n"
        f"    match: '{{alertname=\"{alert}\"}}'\n"
        f"    steps: [ {{ action: notify, notifier: {n} }} ]\n"
        for n, alert in (("flaky", "A1"), ("refusing", "A2"), ("gone", "A3")))
    medic = start(suite, "retries", notifiers, policies)
    hook.fail_next(503, 500)  # the flaky one: two server errors, then 200
    medic.post("/webhook", payload("A1", "gpu-node-01", time.time()), headers=AUTH)
    first = wait_until("the flaky outcome", lambda: outcomes(medic), timeout=20)
    assert first[0]["result"] == "succeeded", first
    assert [r["status"] for r in hook.received("/flaky")] == [503, 500, 200]
    hook.fail_next(400, 400, 400)
    medic.post("/webhook", payload("A2", "gpu-node-01", time.time()), headers=AUTH)
    refused = wait_until("the refused outcome", lambda: len(outcomes(medic)) == 2 and
                         outcomes(medic)[1], timeout=20)
    assert refused["result"] == "failed" and "HTTP 400 after 1 attempt" in refused["detail"], refused
    assert len(hook.received("/refusing")) == 1  # a 4xx is not retried
    started = time.monotonic()
    medic.post("/webhook", payload("A3", "gpu-node-02", time.time()), headers=AUTH)
    gone = wait_until("the unreachable outcome", lambda: len(outcomes(medic)) == 3 and
                      outcomes(medic)[2], timeout=30)
    assert gone["result"] == "failed" and "after 3 attempts" in gone["detail"], gone
    assert time.monotonic() - started < 20


def test_crash_mid_action_is_interrupted_not_rerun(suite):
    # a server that accepts connections and never answers
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(16)
    suite.on_exit(blackhole.close)
    port = blackhole.getsockname()[1]
    notifiers = f"  slow: {{ type: webhook, url: 'http://127.0.0.1:{port}/' }}\n"
    policies = ("  - name: slow\n    match: '{alertname=\"A\"}'\n"
                "    steps: [ { action: notify, notifier: slow } ]\n")
    medic = start(suite, "crash", notifiers, policies)
    medic.post("/webhook", payload("A", "gpu-node-01", time.time()), headers=AUTH)
    wait_until("the intent", lambda: actions(medic), timeout=10)
    assert medic.stop(sig=9) == -9  # killed mid-action: the intent has no outcome
    assert [a["phase"] for a in actions(medic)] == ["intent"]
    medic.start()
    log = wait_until("the interruption", lambda: "interrupted actions are not run again" in medic.process.tail(50)
                     and medic.process.tail(50), timeout=10)
    rows = actions(medic)
    assert [a["phase"] for a in rows] == ["intent", "outcome"], rows
    assert rows[1]["result"] == "interrupted" and "not run again" in rows[1]["detail"], rows
    # two scheduler rounds after the recovery (the default 5 s apart): the
    # engine is alive, and nothing ran again
    ticks = medic.metric("medic_engine_ticks_total", headers=AUTH)
    wait_until("two scheduler rounds", lambda: medic.metric(
        "medic_engine_ticks_total", headers=AUTH) >= ticks + 2, timeout=20)
    assert len(actions(medic)) == 2
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert log


if __name__ == "__main__":
    Suite(__doc__).run([
        test_notify_four_ways,
        test_retries_and_failures,
        test_crash_mid_action_is_interrupted_not_rerun,
    ])
