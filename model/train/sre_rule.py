# SPDX-License-Identifier: Apache-2.0
"""The bar a model is judged against: the rule an SRE would write from
dcgm-exporter's raw series, as Prometheus alerting rules, without the
model's inputs. It looks back as far as an SRE's rules do (a day for the
lifetime counters, six hours for a hardware Xid), not the model's half
hour, and reads absolute counts and temperatures, not the model's ratios.

Each term is an alert an operator would page on, with the PromQL that
would fire it; its strength (0 to 1) grows with the count past what the
alert fires on, so that more of it ranks higher, and the score adds the
terms by severity: 4 for what NVIDIA's guidance treats as a retirement
or replacement (a double-bit error, an uncorrectable row remap, a
hardware Xid), 2 for a warning (a burst of correctable errors, a
correctable row remap, PCIe replays, any new Xid), 1 for the slow signs
(heat, hardware throttling, correctable errors over a day).

Where an alert fires is set as an SRE sets it, from the fleet's own
healthy baseline: at about the 99.9th percentile of the healthy GPU-minutes
of simulator A's training fleet (seed 11), the simulator the shipped model
trains on, so that the rule and the model are both tested on a simulator
neither was fitted to. (Its first thresholds, from published guidance such
as 100 correctable errors an hour, fired on almost nothing in either
simulator.) Evaluated from the scrapes as features.py evaluates PromQL
(the same functions, checked against a real Prometheus); the throttle
share is a recording rule sampled every minute and averaged over 30
minutes."""

import numpy as np

import features

DAY, SIX_HOURS, HOUR = 86400.0, 21600.0, 3600.0
CRITICAL, WARNING, INFO = 4.0, 2.0, 1.0
_x = features._x  # one GPU's series, as the model's features select it


def _grade(v, fires_at, full_at):
    """0 below fires_at, then up to 1 at full_at, on a log scale."""
    v = np.nan_to_num(v, nan=0.0)
    span = np.log1p(full_at) - np.log1p(fires_at)
    return np.where(v >= fires_at, np.clip(0.5 + 0.5 * (np.log1p(v) - np.log1p(fires_at)) / span,
                                           0.5, 1.0), 0.0)


HOT_GPU, HOT_MEMORY = 89.0, 99.0


def _hot(s, t):
    """0.5 at the threshold, 1 five degrees past it, whichever is hotter."""
    gpu = np.nan_to_num(features._max(s, "GPU_TEMP", t, 900), nan=0.0)
    mem = np.nan_to_num(features._max(s, "MEMORY_TEMP", t, 900), nan=0.0)
    return np.maximum(np.where(gpu > HOT_GPU, np.clip(0.5 + (gpu - HOT_GPU) / 10, 0, 1), 0),
                      np.where(mem > HOT_MEMORY, np.clip(0.5 + (mem - HOT_MEMORY) / 10, 0, 1), 0))


def _throttling(s, t):
    """avg_over_time(gpu:hw_throttle[30m]) of a recording rule evaluated every
    minute (t: the 60 s grid from 0): HW slowdown, HW thermal or HW power
    brake set; 0.5 to 1 as that share grows, 0 where it is none."""
    bits = features._instant(s, "CLOCK_THROTTLE_REASONS", t)
    on = np.zeros(len(t))
    for b in features.THROTTLE_BITS:
        on = np.maximum(on, np.nan_to_num(np.fmod(np.floor(bits / b), 2), nan=0.0))
    p = np.concatenate([[0.0], np.cumsum(on)])
    i = np.arange(len(t))
    lo = np.maximum(i - 30, 0)
    share = (p[i + 1] - p[lo]) / (i + 1 - lo)
    return np.where(share > 0, 0.5 + 0.5 * share, 0.0)


def _hardware_xid(s, t):
    """A hardware Xid (48 and up) held at some point in the last six hours,
    and the Xid changed in that time (dcgm-exporter holds the last code)."""
    held = np.nan_to_num(features._max(s, "XID_ERRORS", t, SIX_HOURS), nan=0.0)
    changed = np.nan_to_num(features._changes(s, "XID_ERRORS", t, SIX_HOURS), nan=0.0)
    return ((held >= features.HARDWARE_XID_MIN) & (changed > 0)).astype(np.float64)


def _counter(name, severity, series, window, fires_at, full_at):
    """An alert on a counter's increase over window ("1h", "24h"): at
    fires_at or more (any increase where fires_at is 0), stronger up to
    full_at."""
    r = {"1h": HOUR, "24h": DAY}[window]
    promql = f'increase({_x(series)}[{window}]) ' + (f">= {fires_at:g}" if fires_at else "> 0")
    return (name, severity, promql, lambda s, t: _grade(features._increase(s, series, t, r),
                                                        fires_at or 0.5, full_at))


# (name, severity, the alert's PromQL, strength from a GPU's scrapes)
RULES = [
    _counter("double-bit ECC error in a day", CRITICAL, "ECC_DBE_AGG_TOTAL", "24h", 0, 4),
    _counter("uncorrectable row remap in a day", CRITICAL, "UNCORRECTABLE_REMAPPED_ROWS", "24h",
             0, 4),
    ("hardware Xid in six hours", CRITICAL,
     f'max_over_time({_x("XID_ERRORS")}[6h]) >= {features.HARDWARE_XID_MIN} '
     f'and changes({_x("XID_ERRORS")}[6h]) > 0', _hardware_xid),
    _counter("correctable ECC burst in an hour", WARNING, "ECC_SBE_AGG_TOTAL", "1h", 8, 1000),
    _counter("correctable row remap in a day", WARNING, "CORRECTABLE_REMAPPED_ROWS", "24h", 0, 8),
    _counter("PCIe replays in an hour", WARNING, "PCIE_REPLAY_COUNTER", "1h", 15, 1000),
    ("any new Xid in an hour", WARNING, f'changes({_x("XID_ERRORS")}[1h]) > 0',
     lambda s, t: _grade(features._changes(s, "XID_ERRORS", t, HOUR), 0.5, 4)),
    ("hot: GPU over 89 C or memory over 99 C in 15 minutes", INFO,
     f'max_over_time({_x("GPU_TEMP")}[15m]) > {HOT_GPU:g} '
     f'or max_over_time({_x("MEMORY_TEMP")}[15m]) > {HOT_MEMORY:g}',
     _hot),
    ("hardware throttling in 30 minutes", INFO, "avg_over_time(gpu:hw_throttle[30m]) > 0",
     _throttling),
    _counter("correctable ECC errors over a day", INFO, "ECC_SBE_AGG_TOTAL", "24h", 200, 20000),
]


def node_scores(gpus, minutes):
    """[len(gpus), minutes] the rule's score of each GPU at every minute from
    0, from the raw scrapes of every GPU of one node (features.Scrapes)."""
    t = np.arange(minutes) * 60.0
    return np.stack([sum(sev * fn(s, t) for _, sev, _, fn in RULES) for s in gpus])
