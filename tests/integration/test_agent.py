#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""power_limit and restore_power_limit through `medic agent`. No GPU exists
on these machines: the agent loads a STAND-IN for NVIDIA's NVML library
(tests/nvml_standin, 8 fake GPUs whose limits are kept in a file), so the
limit the agent recorded can be asserted. The agent's API on its own:
token required, bounds enforced, the replaced limit remembered across an
agent restart."""

import json
import os
import time

from lab import Medic, Process, Suite, free_port, request, wait_until, write_secret

TOKEN = "agent-test-token"


def standin(variable="MEDIC_NVML_STANDIN"):
    path = os.environ.get(variable)
    assert path and os.path.exists(path), f"{variable} names a stand-in (tests/nvml_standin)"
    return path


class Agent:
    def __init__(self, suite, name, gpus=8, faults=""):
        self.gpus, self.faults = gpus, faults
        self.dir = suite.subdir(name)
        self.token_file = write_secret(os.path.join(self.dir, "agent.token"), TOKEN)
        self.state = os.path.join(self.dir, "agent.state")
        self.nvml_state = os.path.join(self.dir, "nvml-standin.state")
        # what a test or the stand-in reset changes while the agent runs
        self.faults_file = os.path.join(self.dir, "nvml-standin.faults")
        self.smi_log = os.path.join(self.dir, "nvidia-smi-standin.log")
        open(self.faults_file, "a").close()
        self.port = free_port()
        self.medic = suite.medic
        self.process = None

    def start(self):
        env = dict(os.environ, MEDIC_NVML_STANDIN_STATE=self.nvml_state,
                   MEDIC_NVML_STANDIN_GPUS=str(self.gpus),
                   MEDIC_NVML_STANDIN_FAULTS=self.faults,
                   MEDIC_NVML_STANDIN_FAULTS_FILE=self.faults_file,
                   MEDIC_NVML_STANDIN_LOG=self.smi_log)
        self.process = Process("agent", [self.medic, "agent", "--listen", f"127.0.0.1:{self.port}",
                                         "--token-file", self.token_file, "--state", self.state,
                                         "--nvml", standin(),
                                         "--nvidia-smi", standin("MEDIC_NVIDIA_SMI_STANDIN")],
                               self.dir, env=env)
        wait_until("the agent", lambda: request("GET", f"{self.url}/-/healthy")[0] == 200,
                   timeout=15)
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def call(self, method, path, body=None, token=TOKEN):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        status, _, out = request(method, self.url + path, body=body, headers=headers)
        return status, json.loads(out)

    def limits(self):
        """What the stand-in NVML holds: {gpu: milliwatts}."""
        if not os.path.exists(self.nvml_state):
            return {}
        with open(self.nvml_state) as f:
            return {int(a): int(b) for a, b in (line.split() for line in f if line.strip())}

    def stop(self):
        return self.process.stop() if self.process else None

    def fault(self, words):
        """Changes the stand-in GPUs' faults while the agent runs."""
        with open(self.faults_file, "a") as f:
            f.write(" " + words)

    def resets(self):
        """The stand-in nvidia-smi's runs: one argument list each."""
        if not os.path.exists(self.smi_log):
            return []
        with open(self.smi_log) as f:
            return [line.rstrip("\n").split("\t") for line in f if line.strip()]

    def uuid(self, physical):
        return f"GPU-5ta0d1n0-0000-0000-0000-{physical:012d}"


