"""The model's inputs: each a PromQL expression over dcgm-exporter's series,
written into the model file's metadata so that every fleet's Prometheus
computes them the same way, and the same expressions evaluated here on
simulated scrapes, the way Prometheus 2.x evaluates them, so that training
sees what medic will fetch.

Why these: dcgm-exporter's raw levels carry one fleet's constants. The
held Xid gauge keeps the last code seen until the driver reloads (a level
says history, a change says now); ECC aggregate and remapped-row series
are lifetime counters (their increase says now; increase() also survives a
counter reset); SM clock and power depend on the GPU model and its load,
so they are taken relative to the same GPU's last hour; throttle reasons
are a bitmask, decoded. Temperatures stay in degrees: the hardware's
slowdown points are near 85-90 C whatever the model.

Evaluation follows Prometheus 2.x: an instant selector takes the latest
sample at most 5 minutes old; a range [r] at time t takes the samples with
t - r <= timestamp <= t; increase() extrapolates as extrapolatedRate does;
stddev_over_time is the population deviation."""

import numpy as np

SEL = '{Hostname="{{node}}",gpu="{{gpu}}"}'
LOOKBACK_S = 300.0

# Xid codes that mean the GPU itself is in trouble (NVIDIA's Xid catalogue):
# 48 double-bit ECC, 74 NVLink, 79 fallen off the bus, 94/95 contained and
# uncontained ECC, 119 GSP timeout.
CRITICAL_XIDS = (48, 74, 79, 94, 95, 119)
# DCGM_FI_DEV_CLOCK_THROTTLE_REASONS bits: HW slowdown, HW thermal, HW power brake
THROTTLE_BITS = (8, 64, 128)


def _x(name):
    return f"DCGM_FI_DEV_{name}{SEL}"


FEATURES = [
    ("gpu_temp", _x("GPU_TEMP")),
    ("memory_temp_over_gpu", f'{_x("MEMORY_TEMP")} - {_x("GPU_TEMP")}'),
    ("temp_rise_1h", f'{_x("GPU_TEMP")} - avg_over_time({_x("GPU_TEMP")}[1h])'),
    ("power_of_1h_max",
     f'{_x("POWER_USAGE")} / clamp_min(max_over_time({_x("POWER_USAGE")}[1h]), 1)'),
    ("power_jitter_10m", f'stddev_over_time({_x("POWER_USAGE")}[10m]) / '
                         f'clamp_min(avg_over_time({_x("POWER_USAGE")}[1h]), 1)'),
    ("sm_clock_of_1h_max",
     f'{_x("SM_CLOCK")} / clamp_min(max_over_time({_x("SM_CLOCK")}[1h]), 1)'),
    ("sm_clock_jitter_10m", f'stddev_over_time({_x("SM_CLOCK")}[10m]) / '
                            f'clamp_min(max_over_time({_x("SM_CLOCK")}[1h]), 1)'),
    ("hw_throttle", " + ".join(f'floor({_x("CLOCK_THROTTLE_REASONS")} / {b}) % 2'
                               for b in THROTTLE_BITS)),
    ("ecc_sbe_increase_15m", f'increase({_x("ECC_SBE_AGG_TOTAL")}[15m])'),
    ("ecc_dbe_increase_1h", f'increase({_x("ECC_DBE_AGG_TOTAL")}[1h])'),
    ("remapped_rows_increase_1h", f'increase({_x("CORRECTABLE_REMAPPED_ROWS")}[1h]) + '
                                  f'increase({_x("UNCORRECTABLE_REMAPPED_ROWS")}[1h])'),
    ("pcie_replay_increase_15m", f'increase({_x("PCIE_REPLAY_COUNTER")}[15m])'),
    ("xid_changes_30m", f'changes({_x("XID_ERRORS")}[30m])'),
    ("xid_critical_held", " + ".join(f'({_x("XID_ERRORS")} == bool {c})' for c in CRITICAL_XIDS)),
]
F = {name: i for i, (name, _) in enumerate(FEATURES)}
# every series the features read
SERIES = ["GPU_TEMP", "MEMORY_TEMP", "POWER_USAGE", "SM_CLOCK", "CLOCK_THROTTLE_REASONS",
          "ECC_SBE_AGG_TOTAL", "ECC_DBE_AGG_TOTAL", "CORRECTABLE_REMAPPED_ROWS",
          "UNCORRECTABLE_REMAPPED_ROWS", "PCIE_REPLAY_COUNTER", "XID_ERRORS"]


