# SPDX-License-Identifier: Apache-2.0
"""The FaultPredictor, its training and its export to the model file medic
reads (safetensors; metadata as in SPEC.md's "Model file")."""

import copy
import json
import math
import time

import numpy as np
import torch
from torch import nn

import windows


class FaultPredictor(nn.Module):
    def __init__(self, input_dim=10, hidden_dim=64):
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden_dim, batch_first=True)
        self.classifier = nn.Sequential(nn.Linear(hidden_dim, 32), nn.ReLU(), nn.Linear(32, 1),
                                        nn.Sigmoid())

    def forward(self, x):
        return torch.sigmoid(self.logit(x))

    def logit(self, x):
        """The classifier's output before its sigmoid."""
        out, _ = self.lstm(x)
        return self.classifier[:3](out[:, -1, :])


class FocalLoss(nn.Module):
    """Binary focal loss (Lin et al., 2017) on probabilities: easy, well
    classified windows (most healthy ones) count for little."""

    def __init__(self, alpha=0.25, gamma=2.0):
        super().__init__()
        self.alpha, self.gamma = alpha, gamma

    def forward(self, p, y):
        p = p.clamp(1e-6, 1 - 1e-6)
        pt = torch.where(y > 0.5, p, 1 - p)
        at = torch.where(y > 0.5, torch.full_like(p, self.alpha), torch.full_like(p, 1 - self.alpha))
        return (-at * (1 - pt) ** self.gamma * torch.log(pt)).mean()


def fit_scaler(x):
    """Robust scaler from training windows only (scikit-learn's
    RobustScaler): center the median, scale the interquartile range; where
    that is 0 (counters that are mostly 0), the distance from the median to
    the 99th percentile, at least 1. (A 5th-95th percentile range, tried to
    keep a throttled clock nearer the scale, did no better.)"""
    flat = x.reshape(-1, x.shape[-1]).astype(np.float64)
    q25, q50, q75, q99 = np.percentile(flat, [25, 50, 75, 99], axis=0)
    scale = q75 - q25
    fallback = np.maximum(q99 - q50, 1.0)
    scale = np.where(scale > 1e-6, scale, fallback)
    return q50, scale


def time_warp(x, rng, strength=0.2):
    """Resamples each window along a smoothly stretched time axis (the end
    stays the end): a build-up a little faster or slower."""
    b, t, d = x.shape
    base = np.linspace(0, 1, t)
    out = np.empty_like(x)
    for i in range(b):
        k = 1 + rng.uniform(-strength, strength)
        pos = (1 - (1 - base) ** k) * (t - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, t - 1)
        w = (pos - lo)[:, None]
        out[i] = x[i, lo] * (1 - w) + x[i, hi] * w
    return out


def augment(xb, rng, noise=0.05, p=0.5):
    """Time warp and Gaussian noise (on scaled inputs), each on about half
    of a batch."""
    xb = xb.copy()
    warp = rng.random(len(xb)) < p
    if warp.any():
        xb[warp] = time_warp(xb[warp], rng)
    jitter = rng.random(len(xb)) < p
    xb[jitter] += rng.normal(0, noise, xb[jitter].shape).astype(np.float32)
    return xb


def predict(model, x, batch=4096):
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(x), batch):
            out.append(model(torch.from_numpy(x[i:i + batch])).numpy()[:, 0])
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def logits(model, x, batch=4096):
    """The classifier's output before its sigmoid."""
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(x), batch):
            out.append(model.logit(torch.from_numpy(x[i:i + batch])).numpy()[:, 0])
    return np.concatenate(out).astype(np.float64) if out else np.zeros(0)


def platt(z, y, w, iterations=100):
    """The a and b of sigmoid(a * z + b) closest (weighted log loss) to the
    labels y of scores z, each weighed by w: Newton's method from the base
    rate, each step halved until the loss falls (a full step from far off
    can overshoot into a sigmoid that saturates, and never come back)."""
    w = w / w.sum()
    base = min(max(float((w * y).sum()), 1e-12), 1 - 1e-12)
    a, b = 1.0, float(np.log(base / (1 - base)) - (w * z).sum())

    def loss(a, b):
        t = a * z + b
        return float((w * (np.logaddexp(0.0, t) - y * t)).sum())

    current = loss(a, b)
    for _ in range(iterations):
        p = 0.5 * (1 + np.tanh(0.5 * (a * z + b)))
        r = w * (p - y)
        g = np.array([(r * z).sum(), r.sum()])
        v = w * p * (1 - p)
        h = np.array([[(v * z * z).sum(), (v * z).sum()], [(v * z).sum(), v.sum()]])
        step = np.linalg.solve(h + 1e-12 * np.eye(2), g)
        t = 1.0
        while t > 1e-6 and loss(a - t * step[0], b - t * step[1]) > current:
            t /= 2
        if t <= 1e-6:
            break
        a, b = a - t * step[0], b - t * step[1]
        current = loss(a, b)
        if np.abs(t * step).max() < 1e-10:
            break
    if not (np.isfinite(a) and np.isfinite(b)):
        raise ValueError("Platt scaling did not converge")
    return float(a), float(b)


def calibrate(model, x, y, w, iterations=100):
    """Platt scaling at the real fault rate: fits a and b so that
    sigmoid(a * logit + b) is the probability of a fault within the horizon
    on the windows x (scaled) with labels y and weights w (each window
    standing for w windows of a fleet scored every minute), and folds them
    into the last layer, so that medic reads a calibrated model of the same
    shape. Returns (a, b)."""
    a, b = platt(logits(model, x), y, w, iterations)
    last = model.classifier[2]
    with torch.no_grad():
        last.weight.mul_(float(a))
        last.bias.mul_(float(a)).add_(float(b))
    return float(a), float(b)


