# SPDX-License-Identifier: Apache-2.0
"""The model's inputs: each a PromQL expression over dcgm-exporter's series,
written into the model file's metadata so that every fleet's Prometheus
computes them the same way, and the same expressions evaluated here on
simulated scrapes, the way Prometheus 2.x evaluates them, so that training
sees what medic will fetch.

Why these: dcgm-exporter's raw levels carry one fleet's constants. The
held Xid gauge keeps the last code seen until the next one (a level says
history, a change says now, and a change to a hardware code most); ECC
aggregate and remapped-row series are lifetime counters (their increase
says now; increase() also survives a counter reset; bursty ones as
ln(1 + increase)); SM clock and power depend on the GPU model and its
load, so they are taken relative to the same GPU's last hour; throttle
reasons are a bitmask, decoded. The GPU temperature stays in degrees (the
hardware's slowdown points are near 85-90 C whatever the model); its rise
is taken over the GPU's own hour and against the mean rise of its node's
GPUs, so that neither a GPU that always runs hot nor a machine room that
warms every GPU reads as a fault. Features over the node are evaluated
from all of its GPUs' scrapes (evaluate_node).

Evaluation follows Prometheus 2.x: an instant selector takes the latest
sample at most 5 minutes old; a range [r] at time t takes the samples with
t - r <= timestamp <= t; increase() extrapolates as extrapolatedRate does;
stddev_over_time is the population deviation."""

import numpy as np

SEL = '{Hostname="{{node}}",gpu="{{gpu}}"}'
NODE_SEL = '{Hostname="{{node}}"}'  # every GPU of the node
LOOKBACK_S = 300.0

# In NVIDIA's Xid catalogue the codes from 48 on are hardware events (48
# double-bit ECC, 63/64 row remapping, 74 NVLink, 79 fallen off the bus, 92
# a high single-bit rate, 94/95 contained and uncontained ECC, 119 GSP
# timeout); those below are mostly application and driver faults (13, 31,
# 43, 45). One comparison, not one per code: each vector operation costs
# Prometheus as much as a selector over the whole fleet.
HARDWARE_XID_MIN = 48
# DCGM_FI_DEV_CLOCK_THROTTLE_REASONS bits: HW slowdown, HW thermal, HW power brake
THROTTLE_BITS = (8, 64, 128)


def _x(name):
    return f"DCGM_FI_DEV_{name}{SEL}"


# Families dcgm-exporter leaves out unless its counters file lists them
# (etc/default-counters.csv has the ECC totals commented out and no throttle
# reasons): a fleet without them is still scored. Each such feature falls
# back to 0 through PromQL's `or` against the GPU's temperature series (0
# only where that GPU is scraped at all), and an indicator feature tells
# the model whether the family is there, so an absent family is never
# mistaken for a quiet one.
ON_GPU = f'0 * {_x("GPU_TEMP")}'


def _optional(expr):
    return f"{expr} or {ON_GPU}"


def _exported(series):
    return f'0 * {_x(series)} + 1 or {ON_GPU}'


def _node(name):
    return f"DCGM_FI_DEV_{name}{NODE_SEL}"


def _rise(name, sel):
    """The series' rise over its mean of the last hour."""
    return f"{sel(name)} - avg_over_time({sel(name)}[1h])"


def _over_node(expr, node_expr):
    """expr less the average of node_expr over the GPUs of its node."""
    return f"{expr} - on(Hostname) group_left avg by (Hostname) ({node_expr})"


