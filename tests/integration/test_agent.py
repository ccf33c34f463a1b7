#!/usr/bin/python3
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


def standin():
    path = os.environ.get("MEDIC_NVML_STANDIN")
    assert path and os.path.exists(path), "MEDIC_NVML_STANDIN names the stand-in NVML library"
    return path


class Agent:
    def __init__(self, suite, name, gpus=8, faults=""):
        self.gpus, self.faults = gpus, faults
        self.dir = suite.subdir(name)
        self.token_file = write_secret(os.path.join(self.dir, "agent.token"), TOKEN)
        self.state = os.path.join(self.dir, "agent.state")
        self.nvml_state = os.path.join(self.dir, "nvml-standin.state")
        self.port = free_port()
        self.medic = suite.medic
        self.process = None

    def start(self):
        env = dict(os.environ, MEDIC_NVML_STANDIN_STATE=self.nvml_state,
                   MEDIC_NVML_STANDIN_GPUS=str(self.gpus),
                   MEDIC_NVML_STANDIN_FAULTS=self.faults)
        self.process = Process("agent", [self.medic, "agent", "--listen", f"127.0.0.1:{self.port}",
                                         "--token-file", self.token_file, "--state", self.state,
                                         "--nvml", standin()], self.dir, env=env)
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
                  "    on_resolved: [ { action: restore_power_limit } ]\n")
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


if __name__ == "__main__":
    Suite(__doc__).run([test_agent_api, test_health_report, test_policy_limits_and_restores])
