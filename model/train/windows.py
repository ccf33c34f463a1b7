# SPDX-License-Identifier: Apache-2.0
"""Labelled windows: from simulated fleets, and from the files
`medic model dataset` exports.

A window is WINDOW steps of every feature for one GPU, ending at minute e,
each step the features evaluated from the GPU's raw scrapes at that minute
as Prometheus would (features.evaluate). It is positive when a hardware
fault takes that GPU out within HORIZON minutes after e (a GPU fault for
its GPU, a node fault for all of them). A window medic would score as
unknown (a gap longer than it fills, no data at its start) is left out,
but for a lost GPU's: one whose first feature is silent for more than
MAX_GAP steps in the window while another GPU of its node has a usable
window, which medic scores 1 (PROMETHEUS_LOST_RISK). Those are kept where
asked for (keep_lost, for an evaluation), marked `lost`, gaps and all.
Positives are taken every pos_stride minutes before each fault, negatives
every neg_stride minutes (random phase) on healthy GPUs. Each window has a
weight: how many windows of a fleet scored every minute, at the real fault
rate, it stands for (pos_stride for positives, neg_stride x accel for
negatives), so that precision is measured at the real base rate."""

import datetime
import json
import struct

import numpy as np

import features
import simulate
import simulate_hazard
import simulate_wear
import sre_rule

# the fleet simulators, by the name a setting gives in "simulator"
SIMULATORS = {"simulate": simulate, "simulate_wear": simulate_wear,
              "simulate_hazard": simulate_hazard}

WINDOW = 30
STEP_S = 60
GPUS = 8
HORIZON = 60
MAX_GAP = 5  # steps medic fills with the previous value (PROMETHEUS_MAX_GAP)
# what is known of each window: where it comes from, its label, and for a
# positive the minutes to the fault, the fault's class and build-up; and the
# score of the SRE's rule (sre_rule.py) at its end, from the raw scrapes, where
# asked for (NaN otherwise, and for a `medic model dataset` file, which holds
# the features only)
META_DTYPE = [("fleet", "i4"), ("node", "i4"), ("gpu", "i4"), ("end", "i8"), ("label", "i1"),
              ("lead", "i4"), ("cls", "U12"), ("build_up", "i4"), ("weight", "f8"),
              ("sre", "f8"), ("lost", "i1")]


def fill_gaps(x):
    """x [T, D] with runs of at most MAX_GAP missing steps filled with the
    value before them, as medic fills a fetched window; longer runs stay
    NaN."""
    x = x.copy()
    for d in range(x.shape[1]):
        col = x[:, d]
        missing = np.isnan(col)
        if not missing.any():
            continue
        idx = np.where(~missing, np.arange(len(col)), -1)
        last = np.maximum.accumulate(idx)
        run = np.arange(len(col)) - last
        ok = missing & (last >= 0) & (run <= MAX_GAP)
        col[ok] = col[last[ok]]
    return x


def node_features(gpus, minutes):
    """[GPUs, minutes, len(features.FEATURES)] float32 on the 60 s grid, gaps
    filled as medic fills them; and [GPUs, minutes] bool: silent_windows of
    each GPU."""
    t = np.arange(minutes) * float(STEP_S)
    raw = features.evaluate_node(gpus, t)
    silent = np.stack([silent_windows(x[:, 0]) for x in raw])
    return np.stack([fill_gaps(x) for x in raw]).astype(np.float32), silent


def silent_windows(first):
    """For a GPU's first feature (raw: gaps not filled) over [minutes]:
    whether the window ending at each minute holds a silence of it (more
    than MAX_GAP steps in a row without it, counted from the window's
    start, as prometheus__silence counts) and a value of it (else
    Prometheus returns no series of the GPU at all). A GPU is lost in such
    a window when another GPU of its node has a usable window."""
    minutes = len(first)
    run = np.zeros(minutes, int)  # missing steps in a row, ending at each minute
    for k in np.flatnonzero(np.isnan(first)):
        run[k] = (run[k - 1] if k else 0) + 1
    # a run longer than MAX_GAP inside the window ending at e ends at a
    # minute k of it with k >= e - WINDOW + 1 + MAX_GAP
    ends = (run > MAX_GAP).astype(int)
    seen = (~np.isnan(first)).astype(int)
    return ((np.convolve(ends, np.ones(WINDOW - MAX_GAP, int))[:minutes] > 0)
            & (np.convolve(seen, np.ones(WINDOW, int))[:minutes] > 0))