class Scrapes:
    """One GPU's samples: every series scraped at the same timestamps ts
    (seconds, ascending), values[name] the same length."""

    def __init__(self, ts, values):
        self.ts = np.asarray(ts, np.float64)
        self.values = {k: np.asarray(v, np.float64) for k, v in values.items()}

    def bounds(self, t, r):
        """Index ranges [lo, hi) of the samples in [t - r, t] for each t."""
        lo = np.searchsorted(self.ts, t - r, side="left")
        hi = np.searchsorted(self.ts, t, side="right")
        return lo, hi


def _instant(s, name, t):
    lo, hi = s.bounds(t, LOOKBACK_S)
    v = s.values[name]
    out = np.full(len(t), np.nan)
    ok = hi > lo
    out[ok] = v[hi[ok] - 1]
    return out


def _over_time(s, name, t, r, fn):
    lo, hi = s.bounds(t, r)
    v = s.values[name]
    out = np.full(len(t), np.nan)
    for k in range(len(t)):
        if hi[k] > lo[k]:
            out[k] = fn(v[lo[k]:hi[k]])
    return out


def _increase(s, name, t, r):
    """Prometheus 2.x extrapolatedRate(isCounter=true, isRate=false)."""
    lo, hi = s.bounds(t, r)
    v, ts = s.values[name], s.ts
    out = np.full(len(t), np.nan)
    for k in range(len(t)):
        n = hi[k] - lo[k]
        if n < 2:
            continue
        w, wt = v[lo[k]:hi[k]], ts[lo[k]:hi[k]]
        drops = w[1:] < w[:-1]
        result = w[-1] - w[0] + w[:-1][drops].sum()
        to_start, to_end = wt[0] - (t[k] - r), t[k] - wt[-1]
        sampled = wt[-1] - wt[0]
        avg = sampled / (n - 1)
        if result > 0 and w[0] >= 0:
            to_zero = sampled * (w[0] / result)
            to_start = min(to_start, to_zero)
        threshold = avg * 1.1
        interval = sampled
        interval += to_start if to_start < threshold else avg / 2
        interval += to_end if to_end < threshold else avg / 2
        out[k] = result * (interval / sampled)
    return out


def _changes(s, name, t, r):
    return _over_time(s, name, t, r, lambda w: float(np.count_nonzero(w[1:] != w[:-1])))


def evaluate(s, t):
    """[len(t), len(FEATURES)] feature values at the times t (seconds) from
    one GPU's scrapes; NaN where Prometheus would have no value."""
    t = np.asarray(t, np.float64)
    temp = _instant(s, "GPU_TEMP", t)
    power = _instant(s, "POWER_USAGE", t)
    clock = _instant(s, "SM_CLOCK", t)
    throttle = _instant(s, "CLOCK_THROTTLE_REASONS", t)
    xid = _instant(s, "XID_ERRORS", t)
    clock_max = np.maximum(_over_time(s, "SM_CLOCK", t, 3600, np.max), 1)
    cols = {
        "gpu_temp": temp,
        "memory_temp_over_gpu": _instant(s, "MEMORY_TEMP", t) - temp,
        "temp_rise_1h": temp - _over_time(s, "GPU_TEMP", t, 3600, np.mean),
        "power_of_1h_max": power / np.maximum(_over_time(s, "POWER_USAGE", t, 3600, np.max), 1),
        "power_jitter_10m": _over_time(s, "POWER_USAGE", t, 600, np.std)
        / np.maximum(_over_time(s, "POWER_USAGE", t, 3600, np.mean), 1),
        "sm_clock_of_1h_max": clock / clock_max,
        "sm_clock_jitter_10m": _over_time(s, "SM_CLOCK", t, 600, np.std) / clock_max,
        "hw_throttle": sum(np.fmod(np.floor(throttle / b), 2) for b in THROTTLE_BITS),
        "ecc_sbe_increase_15m": _increase(s, "ECC_SBE_AGG_TOTAL", t, 900),
        "ecc_dbe_increase_1h": _increase(s, "ECC_DBE_AGG_TOTAL", t, 3600),
        "remapped_rows_increase_1h": _increase(s, "CORRECTABLE_REMAPPED_ROWS", t, 3600)
        + _increase(s, "UNCORRECTABLE_REMAPPED_ROWS", t, 3600),
        "pcie_replay_increase_15m": _increase(s, "PCIE_REPLAY_COUNTER", t, 900),
        "xid_changes_30m": _changes(s, "XID_ERRORS", t, 1800),
        "xid_critical_held": np.where(np.isnan(xid), np.nan,
                                      sum((xid == c).astype(np.float64) for c in CRITICAL_XIDS)),
    }
    return np.stack([cols[name] for name, _ in FEATURES], axis=1)