def uncalibrated(model, a, b):
    """A copy of model without the Platt scaling calibrate folded into its
    last layer (a and b, the model file's `calibration`): the network as
    trained, whose loss training goes on from. Fine-tuning a calibrated
    model instead starts from a logit shifted to the real fault rate, where
    the focal loss of the training windows is far from its minimum: the
    first steps then move the whole network to undo the shift."""
    model = copy.deepcopy(model)
    last = model.classifier[2]
    with torch.no_grad():
        last.bias.sub_(float(b)).div_(float(a))
        last.weight.div_(float(a))
    return model


def raised(xb, evidence, rng, most_steps=10, most=3.0):
    """xb with, in each window, one evidence input (of the (index, unit)
    pairs, unit one count in scaled inputs) raised by 1 to `most` counts
    over the window's last 1 to most_steps steps: more of what fails GPUs."""
    n, t, _ = xb.shape
    pick = rng.integers(len(evidence), size=n)
    cols = np.array([f for f, _ in evidence])[pick]
    units = np.array([u for _, u in evidence], np.float32)[pick] * rng.uniform(1, most, n)
    span = rng.integers(1, most_steps + 1, size=n)
    up = xb.clone()
    steps = torch.arange(t)[None, :] >= torch.from_numpy(t - span)[:, None]
    up[torch.arange(n), :, torch.from_numpy(cols)] += steps * torch.from_numpy(
        units.astype(np.float32))[:, None]
    return up


def monotone_penalty(model, xb, evidence, rng):
    """How far the logit falls, on average, when a window gets more
    evidence (raised): zero for a model monotone in it on these windows. A
    small margin asks more evidence to raise the risk, not only not to
    lower it."""
    n = len(xb)
    z = model.logit(torch.cat([xb, raised(xb, evidence, rng)]))
    return torch.relu(z[:n] - z[n:] + MONOTONE_MARGIN).mean()


MONOTONE_MARGIN = 0.01


def train(x, m, val_mask, seed, hidden=64, epochs=30, patience=5, batch=256, lr=2e-3,
          max_steps=None, log=print, start=None, evidence=None, monotone_weight=1.0):
    """Trains on the windows outside val_mask; keeps the weights of the
    epoch with the best validation loss; stops after `patience` epochs
    without improvement (or after max_steps batches). start: (model,
    center, scale) to fine-tune, its scaler kept. evidence: the indexes of
    the inputs more of which must never lower the risk; the loss then adds
    monotone_weight times the monotone penalty. Returns (model, center,
    scale, history)."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    tr, va = ~val_mask, val_mask
    if start:
        model, center, scale = start
    else:
        center, scale = fit_scaler(x[tr])
        center, scale = np.round(center, 6), np.round(scale, 6)  # as exported
        model = FaultPredictor(x.shape[-1], hidden)
    xs = ((x - center) / scale).astype(np.float32)
    y = m["label"].astype(np.float32)
    pairs = [(f, 1.0 / float(scale[f])) for f in evidence or []]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = FocalLoss()
    xv, yv = torch.from_numpy(xs[va]), torch.from_numpy(y[va])[:, None]
    best, best_state, bad, steps, history = math.inf, None, 0, 0, []
    if start:  # fine-tuning keeps what it started from unless it does better
        with torch.no_grad():
            best = loss_fn(model(xv), yv).item()
        best_state = {k: v.clone() for k, v in model.state_dict().items()}
    idx = np.nonzero(tr)[0]
    for epoch in range(epochs):
        t0 = time.time()
        model.train()
        rng.shuffle(idx)
        total = 0.0
        for i in range(0, len(idx), batch):
            j = idx[i:i + batch]
            xb = torch.from_numpy(augment(xs[j], rng))
            loss = loss_fn(model(xb), torch.from_numpy(y[j])[:, None])
            if pairs:
                loss = loss + monotone_weight * monotone_penalty(model, xb, pairs, rng)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += loss.item() * len(j)
            steps += 1
            if max_steps and steps >= max_steps:
                break
        model.eval()
        with torch.no_grad():
            vloss = loss_fn(model(xv), yv).item() if len(xv) else total / len(idx)
        history.append((epoch + 1, total / len(idx), vloss))
        log(f"epoch {epoch + 1}: train loss {total / len(idx):.5f}, validation loss {vloss:.5f}"
            f" ({time.time() - t0:.0f} s)")
        if vloss < best - 1e-6:
            best, bad = vloss, 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
            if bad >= patience:
                log(f"early stop: no better validation loss for {patience} epochs")
                break
        if max_steps and steps >= max_steps:
            break
    model.load_state_dict(best_state)
    return model, center, scale, history


def export(path, model, center, scale, features, window, step, horizon, description,
           extra=None):
    """Writes the state_dict and the metadata medic reads."""
    feats = [{"name": n, "query": q, "center": round(float(c), 6), "scale": round(float(s), 6)}
             for (n, q), c, s in zip(features, center, scale)]
    sd = model.state_dict()
    meta = {
        "arch": "FaultPredictor", "format": "pt", "gate_order": "i,f,g,o",
        "input_dim": str(model.lstm.input_size), "hidden_dim": str(model.lstm.hidden_size),
        "classifier_hidden": "32", "torch_version": torch.__version__,
        "window": str(window), "step": step, "horizon": horizon,
        "features": json.dumps(feats, separators=(",", ":")),
        "description": description,
    }
    meta.update(extra or {})
    windows.write_safetensors(path, {k: v.numpy() for k, v in sd.items()}, meta)
