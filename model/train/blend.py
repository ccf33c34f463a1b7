# SPDX-License-Identifier: Apache-2.0
"""medic's risk: the LSTM's logit and the rule score (evaluate.rule_score,
the same ten terms model/rule_score.c adds in medic) joined in one
calibrated probability,

    risk = sigmoid(logit_weight * logit + rule_weight * rule + bias),

kept in the model file's metadata as `blend`. The rule's share is
recipes.BLEND_RULE_WEIGHT of the logit's, each part first divided by its
spread on the validation windows (so that the share means the same for
any model); the whole is then Platt-scaled there at the real fault rate.
The rule's part rises with every term, so the risk stays monotone in what
the rule reads whatever the LSTM does."""

import json

import numpy as np

import evaluate
import fault_predictor as fp
import recipes


def fit(logit, rule, y, w, share=None):
    """The blend of logits and rule scores of the validation windows
    (labels y, weights w at the real fault rate): a dict for the metadata."""
    share = recipes.BLEND_RULE_WEIGHT if share is None else share
    logit_spread, rule_spread = float(np.std(logit)), float(np.std(rule))
    if logit_spread <= 0 or rule_spread <= 0:
        raise ValueError("the validation windows give the logit or the rule no spread")
    z = logit / logit_spread + share * rule / rule_spread
    a, b = fp.platt(z, y.astype(np.float64), w)
    return {"logit_weight": round(a / logit_spread, 6),
            "rule_weight": round(a * share / rule_spread, 6), "bias": round(b, 6),
            "share": share, "logit_spread": round(logit_spread, 4),
            "rule_spread": round(rule_spread, 4)}


def risk(blend, logit, rule):
    """The blended risk of windows with these logits and rule scores."""
    z = blend["logit_weight"] * logit + blend["rule_weight"] * rule + blend["bias"]
    return 1.0 / (1.0 + np.exp(-z))


def meta(blend):
    return json.dumps(blend, separators=(",", ":"))


def of(model_meta):
    """A model file's blend, or None (the LSTM's risk alone)."""
    text = model_meta.get("blend")
    return json.loads(text) if text else None


def score(model, center, scale, blend, x):
    """(medic's risk, the LSTM's alone) of raw windows x."""
    xs = ((x - center) / scale).astype(np.float32)
    alone = fp.predict(model, xs).astype(np.float64)
    if blend is None:
        return alone, alone
    return risk(blend, fp.logits(model, xs), evaluate.rule_score(x)), alone
