# SPDX-License-Identifier: Apache-2.0
"""Metrics on weighted windows (see windows.py): each window stands for
`weight` windows of a fleet scored every minute at the real fault rate, so
precision and false-positive rates are those an operator would see."""

import numpy as np

import features

F = features.F


def threshold_rules(x):
    """The static rules of the source documents, on each window's latest
    values: temperature above 85 C, a double-bit ECC error in the last
    hour, an Xid (a new one in the last 30 minutes, or a hardware one
    held)."""
    last = x[:, -1, :]
    return {
        "temperature > 85 C": last[:, F["gpu_temp"]] > 85,
        "double-bit ECC > 0": last[:, F["ecc_dbe_increase_1h"]] > 0,
        "Xid present": (last[:, F["xid_changes_30m"]] > 0) | (last[:, F["xid_hardware_held"]] > 0),
    }


def threshold_score(x):
    """The static rules as a score: how many of them fire."""
    return np.sum(list(threshold_rules(x).values()), axis=0).astype(np.float64)


def rule_score(x):
    """A transparent score an operator could write over the same features,
    each term in [0, 1], added: a hardware Xid that just arrived, correctable
    ECC errors and row remaps climbing, PCIe replays, a double-bit error,
    heat (above 80 C, or rising fast), HW throttling over the window, and
    power or clock jitter. Written by hand from what the failure modes are
    known to show, not fitted. A value missing (a lost GPU's window) adds
    nothing, as a rule over an absent series does not fire."""
    score = _rule_score(x)
    gone = ~np.isfinite(score)
    if gone.any():
        score[gone] = _rule_score(np.nan_to_num(x[gone], nan=0.0))
    return score


def _rule_score(x):
    last = x[:, -1, :]

    def c(v, scale):
        return np.clip(v / scale, 0.0, 1.0)

    new_hardware = (last[:, F["xid_changes_30m"]] > 0) & (last[:, F["xid_hardware_held"]] > 0)
    return (new_hardware.astype(np.float64)
            + c(np.expm1(last[:, F["ecc_sbe_log_increase_15m"]]), 10.0)
            + c(last[:, F["ecc_dbe_increase_1h"]], 1.0)
            + c(last[:, F["remapped_rows_increase_1h"]], 1.0)
            + c(np.expm1(last[:, F["pcie_replay_log_increase_15m"]]), 20.0)
            + c(last[:, F["gpu_temp"]] - 80.0, 10.0)
            + c(last[:, F["temp_rise_1h"]], 15.0)
            + np.mean(x[:, :, F["hw_throttle"]] > 0, axis=1)
            + c(last[:, F["power_jitter_10m"]], 0.15)
            + c(last[:, F["sm_clock_jitter_10m"]], 0.05))


def at_threshold(y, w, alarm):
    pos, neg = y == 1, y == 0
    tp, fp = w[pos & alarm].sum(), w[neg & alarm].sum()
    fn, tn = w[pos & ~alarm].sum(), w[neg & ~alarm].sum()
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "fpr": fp / (fp + tn) if fp + tn > 0 else 0.0,
            "accuracy": (tp + tn) / (tp + tn + fp + fn),
            "balanced_accuracy": 0.5 * (recall + (tn / (tn + fp) if tn + fp > 0 else 0.0))}


def pr_curve(y, w, score):
    """Precision and recall at every distinct score, highest first, and the
    average precision (area under the step curve, as scikit-learn's)."""
    order = np.argsort(-score, kind="stable")
    s, yy, ww = score[order], y[order], w[order]
    tp = np.cumsum(ww * (yy == 1))
    fp = np.cumsum(ww * (yy == 0))
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]  # end of each tie group
    tp, fp = tp[last], fp[last]
    recall = tp / tp[-1]
    precision = tp / np.maximum(tp + fp, 1e-12)
    ap = float(np.sum(np.diff(np.r_[0.0, recall]) * precision))
    fpr = fp / fp[-1]
    return precision, recall, fpr, s[last], ap


def recall_at_fpr(recall, fpr, limit=0.01):
    ok = fpr <= limit
    return float(recall[ok].max()) if ok.any() else 0.0


def lead_times(m, alarm):
    """Per fault (a fleet, node and fault minute), the minutes between the
    first alarming window before it and the fault; faults with no alarm in
    the horizon are missed. Returns (lead minutes of detected faults,
    number of faults)."""
    pos, first, ids = fault_ids(m)
    best = np.full(len(first), -1, np.int64)
    hit = alarm[pos]
    np.maximum.at(best, ids[hit], m["lead"][pos][hit])
    return best[best >= 0], len(first)


def fault_ids(m):
    """The faults behind the positive windows (a fault is a fleet, node and
    fault minute): the positives' mask, the index among positives of each
    fault's first window, and each positive's fault number."""
    pos = m["label"] == 1
    key = m["fleet"][pos].astype(np.int64) * 10**12 + m["node"][pos].astype(np.int64) * 10**6 \
        + (m["end"][pos] + m["lead"][pos])
    _, first, ids = np.unique(key, return_index=True, return_inverse=True)
    return pos, first, ids


def best_f1_threshold(y, w, score):
    precision, recall, _, thresholds, _ = pr_curve(y, w, score)
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
    return float(thresholds[int(np.argmax(f1))])