def test_agent_api(suite):
    agent = Agent(suite, "api").start()
    suite.on_exit(agent.stop)
    assert agent.call("GET", "/v1/gpus", token=None)[0] == 401
    assert agent.call("GET", "/v1/gpus", token="wrong")[0] == 401
    status, body = agent.call("GET", "/v1/gpus")
    assert status == 200 and len(body["gpus"]) == 8, body
    g = body["gpus"][3]
    assert (g["power_limit_w"], g["min_w"], g["max_w"]) == (350.0, 100.0, 400.0), g
    assert g["uuid"].startswith("GPU-") and g["name"] == "NVML stand-in GPU", g
    status, body = agent.call("POST", "/v1/gpus/3/power-limit", json.dumps({"watts": 900}))
    assert status == 400 and "outside GPU 3's limits 100.0..400.0" in body["error"], body
    status, body = agent.call("POST", "/v1/gpus/99/power-limit", json.dumps({"watts": 300}))
    assert status == 404 and body["error"] == "no GPU 99 on this node: it has 8 (indexes 0..7)", \
        body
    # an index past 32 bits must not wrap around to GPU 0, nor a signed or
    # padded one slip through
    for path in ("/v1/gpus/4294967296/power-limit", "/v1/gpus/-1/power-limit",
                 "/v1/gpus/+0/power-limit", "/v1/gpus/0x0/power-limit",
                 "/v1/gpus/0/power-limitX"):
        assert agent.call("POST", path, json.dumps({"watts": 300}))[0] == 404, path
    assert agent.call("POST", "/v1/restore", "{}")[0] == 409  # nothing of medic's yet
    status, body = agent.call("POST", "/v1/gpus/3/power-limit", json.dumps({"watts": 250}))
    assert status == 200 and body["previous_w"] == 350.0 and body["limit_w"] == 250.0, body
    agent.call("POST", "/v1/gpus/3/power-limit", json.dumps({"watts": 200}))
    assert agent.limits()[3] == 200000
    # the agent restarts: it still knows what it replaced (350 W, not 250 W).
    # SIGTERM stops it cleanly although NVML runs a thread of its own that
    # does not block signals.
    assert agent.stop() == 0
    with open(agent.process.log_path) as f:
        assert 'msg="medic agent stopping" signal=SIGTERM' in f.read()
    agent.start()
    status, body = agent.call("GET", "/v1/gpus")
    assert body["gpus"][3]["replaced_limit_w"] == 350.0, body["gpus"][3]
    status, body = agent.call("POST", "/v1/restore", "{}")
    assert status == 200 and body["restored"] == [{"index": 3, "limit_w": 350.0}], body
    assert agent.limits()[3] == 350000
    # an operator capped GPU 5 at 200 W by hand (nvidia-smi -pl 200): a
    # weaker limit from medic never raises it
    held = agent.limits()
    held[5] = 200000
    with open(agent.nvml_state, "w") as f:
        f.write("".join(f"{k} {v}\n" for k, v in sorted(held.items())))
    status, body = agent.call("POST", "/v1/gpus/5/power-limit", json.dumps({"watts": 300}))
    assert status == 200 and body["limit_w"] == 200.0 and body["kept_original"], body
    assert agent.limits()[5] == 200000
    status, body = agent.call("POST", "/v1/restore", "{}")
    assert status == 200 and agent.limits()[5] == 200000, body


def test_health_report(suite):
    """GET /v1/health: what the driver says of each GPU it sees, readings it
    cannot give named with the reason; a node that lost a GPU shows it by
    the count. Authenticated like every other endpoint."""
    agent = Agent(suite, "health", gpus=7,
                  faults="3:recovery=1 3:dbe=2 5:remap_pending=1 5:remap_failure=1 "
                         "0:processes=2 1:persistence=0 6:recovery=9").start()
    suite.on_exit(agent.stop)
    assert agent.call("GET", "/v1/health", token=None)[0] == 401
    assert agent.call("GET", "/v1/health", token="wrong")[0] == 401
    assert agent.call("POST", "/v1/health", "{}")[0] == 405
    status, body = agent.call("GET", "/v1/health")
    assert status == 200 and body["gpu_count"] == 7 and len(body["gpus"]) == 7, body
    assert body["driver_version"] == "stand-in", body
    g = {x["index"]: x for x in body["gpus"]}
    sound = g[2]
    assert sound["recovery_action"] == "none" and sound["recovery_action_code"] == 0, sound
    assert sound["persistence_mode"] is True and sound["volatile_dbe"] == 0, sound
    assert sound["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False,
                                      "failure": False}, sound
    assert sound["compute_processes"] == 0 and sound["power_limit_w"] == 350.0, sound
    # page retirement is not offered by a GPU that remaps rows: null, and why
    assert sound["retired_pages_pending"] is None, sound
    assert sound["unavailable"] == "retired_pages_pending: not supported on this GPU", sound
    assert g[3]["recovery_action"] == "gpu_reset" and g[3]["volatile_dbe"] == 2, g[3]
    assert g[5]["remapped_rows"]["pending"] and g[5]["remapped_rows"]["failure"], g[5]
    assert g[0]["compute_processes"] == 2 and g[1]["persistence_mode"] is False, (g[0], g[1])
    # a code a newer driver adds is reported as a number, never guessed at
    assert g[6]["recovery_action"] == "unknown" and g[6]["recovery_action_code"] == 9, g[6]
    # the limit medic replaced shows beside the health
    assert agent.call("POST", "/v1/gpus/4/power-limit", json.dumps({"watts": 250}))[0] == 200
    status, body = agent.call("GET", "/v1/health")
    four = body["gpus"][4]
    assert four["power_limit_w"] == 250.0 and four["replaced_limit_w"] == 350.0, four


