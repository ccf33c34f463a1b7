"""Metrics on weighted windows (see windows.py): each window stands for
`weight` windows of a fleet scored every minute at the real fault rate, so
precision and false-positive rates are those an operator would see."""

import numpy as np

import simulate

F = simulate.F


def threshold_rules(x):
    """The static rules of the source documents, on each window's latest
    sample: temperature above 85 C, any double-bit ECC error, any Xid."""
    last = x[:, -1, :]
    return {
        "temperature > 85 C": last[:, F["gpu_temp"]] > 85,
        "double-bit ECC > 0": last[:, F["ecc_dbe_rate"]] > 0,
        "Xid present": last[:, F["xid"]] > 0,
    }


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
