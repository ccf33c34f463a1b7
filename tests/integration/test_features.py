#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The model's features (model/train/features.py) as a real Prometheus
computes them from dcgm-exporter's series and as training computes them
from the same scrapes agree: medic predict fetches the window from a
Prometheus holding backfilled scrapes (30 s apart, off the minute, with
counter increases, a counter reset, held Xid codes and throttle bits) and
writes it with --window-csv; every value must match the Python
evaluation, the features relative to the node's other GPUs included. A
second GPU of the node runs warmer and exports neither the ECC totals nor the throttle
reasons (dcgm-exporter's default counters): its optional features fall
back to 0 with their indicators at 0, in Prometheus as in training. medic
serve's fleet scoring, which rewrites every selector of a template for a
regex of nodes and splits the answers by GPU, and after its first cycle
asks only for the steps since the last, gives each GPU the risk medic
predict gives it alone."""

import csv
import json
import math
import os
import random
import struct
import subprocess
import sys
import time

import numpy as np

from lab import Medic, Suite, wait_until
from test_predict import hot_alert, start_prometheus

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "model", "train"))
import evaluate  # noqa: E402
import features  # noqa: E402

NODE, GPU, BARE_GPU = "gpu-node-07", "3", "4"
INTERVAL, OFFSET = 30.0, 7.25


def scrapes(start, end):
    """One GPU's dcgm-exporter series: smooth gauges, counters that climb,
    the PCIe replay counter reset by a driver reload, Xid codes held, the
    throttle bitmask switching between reasons."""
    rng = np.random.default_rng(7)
    ts = np.arange(start + OFFSET, end, INTERVAL)
    n = len(ts)
    u = (ts - start) / 3600.0
    v = {
        "GPU_TEMP": 60 + 8 * np.sin(u * 3) + rng.normal(0, 0.4, n).round(1),
        "MEMORY_TEMP": 66 + 9 * np.sin(u * 3 + 0.3),
        "POWER_USAGE": (300 + 60 * np.sin(u * 7) + rng.normal(0, 15, n)).round(3),
        "SM_CLOCK": np.where(np.sin(u * 5) > -0.5, 1410, 1005) - 15 * rng.integers(0, 3, n),
        "CLOCK_THROTTLE_REASONS": np.where(np.sin(u * 11) > 0.6, 8 + 128,
                                           np.where(np.sin(u * 11) < -0.8, 64 + 4, 1)),
        "ECC_SBE_AGG_TOTAL": 40 + np.cumsum(rng.poisson(0.2, n)),
        "ECC_DBE_AGG_TOTAL": 2 + np.cumsum(rng.random(n) < 0.01),
        "CORRECTABLE_REMAPPED_ROWS": 1 + np.cumsum(rng.random(n) < 0.02),
        "UNCORRECTABLE_REMAPPED_ROWS": np.cumsum(rng.random(n) < 0.005),
        "XID_ERRORS": np.zeros(n),
    }
    replay = np.cumsum(rng.poisson(0.5, n)).astype(float)
    reset = int(n * 0.8)  # a driver reload: the counter starts again
    replay[reset:] -= replay[reset - 1] + 1
    v["PCIE_REPLAY_COUNTER"] = np.maximum(replay, 0) + np.where(np.arange(n) >= reset, 3, 0)
    xid = v["XID_ERRORS"]
    for at, code in ((0.5, 13), (0.85, 79), (0.9, 48), (0.95, 31)):
        xid[int(n * at):] = code  # held until the next
    return features.Scrapes(ts, v)


def without_optional(s):
    """A sibling as a default dcgm-exporter shows it: no ECC totals, no
    throttle reasons; it runs warmer than GPU 3 by a margin that moves, so
    that the features relative to the node's GPUs move too."""
    gone = {name for names in features.OPTIONAL.values() for name in names}
    v = {k: x for k, x in s.values.items() if k not in gone}
    warmer = np.round(3 + 2 * np.sin(np.linspace(0, 9, len(s.ts))))
    v["GPU_TEMP"] = v["GPU_TEMP"] + warmer
    v["MEMORY_TEMP"] = v["MEMORY_TEMP"] + 2 * warmer
    return features.Scrapes(s.ts, v)


def openmetrics(gpus):
    lines = []
    for name in features.SERIES:
        metric = "DCGM_FI_DEV_" + name
        lines.append(f"# TYPE {metric} gauge")
        for gpu, s in gpus.items():
            if name not in s.values:
                continue
            for t, x in zip(s.ts, s.values[name]):
                lines.append(f'{metric}{{Hostname="{NODE}",gpu="{gpu}",'
                             f'modelName="NVIDIA A100-SXM4-80GB",job="dcgm"}} {float(x)!r} '
                             f'{t:.3f}')
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


# a blend of the LSTM with the rule score (model/train/blend.py), its
# weights large enough that the rule's part shows
BLEND = {"logit_weight": 0.8, "rule_weight": 1.5, "bias": -1.25}


def test_model(path, window=30, blend=None):
    """A FaultPredictor with the features' metadata and seeded random
    weights (the values do not matter here, the inputs do), and blend in
    its metadata when given."""
    D, H, C = len(features.FEATURES), 16, 32
    shapes = {"lstm.weight_ih_l0": [4 * H, D], "lstm.weight_hh_l0": [4 * H, H],
              "lstm.bias_ih_l0": [4 * H], "lstm.bias_hh_l0": [4 * H],
              "classifier.0.weight": [C, H], "classifier.0.bias": [C],
              "classifier.2.weight": [1, C], "classifier.2.bias": [1]}
    rng = random.Random(5)
    header, blobs, offset = {}, [], 0
    for name in sorted(shapes):
        count = math.prod(shapes[name])
        raw = struct.pack(f"<{count}f", *(rng.uniform(-0.3, 0.3) for _ in range(count)))
        header[name] = {"dtype": "F32", "shape": shapes[name],
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    spec = [{"name": n, "query": q, "center": 0.0, "scale": 1.0} for n, q in features.FEATURES]
    header["__metadata__"] = {"window": str(window), "step": "60s",
                              "features": json.dumps(spec, separators=(",", ":"))}
    if blend:
        header["__metadata__"]["blend"] = json.dumps(blend)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def fetch_and_compare(suite, url, model, gpu, node, at=None):
    """medic predict's window for one GPU (ending now, or at the unix time
    at) against the Python evaluation over its node's GPUs (node: gpu ->
    Scrapes); returns the features' values."""
    got_csv = os.path.join(suite.workdir, f"window-{gpu}.csv")
    when = [] if at is None else ["--at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))]
    out = subprocess.run([suite.medic, "predict", "--model", model, "--prometheus", url,
                          "--node", NODE, "--gpu", gpu, "--format", "json",
                          "--window-csv", got_csv, *when],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    after = (int(time.time()) if at is None else int(at)) // 60 * 60
    if at is not None:
        assert json.loads(out.stdout)["window_end"] == time.strftime(
            "%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(after)), out.stdout
    with open(got_csv) as f:
        rows = list(csv.reader(f))
    assert rows[0] == [n for n, _ in features.FEATURES], rows[0]
    got = np.array(rows[1:], dtype=np.float64)
    assert got.shape == (30, len(features.FEATURES)), got.shape
    # the window ends at medic's now aligned down to the minute: the
    # minute it ran in, or the one before if it ran across a boundary
    best = None
    for end in (after, after - 60):
        want = features.evaluate_node(list(node.values()), end - 60.0 * np.arange(29, -1, -1))
        want = want[list(node).index(gpu)]
        assert not np.isnan(want).any(), "the history should cover every feature"
        err = np.abs(got - want) / np.maximum(np.abs(want), 1.0)
        if best is None or err.max() < best[0]:
            best = (err.max(), end, want, err)
    worst, end, want, err = best
    for k, (name, _) in enumerate(features.FEATURES):
        i = int(np.argmax(err[:, k]))
        assert err[i, k] < 1e-5, (f"GPU {gpu}: {name} at step {i}: Prometheus {got[i, k]!r}, "
                                  f"training {want[i, k]!r}")
    print(f"  GPU {gpu}: {len(features.FEATURES)} features x 30 steps agree within "
          f"{worst:.1e} (relative)")
    # the window written is the one scored: read back, it gives the same risk
    back = subprocess.run([suite.medic, "predict", "--model", model, "--csv", got_csv,
                           "--format", "json"], capture_output=True, text=True, timeout=60)
    assert back.returncode == 0, back.stderr
    a, b = json.loads(out.stdout)["risk"], json.loads(back.stdout)["risk"]
    assert abs(a - b) < 1e-5, (a, b)
    return want


def test_prometheus_computes_what_training_computes(suite):
    now = time.time()
    s = scrapes(now - 3 * 3600, now - 20)
    bare = without_optional(s)
    node = {GPU: s, BARE_GPU: bare}
    url, _ = start_prometheus(suite, "prom", openmetrics(node))
    model = os.path.join(suite.workdir, "features.model.safetensors")
    test_model(model)
    want = fetch_and_compare(suite, url, model, GPU, node)
    # the window moves: every feature changed somewhere in it or differs
    # from zero, so that a feature Prometheus could not compute (all zero,
    # or a constant) cannot pass unnoticed
    for k, (name, _) in enumerate(features.FEATURES):
        assert np.ptp(want[:, k]) > 0 or np.abs(want[:, k]).max() > 0, name
    moving = [n for k, (n, _) in enumerate(features.FEATURES) if np.ptp(want[:, k]) > 0]
    print(f"  {len(moving)} of them move in the window")
    # the GPU without the optional families: their features are 0 and say so
    bare_want = fetch_and_compare(suite, url, model, BARE_GPU, node)
    for name in ("hw_throttle", "throttle_exported", "ecc_sbe_log_increase_15m",
                 "ecc_dbe_increase_1h", "ecc_exported"):
        assert (bare_want[:, features.F[name]] == 0).all(), name
    for name in ("throttle_exported", "ecc_exported"):
        assert (want[:, features.F[name]] == 1).all(), name
    # --at: the window that ended 80 minutes ago, across the counter reset
    # and the Xid codes of the history's middle
    past = fetch_and_compare(suite, url, model, GPU, node, at=now - 80 * 60)
    assert not np.array_equal(past, want)
    blended = os.path.join(suite.workdir, "features.blended.safetensors")
    test_model(blended, blend=BLEND)
    blends_as_training_does(suite, url, model, blended, now - 80 * 60, past)
    fleet_scores_each_gpu_as_predict_does(suite, url, blended)


def blends_as_training_does(suite, url, plain, blended, at, window):
    """medic's risk with a blend: its rule score of the window is the
    training's (evaluate.rule_score) and its risk is blend.py's formula
    over the LSTM's risk alone (the same weights without the blend)."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))

    def scored(model):
        out = subprocess.run([suite.medic, "predict", "--model", model, "--prometheus", url,
                              "--node", NODE, "--gpu", GPU, "--format", "json", "--at", when],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["gpus"][0]

    alone, joined = scored(plain), scored(blended)
    want_rule = float(evaluate.rule_score(window[None].astype(np.float32))[0])
    assert want_rule > 0.1, f"the window should fire a term of the rule ({want_rule})"
    assert abs(joined["rule_score"] - want_rule) < 1e-4 * max(1.0, want_rule), (joined, want_rule)
    assert alone["rule_score"] == joined["rule_score"] and joined["rule_terms"], (alone, joined)
    p = alone["risk"]
    z = BLEND["logit_weight"] * math.log(p / (1 - p)) + BLEND["rule_weight"] * want_rule \
        + BLEND["bias"]
    want = 1 / (1 + math.exp(-z))
    assert abs(joined["risk"] - want) < 1e-5, (joined, alone, want)
    print(f"  blended: rule score {joined['rule_score']:.4f} ({joined['rule_terms']}) as "
          f"training computes it, risk {alone['risk']:.5f} alone -> {joined['risk']:.5f}")


def fleet_scores_each_gpu_as_predict_does(suite, url, model):
    """Fleet scoring gives each GPU medic predict's risk (model: one with a
    blend), and a decision's reason names the rule's terms that fired."""
    workdir = suite.subdir("fleet")
    token = os.path.join(workdir, "webhook.token")
    with open(token, "w") as f:
        f.write("fleet-token\n")
    os.chmod(token, 0o600)
    medic = Medic(suite.medic, workdir,
                  f"auth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"model: {{ path: {model}, fleet_interval: 1s }}\n"
                  f"prometheus: {{ url: {url}, timeout: 5s }}\n"
                  f"inventory:\n  nodes: [ {{ name: {NODE} }} ]\n"
                  "policies:\n  - name: risky-gpu\n    match: '{alertname=\"GPUHot\"}'\n"
                  "    when: { risk_at_least: 0.0, risk_unknown: skip }\n"
                  "    steps:\n      - action: drain\n")
    medic.start()
    suite.on_exit(medic.stop)

    def alone(gpu):
        out = subprocess.run([suite.medic, "predict", "--model", model, "--prometheus", url,
                              "--node", NODE, "--gpu", gpu, "--format", "json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["gpus"][0]

    scored = {g: alone(g) for g in (GPU, BARE_GPU)}
    before = {g: s["risk"] for g, s in scored.items()}
    # the first cycle fetches whole windows; the next ones ask only for the
    # steps since and take the rest from the cycle before
    wait_until("three fleet cycles", lambda: medic.metric(
        "medic_fleet_scoring_cycles_total") >= 3, timeout=30)
    fleet = {g: medic.metric(f'medic_gpu_failure_risk{{node="{NODE}",gpu="{g}"}}')
             for g in (GPU, BARE_GPU)}
    assert medic.metric("medic_fleet_scoring_full_fetches_total") == 1
    after = {g: alone(g)["risk"] for g in (GPU, BARE_GPU)}
    for g in (GPU, BARE_GPU):
        assert fleet[g] is not None, (g, fleet)
        assert min(abs(fleet[g] - before[g]), abs(fleet[g] - after[g])) < 1e-5, \
            (g, fleet, before, after)
    assert medic.metric("medic_fleet_scoring_failures_total") == 0
    print(f"  fleet scoring, cycles after the first asking for the steps since: GPU {GPU} "
          f"{fleet[GPU]:.6f}, GPU {BARE_GPU} {fleet[BARE_GPU]:.6f}, as medic predict scores "
          "each alone")
    # an alert's decision: the reason names the rule's terms medic predict
    # names for the GPU (the window then, or a step later)
    status, _, body = medic.post("/webhook", hot_alert(NODE, GPU),
                                 headers={"Authorization": "Bearer fleet-token"})
    assert status == 200, body
    d = wait_until("the decision", lambda: medic.audit("decisions"), timeout=20)[0]
    terms = {scored[GPU]["rule_terms"], alone(GPU)["rule_terms"]}
    assert all(terms) and any(f"gpu {GPU} (rule: {t}; " in d["reason"] for t in terms), \
        (d["reason"], terms)
    print(f"  the decision's reason: {d['reason']}")


def test_window_csv_needs_one_gpu(suite):
    out = subprocess.run([suite.medic, "predict", "--prometheus", "http://127.0.0.1:9",
                          "--node", NODE, "--window-csv", "x.csv"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "--window-csv needs --prometheus and --gpu" in out.stderr, out


if __name__ == "__main__":
    Suite(__doc__).run([test_prometheus_computes_what_training_computes,
                        test_window_csv_needs_one_gpu])