def test_gpu_reset(suite):
    """POST /v1/gpus/N/reset: refused while compute processes run, when N is
    no longer the GPU medic named, or when that GPU fell off the bus; the
    command is an argv array (a UUID full of shell is only a UUID that is
    not there); persistence mode off first and back on after; the GPU
    confirmed back before 200. The stand-in nvidia-smi logs each run."""
    agent = Agent(suite, "reset", faults="1:processes=1").start()
    suite.on_exit(agent.stop)
    assert agent.call("POST", "/v1/gpus/3/reset", "{}", token=None)[0] == 401
    assert agent.call("GET", "/v1/gpus/3/reset")[0] == 405
    for body in ('{"uuid": 3}', '{"check_only": "yes"}', '[1]', '{"uuid": ""}'):
        assert agent.call("POST", "/v1/gpus/3/reset", body)[0] == 400, body
    status, body = agent.call("POST", "/v1/gpus/3/reset",
                              json.dumps({"uuid": agent.uuid(3), "check_only": True}))
    assert status == 200 and body["check_only"] and body["persistence_off_first"], body
    assert body["command"][1:] == ["--gpu-reset", "-i", agent.uuid(3)], body
    assert agent.resets() == []  # a check runs nothing
    status, body = agent.call("POST", "/v1/gpus/1/reset", "{}")
    assert status == 409 and "1 compute process runs on GPU 1" in body["error"], body
    status, body = agent.call("POST", "/v1/gpus/3/reset",
                              json.dumps({"uuid": "GPU-x; touch /tmp/medic-pwned"}))
    assert status == 404 and "not enumerated" in body["error"], body
    assert agent.resets() == [] and not os.path.exists("/tmp/medic-pwned")

    # GPU 3 needs a reset; GPU 2 fell off the bus, so the GPUs after it
    # moved down an index: "GPU 3" is physical GPU 4 now
    agent.fault("3:recovery=1 3:dbe=4 2:missing=1")
    status, body = agent.call("GET", "/v1/health")
    assert body["gpu_count"] == 7 and body["gpus"][2]["recovery_action"] == "gpu_reset", body
    # when NVML last found each GPU, and the node's boot: a verify's evidence
    before = body["gpus"][2]["enumerated_at"]
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert body["boot_id"] == f.read().strip(), body
    assert body["booted_at"] < before, body
    status, body = agent.call("POST", "/v1/gpus/3/reset", json.dumps({"uuid": agent.uuid(3)}))
    assert status == 409 and "numbered anew" in body["error"], body
    status, body = agent.call("POST", "/v1/gpus/2/reset", json.dumps({"uuid": agent.uuid(2)}))
    assert status == 404 and "fallen off the bus" in body["error"], body
    assert agent.resets() == []
    # the right index and UUID: persistence off (the stand-in refuses a
    # reset with it on), the reset, persistence back on, confirmed back
    status, body = agent.call("POST", "/v1/gpus/2/reset", json.dumps({"uuid": agent.uuid(3)}))
    assert status == 200 and body["uuid"] == agent.uuid(3), body
    assert body["recovery_action"] == "none" and body["persistence_mode"] is True, body
    assert agent.resets() == [["--gpu-reset", "-i", agent.uuid(3)]], agent.resets()
    status, health = agent.call("GET", "/v1/health")
    g = health["gpus"][2]
    assert g["uuid"] == agent.uuid(3) and g["recovery_action"] == "none", g
    assert g["volatile_dbe"] == 0 and g["persistence_mode"] is True, g
    # found again by an NVML opened after the reset (RFC 3339 in UTC sorts)
    assert g["enumerated_at"] > before, (g, before)

    # a reset the driver refuses: 500 with its words, persistence mode back
    agent.fault("5:reset_fails=1 5:recovery=1")
    status, body = agent.call("POST", "/v1/gpus/4/reset", json.dumps({"uuid": agent.uuid(5)}))
    assert status == 500 and "in use by another process" in body["error"], body
    assert len(agent.resets()) == 2
    status, health = agent.call("GET", "/v1/health")
    assert health["gpus"][4]["persistence_mode"] is True, health["gpus"][4]
    assert health["gpus"][4]["recovery_action"] == "gpu_reset", health["gpus"][4]
    # the agent keeps answering after all that
    assert agent.call("GET", "/v1/gpus")[0] == 200


