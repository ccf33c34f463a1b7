#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ipmi_power_cycle through libfreeipmi over RMCP+ against ipmi_sim BMCs on
127.0.0.1: a cycle that shows in the BMC's power log and is confirmed by the
chassis status, a node found off powered on, a slow BMC sent the
power cycle once, a wrong password failing fast
and clearly, an unreachable BMC failing in bounded time, four nodes at
once; intents and outcomes audited, secrets nowhere in the log."""

import json
import os
import subprocess
import time

from lab import IpmiBmc, Medic, Suite, wait_until, write_secret

TOKEN = "ipmi-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def payload(node, starts_at, alertname="GPUFellOffBus"):
    import datetime
    t = datetime.datetime.fromtimestamp(starts_at, datetime.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"version": "4", "groupKey": f"g-{node}", "status": "firing",
                       "receiver": "medic", "alerts": [{
                           "status": "firing", "labels": {"alertname": alertname,
                                                          "instance": node, "gpu": "0"},
                           "annotations": {}, "startsAt": t,
                           "endsAt": "0001-01-01T00:00:00Z"}]})


def start_lab(suite, name, bmcs, passwords=None, driver="lan_2_0"):
    workdir = suite.subdir(name)
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         "bmc-lab: { username: admin, password: secret }\n"
                         "bmc-wrong: { username: admin, password: not-the-password }\n")
    nodes = "".join(
        f"    - {{ name: {n}, bmc: {{ address: '{b.address}', "
        f"credentials: {(passwords or {}).get(n, 'bmc-lab')}, driver: {driver}"
        + (", workarounds: [opensesspriv]" if driver == "lan_2_0" else "") + " } }\n"
        for n, b in bmcs.items())
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"credentials_file: {creds}\n"
                  f"inventory:\n  nodes:\n{nodes}"
                  "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
                  "safety: { max_disruptive_in_flight: 4, max_disrupted_fraction: 1,\n"
                  "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                  "policies:\n  - name: cycle\n    match: '{alertname=\"GPUFellOffBus\"}'\n"
                  "    steps: [ { action: ipmi_power_cycle } ]\n")
    medic.start()
    suite.on_exit(medic.stop)
    return medic


def bmcs(suite, *names, **kw):
    out = {}
    for n in names:
        b = IpmiBmc(suite.workdir, n, **kw)
        b.start()
        suite.on_exit(b.stop)
        out[n] = b
    return out


def outcomes(medic):
    """Outcomes of the actions on nodes (not the notes to on-call), oldest first."""
    return [a for a in reversed(medic.audit("actions"))
            if a["phase"] == "outcome" and a["action"] != "notify"]


def test_power_cycle_confirmed(suite):
    lab = bmcs(suite, "gpu-node-01")
    medic = start_lab(suite, "cycle", lab)
    medic.post("/webhook", payload("gpu-node-01", time.time()), headers=AUTH)
    done = wait_until("the outcome", lambda: outcomes(medic), timeout=60)
    assert done[0]["result"] == "succeeded", done
    assert "power cycled: off after" in done[0]["detail"] and "on after" in done[0]["detail"]
    log = lab["gpu-node-01"].log()
    assert ["set", "power", "0"] in log and log[-1] == ["set", "power", "1"], log
    assert lab["gpu-node-01"].power() == 1
    for row in medic.audit("actions"):
        assert "secret" not in json.dumps(row), row


def test_off_node_is_powered_on(suite):
    lab = bmcs(suite, "gpu-node-02", power=0)
    medic = start_lab(suite, "off", lab)
    medic.post("/webhook", payload("gpu-node-02", time.time()), headers=AUTH)
    done = wait_until("the outcome", lambda: outcomes(medic), timeout=60)
    assert done[0]["result"] == "succeeded" and "the node was off: powered on" in done[0]["detail"]
    assert lab["gpu-node-02"].log() == [["set", "power", "1"]]


def test_slow_bmc_gets_one_command(suite):
    """A BMC that answers a power change after medic's retransmission
    timeout (500 ms) but within the session's (3 s): the power cycle reaches
    it once. Reads may be resent; the command that changes the chassis is
    not (FreeIPMI resends with new sequence numbers, which a BMC cannot tell
    from a second command); the same over IPMI 1.5, whose sessions with
    ipmi_sim need a resend while they open. A BMC silent for the whole
    session timeout gets one copy (FreeIPMI's, as it gives up), and the
    power state still decides the outcome."""
    for node, driver in (("gpu-node-05", "lan_2_0"), ("gpu-node-07", "lan")):
        lab = bmcs(suite, node, reply_delay=1.2)
        medic = start_lab(suite, "slow-" + driver, lab, driver=driver)
        medic.post("/webhook", payload(node, time.time()), headers=AUTH)
        done = wait_until("the outcome", lambda: outcomes(medic), timeout=60)
        assert done[0]["result"] == "succeeded", (driver, done)
        log = lab[node].log()
        assert log == [["set", "power", "0"], ["set", "power", "1"]], (driver, log)
        assert lab[node].power() == 1
    silent = bmcs(suite, "gpu-node-06", reply_delay=4)
    medic = start_lab(suite, "silent", silent)
    medic.post("/webhook", payload("gpu-node-06", time.time()), headers=AUTH)
    done = wait_until("the outcome", lambda: outcomes(medic), timeout=90)
    assert done[0]["result"] == "succeeded" and "the reply was lost" in done[0]["detail"], done
    log = silent["gpu-node-06"].log()
    assert log.count(["set", "power", "0"]) == 2 and log[-1] == ["set", "power", "1"], log
    assert silent["gpu-node-06"].power() == 1


def test_wrong_password_and_unreachable(suite):
    lab = bmcs(suite, "gpu-node-03", "gpu-node-04")
    medic = start_lab(suite, "failures", lab, passwords={"gpu-node-03": "bmc-wrong"})
    lab["gpu-node-04"].stop()  # unreachable: no answer at all
    t0 = time.monotonic()
    medic.post("/webhook", payload("gpu-node-03", time.time()), headers=AUTH)
    wrong = wait_until("the wrong password", lambda: outcomes(medic), timeout=30)[0]
    assert wrong["result"] == "failed" and "password invalid" in wrong["detail"], wrong
    assert wrong["duration_ms"] < 2000, wrong
    medic.post("/webhook", payload("gpu-node-04", time.time()), headers=AUTH)
    gone = wait_until("the unreachable BMC", lambda: len(outcomes(medic)) == 2 and
                      outcomes(medic)[1], timeout=30)
    assert gone["result"] in ("timed_out", "failed") and "timeout" in gone["detail"], gone
    assert gone["duration_ms"] < 10000, gone
    assert lab["gpu-node-03"].log() == []
    assert time.monotonic() - t0 < 30


def test_four_nodes_at_once(suite):
    names = [f"gpu-node-1{i}" for i in range(4)]
    lab = bmcs(suite, *names)
    medic = start_lab(suite, "four", lab)
    now = time.time()
    for n in names:
        medic.post("/webhook", payload(n, now), headers=AUTH)
    done = wait_until("four outcomes", lambda: len(outcomes(medic)) == 4 and outcomes(medic),
                      timeout=60)
    assert {a["result"] for a in done} == {"succeeded"}, done
    assert {a["node"] for a in done} == set(names)
    for n in names:
        assert ["set", "power", "0"] in lab[n].log() and lab[n].power() == 1, (n, lab[n].log())
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0, verify.stdout


if __name__ == "__main__":
    Suite(__doc__).run([
        test_power_cycle_confirmed,
        test_off_node_is_powered_on,
        test_slow_bmc_gets_one_command,
        test_wrong_password_and_unreachable,
        test_four_nodes_at_once,
    ])