FEATURES = [
    ("gpu_temp", _x("GPU_TEMP")),
    ("temp_rise_1h", _rise("GPU_TEMP", _x)),
    ("temp_rise_over_node_1h", _over_node(_rise("GPU_TEMP", _x), _rise("GPU_TEMP", _node))),
    ("memory_rise_over_gpu_1h", f'{_rise("MEMORY_TEMP", _x)} - ({_rise("GPU_TEMP", _x)})'),
    ("power_of_1h_max",
     f'{_x("POWER_USAGE")} / clamp_min(max_over_time({_x("POWER_USAGE")}[1h]), 1)'),
    ("power_jitter_10m", f'stddev_over_time({_x("POWER_USAGE")}[10m]) / '
                         f'clamp_min(avg_over_time({_x("POWER_USAGE")}[1h]), 1)'),
    ("sm_clock_of_1h_max",
     f'{_x("SM_CLOCK")} / clamp_min(max_over_time({_x("SM_CLOCK")}[1h]), 1)'),
    ("sm_clock_jitter_10m", f'stddev_over_time({_x("SM_CLOCK")}[10m]) / '
                            f'clamp_min(max_over_time({_x("SM_CLOCK")}[1h]), 1)'),
    ("hw_throttle", _optional(" + ".join(f'floor({_x("CLOCK_THROTTLE_REASONS")} / {b}) % 2'
                                         for b in THROTTLE_BITS))),
    ("throttle_exported", _exported("CLOCK_THROTTLE_REASONS")),
    ("ecc_sbe_log_increase_15m",
     _optional(f'ln(1 + increase({_x("ECC_SBE_AGG_TOTAL")}[15m]))')),
    ("ecc_dbe_increase_1h", _optional(f'increase({_x("ECC_DBE_AGG_TOTAL")}[1h])')),
    ("ecc_exported", _exported("ECC_SBE_AGG_TOTAL")),
    ("remapped_rows_increase_1h", f'increase({_x("CORRECTABLE_REMAPPED_ROWS")}[1h]) + '
                                  f'increase({_x("UNCORRECTABLE_REMAPPED_ROWS")}[1h])'),
    ("pcie_replay_log_increase_15m", f'ln(1 + increase({_x("PCIE_REPLAY_COUNTER")}[15m]))'),
    ("xid_changes_30m", f'changes({_x("XID_ERRORS")}[30m])'),
    ("xid_hardware_new_30m",
     f'changes({_x("XID_ERRORS")}[30m]) * ({_x("XID_ERRORS")} >= bool {HARDWARE_XID_MIN})'),
    ("xid_hardware_held", f'{_x("XID_ERRORS")} >= bool {HARDWARE_XID_MIN}'),
]
F = {name: i for i, (name, _) in enumerate(FEATURES)}

# The inputs that count evidence of a failing GPU: more of any of them must
# never lower the risk (the monotone probe in report.py and `medic model
# check --dataset`, model/deploy_check.c, test it).
EVIDENCE = ["ecc_sbe_log_increase_15m", "ecc_dbe_increase_1h", "remapped_rows_increase_1h",
            "pcie_replay_log_increase_15m", "xid_changes_30m", "xid_hardware_new_30m",
            "xid_hardware_held", "hw_throttle"]
# every series the features read, and those a fleet may lack
SERIES = ["GPU_TEMP", "MEMORY_TEMP", "POWER_USAGE", "SM_CLOCK", "CLOCK_THROTTLE_REASONS",
          "ECC_SBE_AGG_TOTAL", "ECC_DBE_AGG_TOTAL", "CORRECTABLE_REMAPPED_ROWS",
          "UNCORRECTABLE_REMAPPED_ROWS", "PCIE_REPLAY_COUNTER", "XID_ERRORS"]
OPTIONAL = {"throttle": ["CLOCK_THROTTLE_REASONS"],
            "ecc": ["ECC_SBE_AGG_TOTAL", "ECC_DBE_AGG_TOTAL"]}


class Scrapes:
    """One GPU's samples: every series scraped at the same timestamps ts
    (seconds, ascending), values[name] the same length; a series the fleet
    does not export is left out of values."""

    def __init__(self, ts, values):
        self.ts = np.asarray(ts, np.float64)
        self.values = {k: np.asarray(v, np.float64) for k, v in values.items()}

    def bounds(self, t, r):
        """Index ranges [lo, hi) of the samples in [t - r, t] for each t."""
        lo = np.searchsorted(self.ts, t - r, side="left")
        hi = np.searchsorted(self.ts, t, side="right")
        return lo, hi