def test_policy_limits_and_restores(suite):
    agent = Agent(suite, "node").start()
    suite.on_exit(agent.stop)
    workdir = suite.subdir("medic")
    token = write_secret(os.path.join(workdir, "webhook.token"), "w")
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         f"agent-lab: {{ token: {TOKEN} }}\n")
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"credentials_file: {creds}\n"
                  "inventory:\n  nodes:\n"
                  f"    - {{ name: gpu-node-01, agent: {{ url: '{agent.url}', "
                  "credentials: agent-lab }, gpus: 8 }\n"
                  "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
                  "safety: { max_disruptive_in_flight: 2, max_disrupted_fraction: 1,\n"
                  "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                  "policies:\n  - name: hot\n    match: '{alertname=\"GPUTemperatureHigh\"}'\n"
                  "    steps: [ { action: power_limit, watts: 300, gpus: [2, 5] } ]\n"
                  "    on_resolved: [ { action: restore_power_limit } ]\n"
                  "  - name: over-power\n    match: '{alertname=\"GPUPowerExcess\"}'\n"
                  "    steps: [ { action: power_limit, watts: 250, gpus: alert } ]\n")
    medic.start()
    suite.on_exit(medic.stop)
    import datetime
    t0 = time.time()

    def body(status, ends=None):
        ts = lambda t: datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
        return json.dumps({"version": "4", "groupKey": "g", "status": status, "receiver": "medic",
                           "alerts": [{"status": status, "labels": {
                               "alertname": "GPUTemperatureHigh", "instance": "gpu-node-01"},
                               "startsAt": ts(t0),
                               "endsAt": ts(ends) if ends else "0001-01-01T00:00:00Z"}]})

    medic.post("/webhook", body("firing"), headers={"Authorization": "Bearer w"})
    outcomes = lambda: [a for a in reversed(medic.audit("actions")) if a["phase"] == "outcome"]
    done = wait_until("the power limit", lambda: outcomes(), timeout=20)
    assert done[0]["result"] == "succeeded", done
    assert done[0]["detail"] == "GPU 2: 350 W -> 300 W; GPU 5: 350 W -> 300 W", done
    limits = agent.limits()
    assert limits[2] == 300000 and limits[5] == 300000 and limits[0] == 350000, limits
    medic.post("/webhook", body("resolved", time.time()), headers={"Authorization": "Bearer w"})
    done = wait_until("the restore", lambda: len(outcomes()) == 2 and outcomes(), timeout=20)
    assert done[1]["action"] == "restore_power_limit" and done[1]["result"] == "succeeded", done
    assert agent.limits()[2] == 350000 and agent.limits()[5] == 350000
    for row in medic.audit("actions"):
        assert TOKEN not in json.dumps(row)
    # gpus: alert caps the alert's GPU alone; one the node does not have
    # (the inventory says 8) is refused, never every GPU
    def power_alert(gpu, status="firing"):
        alert = json.loads(body(status, time.time() if status == "resolved" else None))
        alert["groupKey"] = f"g{gpu}"
        alert["alerts"][0]["labels"].update(alertname="GPUPowerExcess", gpu=gpu)
        return json.dumps(alert)
    medic.post("/webhook", power_alert("9"), headers={"Authorization": "Bearer w"})
    done = wait_until("the refused limit", lambda: len(outcomes()) == 3 and outcomes(),
                      timeout=20)
    assert done[2]["result"] == "refused", done
    assert "GPU 9 is not on node 'gpu-node-01'" in done[2]["detail"], done
    medic.post("/webhook", power_alert("9", "resolved"), headers={"Authorization": "Bearer w"})
    wait_until("its incident closed", lambda: [
        i for i in medic.audit("incidents", "--policy", "over-power")
        if i["state"] in ("recovered", "closed")], timeout=20)
    medic.post("/webhook", power_alert("6"), headers={"Authorization": "Bearer w"})
    done = wait_until("GPU 6's limit", lambda: len(outcomes()) == 4 and outcomes(), timeout=20)
    assert done[3]["result"] == "succeeded" and done[3]["detail"] == "GPU 6: 350 W -> 250 W", done
    limits = agent.limits()
    assert limits[6] == 250000 and all(limits[g] == 350000 for g in range(8) if g != 6), limits


if __name__ == "__main__":
    Suite(__doc__).run([test_agent_api, test_health_report, test_gpu_reset,
                        test_policy_limits_and_restores])
