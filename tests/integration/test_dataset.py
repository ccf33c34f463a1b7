#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""From an operator's Prometheus and medic's audit log to a retrained
model: medic power-cycles a node for real (ipmi_sim over RMCP+), `medic
model dataset` exports the windows before that incident as positives and
windows of healthy nodes as negatives from a Prometheus whose history was
backfilled with promtool, the values are those Prometheus holds, and
model/train/medic_train.py retrains on the file into a model that medic
loads and scores with. Without a model file, medic serve and medic predict
score with the model built into medic."""

import json
import math
import os
import re
import struct
import subprocess
import sys
import time

from lab import IpmiBmc, Medic, Suite, wait_until, write_secret
from test_predict import hot_alert, start_prometheus

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TRAIN = os.path.join(ROOT, "model", "train", "medic_train.py")
sys.path.insert(0, os.path.join(ROOT, "model", "train"))
import features  # noqa: E402  (the built-in model's inputs)

METRICS = ["DCGM_FI_DEV_" + name for name in features.SERIES]
NODES = {"gpu-node-01": 2, "gpu-node-02": 2, "gpu-node-03": 2}
STEP = 15


def value(metric, node, gpu, t):
    """Known telemetry; gpu-node-01 GPU 0 runs hot, throttles, and its
    single-bit errors and remapped rows climb (the GPU that fails)."""
    hot = node == "gpu-node-01" and gpu == 0
    n = int(node[-1])
    return round({"DCGM_FI_DEV_GPU_TEMP": 60 + 20 * hot + 3 * math.sin(t / 500 + gpu + n),
                  "DCGM_FI_DEV_MEMORY_TEMP": 70 + 20 * hot + 2 * math.cos(t / 700 + gpu),
                  "DCGM_FI_DEV_POWER_USAGE": 300 + 20 * math.sin(t / 300 + n),
                  "DCGM_FI_DEV_SM_CLOCK": 1410 - 5 * gpu - 300 * hot * (t % 600 < 120),
                  "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 64 if hot and t % 600 < 120 else 4,
                  "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": 40 + (t // 10) % 1000000 * hot,
                  "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": 0,
                  "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": (t // 600) % 100000 * hot,
                  "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
                  "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
                  "DCGM_FI_DEV_XID_ERRORS": 0}[metric], 3)


def scrapes(node, gpu, start, end):
    """The history of one GPU as features.evaluate_node reads it."""
    ts = list(range(start, end + 1, STEP))
    return features.Scrapes(ts, {name: [value("DCGM_FI_DEV_" + name, node, gpu, t) for t in ts]
                                 for name in features.SERIES})


def history(start, end):
    lines = []
    for m in METRICS:
        lines.append(f"# TYPE {m} gauge")
        for node, gpus in NODES.items():
            for g in range(gpus):
                for t in range(start, end + 1, STEP):
                    lines.append(f'{m}{{Hostname="{node}",gpu="{g}",job="dcgm"}} '
                                 f"{value(m, node, g, t)} {t}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def read_dataset(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__")
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        assert t["dtype"] == "F32" and b - a == 4 * math.prod(t["shape"]), t
        out[name] = (t["shape"], struct.unpack(f"<{(b - a) // 4}f", data[a:b]))
    return out, meta


def power_cycle_incident(suite, starts_at):
    """medic, live, power-cycles gpu-node-01 through its BMC for an alert
    that started at starts_at; returns the audit database."""
    bmc = IpmiBmc(suite.workdir, "gpu-node-01")
    bmc.start()
    suite.on_exit(bmc.stop)
    workdir = suite.subdir("medic")
    token = write_secret(os.path.join(workdir, "webhook.token"), "dataset-token")
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         "bmc-lab: { username: admin, password: secret }\n")
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"credentials_file: {creds}\n"
                  "inventory:\n  nodes:\n"
                  f"    - {{ name: gpu-node-01, bmc: {{ address: '{bmc.address}', "
                  "credentials: bmc-lab, workarounds: [opensesspriv] } }\n"
                  "    - { name: gpu-node-02 }\n    - { name: gpu-node-03 }\n"
                  "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
                  "safety: { max_disruptive_in_flight: 1, max_disrupted_fraction: 1,\n"
                  "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                  "policies:\n  - name: cycle\n    match: '{alertname=\"GPUFellOffBus\"}'\n"
                  "    steps: [ { action: ipmi_power_cycle } ]\n")
    medic.start()
    suite.on_exit(medic.stop)
    t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(starts_at))
    body = json.dumps({"version": "4", "groupKey": "g", "status": "firing", "receiver": "medic",
                       "alerts": [{"status": "firing",
                                   "labels": {"alertname": "GPUFellOffBus",
                                              "Hostname": "gpu-node-01", "gpu": "0"},
                                   "annotations": {}, "startsAt": t,
                                   "endsAt": "0001-01-01T00:00:00Z"}]})
    status, _, _ = medic.post("/webhook", body,
                              headers={"Authorization": "Bearer dataset-token"})
    assert status == 200
    out = wait_until("the power cycle's outcome", lambda: [
        a for a in medic.audit("actions") if a["phase"] == "outcome"], timeout=60)[0]
    assert out["result"] == "succeeded" and out["action"] == "ipmi_power_cycle", out
    medic.stop()
    return medic.db


def dataset(suite, *args):
    return subprocess.run([suite.medic, "model", "dataset", *args], capture_output=True,
                          text=True, timeout=300)


def test_dataset_from_audit_log_and_prometheus(suite):
    now = int(time.time())
    url, _ = start_prometheus(suite, "prom", history(now - 4 * 3600, now - 30))
    starts_at = now - 20
    db = power_cycle_incident(suite, starts_at)
    out_path = os.path.join(suite.workdir, "dataset.safetensors")
    r = dataset(suite, "--db", db, "--prometheus", url, "--out", out_path, "--since", "3h",
                "--horizon", "30m", "--stride", "5m", "--negatives", "6", "--quiet", "1h",
                "--seed", "7")
    assert r.returncode == 0, r.stderr
    assert "1 incidents in " in r.stderr, r.stderr
    if db.startswith("postgresql://"):  # the log's URL is shown without its password
        password = db.split("://")[1].split("@")[0].split(":")[1]
        assert "medic:***@" in r.stderr and password not in r.stderr, r.stderr
    print("  " + r.stdout.strip())
    tensors, meta = read_dataset(out_path)
    (wshape, wins), (lshape, labels) = tensors["windows"], tensors["labels"]
    samples = json.loads(meta["samples"])
    n = wshape[0]
    D = len(features.FEATURES)
    assert wshape[1:] == [30, D] and lshape == [n] and len(samples) == n, (wshape, lshape)
    assert meta["format"] == "medic-dataset" and len(json.loads(meta["features"])) == D
    pos = [s for s in samples if s["label"] == 1]
    neg = [s for s in samples if s["label"] == 0]
    # six windows (30m back, every 5m) for the alert's GPU, none for the others
    assert len(pos) == 6 and all(s["node"] == "gpu-node-01" and s["gpu"] == "0" for s in pos)
    assert all("ipmi_power_cycle after GPUFellOffBus" == s["source"] for s in pos), pos[0]
    # six healthy node-times, all GPUs of each; none near the incident on its node
    assert len(neg) == 12, neg
    for s in neg:
        end = time.mktime(time.strptime(s["end"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        assert s["node"] != "gpu-node-01" or abs(end - starts_at) >= 3600, s
    assert [labels[i] for i in range(n)] == [float(s["label"]) for s in samples]
    # the values are Prometheus's: the last step of each window is every
    # feature evaluated on the backfilled history at the window's end
    history_start = now - 4 * 3600
    for i, s in enumerate(samples):
        end = int(time.mktime(time.strptime(s["end"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone)
        end -= end % 60
        last = wins[i * 30 * D + 29 * D:(i + 1) * 30 * D]
        node = [scrapes(s["node"], g, history_start, now - 30) for g in range(NODES[s["node"]])]
        want = features.evaluate_node(node, [float(end)])[int(s["gpu"])][0]
        for d, (name, _) in enumerate(features.FEATURES):
            assert abs(last[d] - want[d]) < 1e-3 * max(abs(want[d]), 1.0), \
                (s, name, last[d], want[d])
    print(f"  {len(pos)} positive windows before the power cycle, {len(neg)} healthy; "
          "values match the backfilled history")

    # retraining on it gives a model medic loads and scores with
    model = os.path.join(suite.workdir, "retrained.safetensors")
    r = subprocess.run(["/usr/bin/python3", TRAIN, "retrain", "--dataset", out_path, "--out",
                        model, "--epochs", "3"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    info = subprocess.run([suite.medic, "model", "info", model], capture_output=True, text=True)
    assert info.returncode == 0 and "retrained on 18 windows" in info.stdout, info.stdout
    p = subprocess.run([suite.medic, "predict", "--model", model, "--prometheus", url, "--node",
                        "gpu-node-01", "--format", "json"], capture_output=True, text=True,
                       timeout=60)
    risk = json.loads(p.stdout)["risk"]
    assert p.returncode == 0 and 0 <= risk <= 1, p
    print(f"  retrained model scores gpu-node-01 at {risk:.4f}")
    # before it replaces the model in use, it is checked on labelled windows
    # against that model and the rule: one fault cannot tell, so it is refused
    # with the report, and the exit status a deploy script stops on
    c = subprocess.run([suite.medic, "model", "check", "--model", model, "--dataset", out_path],
                       capture_output=True, text=True, timeout=60)
    assert c.returncode == 1, c.stdout + c.stderr
    assert "18 windows, 6 positive from 1 faults, 12 negative" in c.stdout, c.stdout
    assert re.search(r"new model +[01]\.\d{3} +[01]\.\d{3}\n", c.stdout), c.stdout
    assert re.search(r"in use \([0-9a-f]{12}\) +[01]\.\d{3}", c.stdout), c.stdout
    assert ("verdict: refused: the dataset holds 1 fault and 12 negative windows: at least 10 "
            "faults") in c.stdout, c.stdout
    # or fine-tuned from the built-in model, its weights and scaler the start
    tuned = os.path.join(suite.workdir, "tuned.safetensors")
    r = subprocess.run(["/usr/bin/python3", TRAIN, "retrain", "--dataset", out_path, "--out",
                        tuned, "--epochs", "2", "--fine-tune",
                        os.path.join(ROOT, "model", "default.safetensors")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    info = subprocess.run([suite.medic, "model", "info", tuned], capture_output=True, text=True)
    assert "fine-tuned from default.safetensors on 18 windows" in info.stdout, info.stdout
    c = subprocess.run([suite.medic, "model", "check", "--model", tuned, "--dataset", out_path,
                        "--against", model], capture_output=True, text=True, timeout=60)
    assert c.returncode == 1 and "verdict: refused" in c.stdout, c.stdout + c.stderr
    assert f"in use: {model}" in c.stdout, c.stdout


def test_builtin_model_scores_alerts(suite):
    """No model.path: medic serve scores with the built-in model, as medic
    predict does without --model, and the decision names its hash."""
    now = int(time.time())
    url, _ = start_prometheus(suite, "prom-builtin", history(now - 2 * 3600, now - 30))
    info = subprocess.run([suite.medic, "model", "info"], capture_output=True, text=True)
    assert info.returncode == 0 and "model: built-in" in info.stdout, info.stdout
    sha = info.stdout.split("sha256: ")[1].split()[0]
    workdir = suite.subdir("medic-builtin")
    token = write_secret(os.path.join(workdir, "webhook.token"), "builtin-token")
    medic = Medic(suite.medic, workdir,
                  f"auth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"prometheus: {{ url: {url}, timeout: 3s }}\n"
                  "inventory:\n  nodes: [ { name: gpu-node-01 } ]\n"
                  "policies:\n  - name: risky\n    match: '{alertname=\"GPUHot\"}'\n"
                  "    when: { risk_at_least: 0.0, risk_unknown: skip }\n"
                  "    steps: [ { action: drain } ]\n")
    medic.start()
    suite.on_exit(medic.stop)

    def predicted():
        p = subprocess.run([suite.medic, "predict", "--prometheus", url, "--node", "gpu-node-01",
                            "--gpu", "0", "--format", "json"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    before = predicted()
    status, _, _ = medic.post("/webhook", hot_alert("gpu-node-01", "0"),
                              headers={"Authorization": "Bearer builtin-token"})
    assert status == 200
    d = wait_until("the decision", lambda: medic.audit("decisions"), timeout=20)[0]
    after = predicted()
    assert before["model_hash"] == sha and d["model_hash"] == sha, (d, before)
    assert d["risk"] is not None and min(abs(d["risk"] - before["risk"]),
                                         abs(d["risk"] - after["risk"])) < 1e-5, (d, before)
    # the reason names what stands out on the failing GPU: its climbing
    # single-bit errors and remapped rows
    assert re.search(r"risk [0-9.]+ gpu 0 \(", d["reason"]), d
    assert "ecc_sbe_log_increase_15m=" in d["reason"], d
    assert "remapped_rows_increase_1h=" in d["reason"], d
    print(f"  built-in model {sha[:12]}: decision risk {d['risk']:.4f}, medic predict "
          f"{before['risk']:.4f}")
    # fleet scoring is on by default once Prometheus is set: the GPU's risk
    # is on /metrics, as medic predict scores the same window
    gauge = 'medic_gpu_failure_risk{node="gpu-node-01",gpu="0"}'

    def fleet():
        body = medic.get("/metrics")[2].decode()
        values = {line.split()[0]: float(line.split()[-1]) for line in body.splitlines()
                  if line and not line.startswith("#")}
        return (values[gauge], values["medic_fleet_scoring_window_end_timestamp_seconds"]) \
            if gauge in values else None

    risk, end = wait_until("a fleet cycle on the built-in interval", fleet, timeout=30)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end))
    p = subprocess.run([suite.medic, "predict", "--prometheus", url, "--node", "gpu-node-01",
                        "--gpu", "0", "--at", at, "--format", "json"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert abs(json.loads(p.stdout)["risk"] - risk) < 1e-5, (risk, p.stdout)
    print(f"  fleet scoring without fleet_interval: gpu-node-01 gpu 0 {risk:.4f} for the window "
          f"ending {at}, as medic predict --at scores it")


def test_dataset_errors(suite):
    db = os.path.join(suite.workdir, "empty.db")
    out_path = os.path.join(suite.workdir, "none.safetensors")
    # an audit log that does not exist
    r = dataset(suite, "--db", db, "--prometheus", "http://127.0.0.1:1", "--out", out_path)
    assert r.returncode == 1 and "medic model dataset:" in r.stderr, r.stderr
    # usage errors name what is missing or wrong
    r = dataset(suite, "--db", db)
    assert r.returncode == 2 and "--prometheus and --out are required" in r.stderr, r.stderr
    r = dataset(suite, "--db", db, "--prometheus", "http://x", "--out", out_path,
                "--horizon", "soon")
    assert r.returncode == 2 and "--horizon wants a duration (90s, 5m, 1h), not 'soon'" in \
        r.stderr, r.stderr
    assert not os.path.exists(out_path)
    print("  missing audit log and bad options: clear errors, no file written")


if __name__ == "__main__":
    Suite(__doc__).run([test_dataset_from_audit_log_and_prometheus,
                        test_builtin_model_scores_alerts, test_dataset_errors])