def _nan(t):
    return np.full(len(t), np.nan)


def _instant(s, name, t):
    if name not in s.values:
        return _nan(t)
    lo, hi = s.bounds(t, LOOKBACK_S)
    out = _nan(t)
    ok = hi > lo
    out[ok] = s.values[name][hi[ok] - 1]
    return out


def _prefix(x):
    return np.concatenate([[0.0], np.cumsum(x)])


def _avg(s, name, t, r):
    if name not in s.values:
        return _nan(t)
    lo, hi = s.bounds(t, r)
    v = s.values[name]
    g = v.mean() if len(v) else 0.0
    p = _prefix(v - g)
    n = hi - lo
    out = _nan(t)
    ok = n > 0
    out[ok] = g + (p[hi[ok]] - p[lo[ok]]) / n[ok]
    return out


def _stddev(s, name, t, r):
    """Population standard deviation (prefix sums of the values less their
    overall mean, so constant stretches come out at ~1e-7 of the level)."""
    if name not in s.values:
        return _nan(t)
    lo, hi = s.bounds(t, r)
    v = s.values[name]
    d = v - (v.mean() if len(v) else 0.0)
    p1, p2 = _prefix(d), _prefix(d * d)
    n = hi - lo
    out = _nan(t)
    ok = n > 0
    m1 = (p1[hi[ok]] - p1[lo[ok]]) / n[ok]
    m2 = (p2[hi[ok]] - p2[lo[ok]]) / n[ok]
    out[ok] = np.sqrt(np.maximum(m2 - m1 * m1, 0.0))
    return out


def _max(s, name, t, r):
    """max_over_time through a sparse table: level j holds the maximum of
    2**j samples from each index."""
    if name not in s.values:
        return _nan(t)
    lo, hi = s.bounds(t, r)
    levels = [s.values[name]]
    while 2 ** len(levels) <= len(levels[0]):
        prev, w = levels[-1], 2 ** (len(levels) - 1)
        levels.append(np.maximum(prev[:-w], prev[w:]))
    n = hi - lo
    out = _nan(t)
    ok = n > 0
    k = np.zeros(len(t), np.int64)
    k[ok] = np.floor(np.log2(n[ok])).astype(np.int64)
    for j in np.unique(k[ok]):
        sel = ok & (k == j)
        lv = levels[j]
        out[sel] = np.maximum(lv[lo[sel]], lv[hi[sel] - 2 ** j])
    return out


def _increase(s, name, t, r):
    """Prometheus 2.x extrapolatedRate(isCounter=true, isRate=false)."""
    if name not in s.values:
        return _nan(t)
    lo, hi = s.bounds(t, r)
    v, ts = s.values[name], s.ts
    out = _nan(t)
    ok = hi - lo >= 2
    lo, hi, tk = lo[ok], hi[ok], t[ok]
    n = hi - lo
    drops = _prefix(np.r_[0.0, np.where(v[1:] < v[:-1], v[:-1], 0.0)])
    first, last = v[lo], v[hi - 1]
    result = last - first + drops[hi] - drops[lo + 1]
    to_start, to_end = ts[lo] - (tk - r), tk - ts[hi - 1]
    sampled = ts[hi - 1] - ts[lo]
    avg = sampled / (n - 1)
    zero = (result > 0) & (first >= 0)
    to_zero = np.where(zero, sampled * first / np.where(zero, result, 1.0), np.inf)
    to_start = np.minimum(to_start, to_zero)
    threshold = avg * 1.1
    interval = sampled + np.where(to_start < threshold, to_start, avg / 2) \
        + np.where(to_end < threshold, to_end, avg / 2)
    out[ok] = result * (interval / sampled)
    return out


def _changes(s, name, t, r):
    if name not in s.values:
        return _nan(t)
    lo, hi = s.bounds(t, r)
    v = s.values[name]
    p = _prefix(np.r_[0.0, (v[1:] != v[:-1]).astype(np.float64)])
    out = _nan(t)
    ok = hi > lo
    out[ok] = p[hi[ok]] - p[lo[ok] + 1]
    return out