def fleet_windows(setting, nodes, days, accel, pos_stride, neg_stride, progress=None,
                  sre=False, keep_lost=False):
    xs, meta = [], []
    seed = setting["seed"]
    rng = np.random.default_rng(seed + 7919)
    T = int(days * 1440)
    kernel = np.ones(WINDOW, int)
    sim = SIMULATORS[setting.get("simulator", "simulate")]
    for n, gpus, faults, down in sim.simulate_fleet(setting, nodes, days, accel):
        x, silent = node_features(gpus, T)
        rule = sre_rule.node_scores(gpus, T) if sre else np.full((GPUS, T), np.nan)
        usable = np.zeros((GPUS, T), bool)  # every step of the window has values
        for g in range(GPUS):
            whole = (~np.isnan(x[g]).any(axis=1)).astype(int)
            usable[g, WINDOW - 1:] = np.convolve(whole, kernel, "valid") == WINDOW
        lost = silent & ~usable & usable.any(axis=0) if keep_lost else np.zeros_like(usable)
        lost[:, :WINDOW - 1] = False
        kept = usable | lost
        soon = np.zeros((GPUS, T), bool)  # a fault within HORIZON
        for start, cls, gpu, lead in faults:
            rows = slice(None) if gpu < 0 else slice(gpu, gpu + 1)
            soon[rows, max(start - HORIZON, 0):start] = True
            for e in range(start - 1, start - HORIZON - 1, -pos_stride):
                if e < WINDOW - 1:
                    continue
                for g in (range(GPUS) if gpu < 0 else [gpu]):
                    if kept[g, e]:
                        xs.append(x[g, e - WINDOW + 1:e + 1])
                        meta.append((seed, n, g, e, 1, start - e, cls, lead, pos_stride, rule[g, e],
                                     lost[g, e]))
        for g in range(GPUS):
            for e in range(WINDOW - 1 + int(rng.integers(neg_stride)), T, neg_stride):
                if kept[g, e] and not soon[g, e] and not down[e]:
                    xs.append(x[g, e - WINDOW + 1:e + 1])
                    meta.append((seed, n, g, e, 0, 0, "", 0, neg_stride * accel, rule[g, e],
                                 lost[g, e]))
        if progress:
            progress(n + 1, nodes)
    return np.stack(xs).astype(np.float32), np.array(meta, dtype=META_DTYPE)


def read_safetensors(path):
    """(tensors as numpy arrays, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    kinds = {"F32": np.float32, "I64": np.int64, "U8": np.uint8}
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], kinds[t["dtype"]]).reshape(t["shape"])
    return out, meta


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        raw = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header = {"__metadata__": metadata, **header}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def dataset_windows(path):
    """Windows from a `medic model dataset` file: tensors `windows`
    [N, T, D] (raw values) and `labels` [N]; metadata `features`, `window`,
    `step` as in a model file, and `samples` (JSON: node, gpu, end per
    window). Every window weighs 1."""
    tensors, meta = read_safetensors(path)
    x, y = tensors["windows"], tensors["labels"].astype(np.int8)
    samples = json.loads(meta.get("samples", "[]"))
    nodes = {s["node"]: i for i, s in enumerate({s["node"]: s for s in samples}.values())}
    m = np.zeros(len(y), dtype=META_DTYPE)
    m["label"] = y
    m["weight"] = 1.0
    m["sre"] = np.nan
    if len(samples) == len(y):
        m["node"] = [nodes[s["node"]] for s in samples]
        m["end"] = [int(datetime.datetime.fromisoformat(s["end"].replace("Z", "+00:00"))
                        .timestamp()) // 60 for s in samples]
    return x, m, meta