def _or_on_gpu(x, on_gpu):
    """`x or 0 * GPU_TEMP`: x where it has a value, else 0 where the GPU's
    temperature has one."""
    return np.where(np.isnan(x), on_gpu, x)


def _node_mean(rows):
    """avg by (Hostname): the mean over the node's GPUs that have a value."""
    rows = np.stack(rows)
    have = ~np.isnan(rows)
    n = have.sum(axis=0)
    total = np.where(have, rows, 0.0).sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def evaluate_node(gpus, t):
    """[len(gpus), len(t), len(FEATURES)] feature values at the times t
    (seconds) from the scrapes of every GPU of one node (a list of Scrapes);
    NaN where Prometheus would have no value."""
    t = np.asarray(t, np.float64)
    temps = [_instant(s, "GPU_TEMP", t) for s in gpus]
    rises = [temp - _avg(s, "GPU_TEMP", t, 3600) for s, temp in zip(gpus, temps)]
    node_rise = _node_mean(rises)
    return np.stack([_gpu(s, t, temp, rise, rise - node_rise)
                     for s, temp, rise in zip(gpus, temps, rises)])


def _gpu(s, t, temp, rise, rise_over_node):
    on_gpu = 0.0 * temp
    power = _instant(s, "POWER_USAGE", t)
    clock = _instant(s, "SM_CLOCK", t)
    throttle = _instant(s, "CLOCK_THROTTLE_REASONS", t)
    xid = _instant(s, "XID_ERRORS", t)
    clock_max = np.maximum(_max(s, "SM_CLOCK", t, 3600), 1)
    xid_changes = _changes(s, "XID_ERRORS", t, 1800)
    hardware_held = np.where(np.isnan(xid), np.nan, (xid >= HARDWARE_XID_MIN).astype(np.float64))
    cols = {
        "gpu_temp": temp,
        "temp_rise_1h": rise,
        "temp_rise_over_node_1h": rise_over_node,
        "memory_rise_over_gpu_1h": _instant(s, "MEMORY_TEMP", t)
        - _avg(s, "MEMORY_TEMP", t, 3600) - rise,
        "power_of_1h_max": power / np.maximum(_max(s, "POWER_USAGE", t, 3600), 1),
        "power_jitter_10m": _stddev(s, "POWER_USAGE", t, 600)
        / np.maximum(_avg(s, "POWER_USAGE", t, 3600), 1),
        "sm_clock_of_1h_max": clock / clock_max,
        "sm_clock_jitter_10m": _stddev(s, "SM_CLOCK", t, 600) / clock_max,
        "hw_throttle": _or_on_gpu(sum(np.fmod(np.floor(throttle / b), 2)
                                      for b in THROTTLE_BITS), on_gpu),
        "throttle_exported": _or_on_gpu(0.0 * throttle + 1, on_gpu),
        "ecc_sbe_log_increase_15m":
        _or_on_gpu(np.log(1 + _increase(s, "ECC_SBE_AGG_TOTAL", t, 900)), on_gpu),
        "ecc_dbe_increase_1h": _or_on_gpu(_increase(s, "ECC_DBE_AGG_TOTAL", t, 3600), on_gpu),
        "ecc_exported": _or_on_gpu(0.0 * _instant(s, "ECC_SBE_AGG_TOTAL", t) + 1, on_gpu),
        "remapped_rows_increase_1h": _increase(s, "CORRECTABLE_REMAPPED_ROWS", t, 3600)
        + _increase(s, "UNCORRECTABLE_REMAPPED_ROWS", t, 3600),
        "pcie_replay_log_increase_15m":
        np.log(1 + _increase(s, "PCIE_REPLAY_COUNTER", t, 900)),
        "xid_changes_30m": xid_changes,
        "xid_hardware_new_30m": xid_changes * hardware_held,
        "xid_hardware_held": hardware_held,
    }
    return np.stack([cols[name] for name, _ in FEATURES], axis=1)
