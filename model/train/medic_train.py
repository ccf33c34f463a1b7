#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Trains, evaluates and regenerates medic's failure-risk model.

    medic_train.py default  [--out FILE]            the shipped model
    medic_train.py blend    [--model FILE]            fit the shipped model's blend again
    medic_train.py evaluate [--model FILE] [--report FILE] [--plot FILE]
    medic_train.py final    [--model FILE] [--report FILE] [--again]
    medic_train.py retrain  --dataset FILE [--dataset FILE ...] --out FILE
    medic_train.py compare  A B [--tolerance X]
    medic_train.py smoke    [--dir DIR]              a few hundred steps, a tiny fleet

Needs Debian's python3-torch and python3-numpy (run with /usr/bin/python3);
`evaluate` also needs python3-matplotlib for the plot. See README.md."""

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import blend  # noqa: E402
import evaluate  # noqa: E402
import fault_predictor as fp  # noqa: E402
import features  # noqa: E402
import recipes  # noqa: E402
import windows  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_MODEL = os.path.join(ROOT, "model", "default.safetensors")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def progress(label):
    def report(done, total):
        if done == total or done % max(total // 4, 1) == 0:
            log(f"{label}: {done}/{total} nodes")
    return report


def fleets(spec, label, sre=False, keep_lost=False):
    """The windows of every fleet of spec; sre: with the SRE rule's score of
    each (sre_rule.py), and keep_lost: with lost GPUs' windows, which only
    the evaluation needs (no model trains on a window medic never scores)."""
    xs, ms = [], []
    for f in spec["fleets"]:
        x, m = windows.fleet_windows(f, f["nodes"], f["days"], spec["accel"], spec["pos_stride"],
                                     spec["neg_stride"], progress(f"{label} fleet {f['seed']}"),
                                     sre, keep_lost)
        xs.append(x)
        ms.append(m)
    return np.concatenate(xs), np.concatenate(ms)


def describe(sim):
    spec = recipes.SIMULATORS[sim]
    sizes = "; ".join(recipes.setting(f) for f in spec["train"]["fleets"])
    mix = ", ".join(f"{k} {v:.0%}" for k, v in windows.SIMULATORS[sim].fault_mix().items())
    return (f"SYNTHETIC data from model/train/{sim}.py, not a real fleet: 8-GPU servers, "
            f"dcgm-exporter scrapes ({sizes}); faults x{spec['train']['accel']} the cited "
            f"rate for training, fault mix {mix}; label: a hardware fault takes the GPU out "
            f"within {windows.HORIZON} min; risk calibrated to the cited fault rate")


def evidence_of(names):
    """The indexes of the evidence inputs (features.EVIDENCE) among a
    model's input names: those training keeps the risk monotone in."""
    return [i for i, n in enumerate(names) if n in features.EVIDENCE]


def train_on(x, m, val_mask, log=log, max_steps=None, start=None, names=None, **override):
    """fp.train with the recipe's settings; the risk kept monotone in the
    evidence among names (default: the shipped features)."""
    cfg = dict(recipes.TRAINING, **override)
    names = names or [n for n, _ in features.FEATURES]
    return fp.train(x, m, val_mask, cfg["seed"], hidden=cfg["hidden"], epochs=cfg["epochs"],
                    patience=cfg["patience"], batch=cfg["batch"], lr=cfg["lr"],
                    max_steps=max_steps, log=log, start=start, evidence=evidence_of(names),
                    monotone_weight=cfg["monotone_weight"])


def finish(model, center, scale, x, m, val):
    """Calibrates the model on the validation windows, joins it with the
    rule score there (blend.py) and picks the blended risk's operating
    threshold there: (calibration a and b, blend, threshold)."""
    xs = ((x[val] - center) / scale).astype(np.float32)
    a, b = fp.calibrate(model, xs, m["label"][val].astype(np.float64), m["weight"][val])
    return (a, b), *fit_blend(model, center, scale, x[val], m[val])


def fit_blend(model, center, scale, x, m):
    """The blend of a calibrated model fitted on validation windows x (raw)
    and the blended risk's operating threshold there."""
    xs = ((x - center) / scale).astype(np.float32)
    rule = evaluate.rule_score(x)
    bl = blend.fit(fp.logits(model, xs), rule, m["label"], m["weight"])
    s = blend.risk(bl, fp.logits(model, xs), rule)
    return bl, evaluate.best_f1_threshold(m["label"], m["weight"], s)


def calibration_meta(a, b):
    """The model file's `calibration`: the Platt scaling its last layer
    holds, sigmoid(a * logit + b)."""
    return json.dumps({"a": round(a, 4), "b": round(b, 4)})


def with_validation(train, validation, label):
    """The windows of the training fleets and then of the validation ones,
    and the mask of the latter."""
    x, m = fleets(train, f"{label} training")
    xv, mv = fleets(validation, f"{label} validation")
    val = np.r_[np.zeros(len(x), bool), np.ones(len(xv), bool)]
    return np.concatenate([x, xv]), np.concatenate([m, mv]), val


def train_simulator(sim, seeds=(None,)):
    """A model trained on a simulator's training fleets, stopped early,
    calibrated and given its threshold on its validation fleet: one such
    model per training seed (None: the recipe's), the windows made once."""
    spec = recipes.SIMULATORS[sim]
    x, m, val = with_validation(spec["train"], spec["validation"], sim)
    log(f"{len(x)} windows ({int(m['label'].sum())} positive), {int(val.sum())} for validation")
    out = []
    for seed in seeds:
        model, center, scale, hist = train_on(x, m, val, **({"seed": seed} if seed else {}))
        calibration, bl, threshold = finish(model, center, scale, x, m, val)
        out.append((model, center, scale, hist, calibration, bl, threshold))
    return out


def cmd_default(args):
    t0 = time.time()
    model, center, scale, hist, (a, b), bl, threshold = train_simulator(recipes.SHIPPED)[0]
    fp.export(args.out, model, center, scale, features.FEATURES, windows.WINDOW, "60s",
              f"{windows.HORIZON}m", describe(recipes.SHIPPED),
              {"seed": str(recipes.TRAINING["seed"]), "threshold": f"{threshold:.4f}",
               "calibration": calibration_meta(a, b), "blend": blend.meta(bl),
               "epochs": str(len(hist)), "recipe": "model/train/medic_train.py default"})
    log(f"wrote {args.out} in {time.time() - t0:.0f} s (operating threshold {threshold:.4f})")


def cmd_blend(args):
    """The blend of a model trained by `default` fitted again on the
    shipped simulator's validation windows, its network unchanged: the
    file rewritten with the new `blend` and threshold."""
    model, center, scale, meta = load_model(args.model)
    x, m = fleets(recipes.SIMULATORS[recipes.SHIPPED]["validation"], "validation")
    bl, threshold = fit_blend(model, center, scale, x, m)
    tensors, meta = windows.read_safetensors(args.model)
    meta.update({"blend": blend.meta(bl), "threshold": f"{threshold:.4f}"})
    windows.write_safetensors(args.model, tensors, meta)
    log(f"wrote {args.model}: blend {blend.meta(bl)}, operating threshold {threshold:.4f}")


def load_model(path):
    import torch
    tensors, meta = windows.read_safetensors(path)
    d, h = tensors["lstm.weight_ih_l0"].shape[1], tensors["lstm.weight_hh_l0"].shape[1]
    model = fp.FaultPredictor(d, h)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()})
    feats = json.loads(meta["features"])
    center = np.array([f["center"] for f in feats], np.float32)
    scale = np.array([f["scale"] for f in feats], np.float32)
    return model, center, scale, meta


def calibration_of(meta):
    """The Platt scaling (a, b) a model file's last layer holds."""
    calibration = json.loads(meta.get("calibration", '{"a": 1, "b": 0}'))
    return calibration["a"], calibration["b"]


def fine_tune_start(model, center, scale, meta):
    """What fine-tuning starts from: the model's network without the
    calibration folded into it, and its scaler."""
    return fp.uncalibrated(model, *calibration_of(meta)), center, scale


def cmd_evaluate(args):
    import report
    shipped = recipes.SHIPPED
    other = next(s for s in recipes.SIMULATORS if s != shipped)
    model, center, scale, meta = load_model(args.model)
    tests = {}
    for sim, spec in recipes.SIMULATORS.items():
        tests[sim] = fleets(spec["held_out"], f"{sim} held-out", sre=True, keep_lost=True)
        log(f"{sim}: {len(tests[sim][0])} held-out windows "
            f"({int(tests[sim][1]['label'].sum())} positive)")

    def runs_of(trained, model, center, scale, bl, only=None):
        out = []
        for sim, (x, m) in tests.items():
            if only is None or sim == only:
                s, alone = blend.score(model, center, scale, bl, x)
                out.append(report.score_run(trained, sim, m, x, s, alone))
        return out

    shipped_blend = blend.of(meta)
    runs = runs_of(shipped, model, center, scale, shipped_blend)
    log(f"training on {other} for the other direction")
    o_model, o_center, o_scale, *_, o_blend, _ = train_simulator(other)[0]
    runs += runs_of(other, o_model, o_center, o_scale, o_blend)
    # fine-tuning: the shipped model on one of the other simulator's training
    # fleets, its scaler kept, stopped early on that simulator's validation,
    # as `retrain --fine-tune` does
    spec = recipes.SIMULATORS[other]
    own = dict(spec["train"], fleets=spec["train"]["fleets"][:1])
    x, m, val = with_validation(own, spec["validation"], f"{other} fine-tuning")
    start = fine_tune_start(model, center, scale, meta)
    t_model = train_on(x, m, val, start=start, **recipes.FINE_TUNE)[0]
    # calibrated and blended again on that validation fleet
    t_blend = finish(t_model, center, scale, x, m, val)[1]
    tuned = (f"one fleet of {report.named(other)} ({recipes.setting(own['fleets'][0])})",
             runs_of(shipped, t_model, center, scale, t_blend, only=other)[0])
    # the shipped recipe with other training seeds, on the simulator it did
    # not train on: the spread a seed alone makes
    log(f"training on {shipped} with seeds {recipes.SPREAD_SEEDS} for their spread")
    seeds = [(recipes.TRAINING["seed"],
              next(r for r in runs if r["trained"] == shipped and r["tested"] == other))]
    for seed, (s_model, s_center, s_scale, *_, s_blend, _) in zip(
            recipes.SPREAD_SEEDS, train_simulator(shipped, recipes.SPREAD_SEEDS)):
        seeds.append((seed, runs_of(shipped, s_model, s_center, s_scale, s_blend,
                                    only=other)[0]))
    monotone = report.monotone_probe(
        lambda w: blend.score(model, center, scale, shipped_blend, w)[0],
        tests[other][0][tests[other][1]["lost"] == 0])
    report.write(args.report, args.plot, args.model, meta, runs, tuned, calibration_of(meta),
                 monotone, seeds, shipped_blend)
    log(f"wrote {args.report} and {args.plot}")


def cmd_final(args):
    """The shipped risk on simulator C's held-out fleets, scored once."""
    import final_report
    import report
    if os.path.exists(args.report) and not args.again:
        sys.exit(f"{args.report} exists: simulator C's fleets have been scored once; a later "
                 "model is judged on fleets of new seeds (--again scores these anyway)")
    model, center, scale, meta = load_model(args.model)
    (sim, spec), = recipes.FINAL.items()
    x, m = fleets(spec["held_out"], f"{sim} held-out", sre=True, keep_lost=True)
    log(f"{sim}: {len(x)} held-out windows ({int(m['label'].sum())} positive)")
    bl = blend.of(meta)
    s, alone = blend.score(model, center, scale, bl, x)
    final_report.write(args.report, args.model,
                       report.score_run(recipes.SHIPPED, sim, m, x, s, alone), bl)
    log(f"wrote {args.report}")


def cmd_retrain(args):
    xs, ms, meta = [], [], None
    for path in args.dataset:
        x, m, meta_i = windows.dataset_windows(path)
        if meta and meta_i.get("features") != meta.get("features"):
            sys.exit(f"{path}: its features differ from {args.dataset[0]}'s")
        meta = meta_i
        m["fleet"] = len(xs)
        xs.append(x)
        ms.append(m)
    x, m = np.concatenate(xs), np.concatenate(ms)
    if m["label"].sum() == 0 or (m["label"] == 0).sum() == 0:
        sys.exit("the datasets need both positive and negative windows")
    feats = [(f["name"], f["query"]) for f in json.loads(meta["features"])]
    val = (m["node"] % 5) == 0 if len(np.unique(m["node"])) >= 5 else \
        np.random.default_rng(1).random(len(m)) < 0.2
    log(f"{len(x)} windows ({int(m['label'].sum())} positive), {int(val.sum())} for validation")
    start, how = None, "retrained"
    recipe = dict(recipes.TRAINING)
    if args.fine_tune:  # the model's network and scaler as the start, a lower rate
        model, center, scale, fmeta = load_model(args.fine_tune)
        if [(f["name"], f["query"]) for f in json.loads(fmeta["features"])] != feats:
            sys.exit(f"{args.fine_tune}: its features differ from the datasets'")
        start = fine_tune_start(model, center, scale, fmeta)
        how = f"fine-tuned from {os.path.basename(args.fine_tune)}"
        recipe.update(recipes.FINE_TUNE)
    if args.epochs:
        recipe["epochs"] = args.epochs
    model, center, scale, hist = train_on(x, m, val, start=start, epochs=recipe["epochs"],
                                          lr=recipe["lr"], names=[n for n, _ in feats])
    (a, b), bl, threshold = finish(model, center, scale, x, m, val)
    fp.export(args.out, model, center, scale, feats, int(meta["window"]), meta["step"],
              meta.get("horizon", ""),
              f"{how} on {len(x)} windows from medic model dataset: "
              + ", ".join(os.path.basename(p) for p in args.dataset),
              {"seed": str(recipes.TRAINING["seed"]), "threshold": f"{threshold:.4f}",
               "calibration": calibration_meta(a, b), "blend": blend.meta(bl),
               "epochs": str(len(hist))})
    log(f"wrote {args.out} (operating threshold {threshold:.4f})")


def cmd_compare(args):
    a, ma = windows.read_safetensors(args.a)
    b, mb = windows.read_safetensors(args.b)
    if sorted(a) != sorted(b) or any(a[k].shape != b[k].shape for k in a):
        sys.exit("the files hold different tensors")
    worst = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    # the same windows (a small fleet neither was trained on) through both
    x, _ = windows.fleet_windows(recipes.fleet("simulate", 404, 8, 3, "H100-80GB", 30), 8, 3, 10,
                                 5, 240)
    scores = []
    for path in (args.a, args.b):
        model, center, scale, meta = load_model(path)
        scores.append(blend.score(model, center, scale, blend.of(meta), x)[0])
    sa, sb = scores
    risk = float(np.abs(sa - sb).max())
    print(f"max_abs_weight_diff={worst:.3g} max_abs_risk_diff={risk:.3g} windows={len(x)}")
    if risk > args.tolerance:
        sys.exit(f"risks differ by more than {args.tolerance}")


def cmd_smoke(args):
    """A tiny fleet of each simulator, a few hundred steps: the pipeline
    runs end to end and the file it writes is a model medic can read."""
    os.makedirs(args.dir, exist_ok=True)
    spec = {"fleets": [recipes.fleet("simulate", 5, 12, 4, "A100-80GB", 30),
                       recipes.fleet("simulate_wear", 6, 12, 4, "H200", 20, ["ecc"])],
            "accel": 40, "pos_stride": 5, "neg_stride": 120}
    x, m = fleets(spec, "smoke", sre=True)
    val = m["node"] % 4 == 0
    model, center, scale, hist = train_on(x, m, val, max_steps=args.steps, epochs=50,
                                          patience=50, hidden=16, batch=64)
    out = os.path.join(args.dir, "smoke.safetensors")
    fp.export(out, model, center, scale, features.FEATURES, windows.WINDOW, "60s",
              f"{windows.HORIZON}m", "SYNTHETIC: tiny fleets of both simulators")
    s = fp.predict(model, ((x - center) / scale).astype(np.float32))
    prec, rec, fpr, _, ap = evaluate.pr_curve(m["label"], np.ones(len(m)), s)
    base = m["label"].mean()
    print(f"smoke: {len(x)} windows, {sum(1 for _ in hist)} epochs, average precision "
          f"{ap:.3f} (base rate {base:.3f}), wrote {out}")
    if not np.isfinite(s).all() or ap <= base:
        sys.exit("smoke: the model learned nothing (average precision at or below the base rate)")
    # fine-tuning starts from the network as trained: a calibrated model's
    # file, read back for fine-tuning, gives the logits it had before
    xs = ((x - center) / scale).astype(np.float32)
    before = fp.logits(model, xs)
    (a, b), bl, _ = finish(model, center, scale, x, m, val)
    calibrated = os.path.join(args.dir, "smoke-calibrated.safetensors")
    fp.export(calibrated, model, center, scale, features.FEATURES, windows.WINDOW, "60s",
              f"{windows.HORIZON}m", "SYNTHETIC: tiny fleets of both simulators, calibrated",
              {"calibration": calibration_meta(a, b), "blend": blend.meta(bl)})
    # the blend read back scores as fitted, and the rule has a part in it
    back = load_model(calibrated)
    joined, alone = blend.score(*back[:3], blend.of(back[3]), x)
    want = blend.risk(bl, fp.logits(model, xs), evaluate.rule_score(x))
    print(f"smoke: blend {blend.meta(bl)}")
    if bl["rule_weight"] <= 0 or not np.allclose(joined, want, rtol=1e-4, atol=1e-9) or \
            np.allclose(joined, alone):
        sys.exit("smoke: the blend read back does not score as fitted, or the rule has no part")
    start = fine_tune_start(*load_model(calibrated))[0]
    drift = float(np.abs(fp.logits(start, xs) - before).max())
    print(f"smoke: calibrated by {a:.3f} and {b:.3f}; fine-tuning starts {drift:.2g} from the "
          "logits as trained")
    # (a calibration that changed nothing would prove nothing)
    if abs(a - 1) + abs(b) <= 1e-3 or drift > 1e-2:
        sys.exit("smoke: fine-tuning does not start from the network as trained")
    # Platt scaling of a sharp score at a rare rate (weights as the real
    # rate gives them) converges to the rate, where a full Newton step from
    # far off overshoots into a saturated sigmoid
    rng = np.random.default_rng(3)
    z = 30 * np.r_[rng.normal(-1, 1, 5000), rng.normal(1, 1, 200)]
    y, w = np.r_[np.zeros(5000), np.ones(200)], np.r_[np.full(5000, 400.0), np.ones(200)]
    pa, pb = fp.platt(z, y, w)
    mean = np.average(1 / (1 + np.exp(-(pa * z + pb))), weights=w)
    print(f"smoke: Platt scaling of a sharp score: a {pa:.4f}, b {pb:.3f}, mean risk {mean:.6f} "
          f"(rate {np.average(y, weights=w):.6f})")
    if abs(mean - np.average(y, weights=w)) > 1e-6 or not 0 < pa < 1:
        sys.exit("smoke: Platt scaling did not converge to the rate")
    # the SRE rule the evaluation holds models to reads every window's raw scrapes
    sre_ap = evaluate.pr_curve(m["label"], np.ones(len(m)), m["sre"])[4]
    print(f"smoke: the SRE rule's average precision {sre_ap:.3f}")
    if not np.isfinite(m["sre"]).all() or sre_ap <= base:
        sys.exit("smoke: the SRE rule tells nothing (average precision at or below the base rate)")
    # a lost GPU's windows: a silence counted as medic counts it
    first = np.random.default_rng(1).normal(size=300)
    for a, b in ((20, 27), (60, 66), (100, 105), (150, 260)):
        first[a:b] = np.nan

    def silent_at(e):
        run = longest = 0
        for v in first[max(e - windows.WINDOW + 1, 0):e + 1]:
            run = run + 1 if np.isnan(v) else 0
            longest = max(longest, run)
        return longest > windows.MAX_GAP and not np.isnan(first[max(e - windows.WINDOW + 1, 0):
                                                                 e + 1]).all()
    want = np.array([silent_at(e) for e in range(len(first))])
    if not (windows.silent_windows(first) == want).all() or not want.any():
        sys.exit("smoke: the lost-GPU windows differ from medic's rule")
    # simulator C is kept for the final figures: only that it makes windows
    # of both kinds, nothing scored on it
    c = recipes.fleet("simulate_hazard", 7, 8, 7, "H100-SXM", 30)
    xc, mc = windows.fleet_windows(c, 8, 7, 40, 5, 240)
    if not np.isfinite(xc).all() or mc["label"].sum() == 0 or (mc["label"] == 0).sum() == 0:
        sys.exit("smoke: simulator C gave no usable windows of both kinds")
    print(f"smoke: simulator C: {len(xc)} windows, {int(mc['label'].sum())} positive")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("default", help="train the shipped model")
    d.add_argument("--out", default=DEFAULT_MODEL)
    b = sub.add_parser("blend", help="fit the blend of a model `default` trained again")
    b.add_argument("--model", default=DEFAULT_MODEL)
    e = sub.add_parser("evaluate", help="the held-out evaluation report")
    e.add_argument("--model", default=DEFAULT_MODEL)
    e.add_argument("--report", default=os.path.join(ROOT, "docs", "model-evaluation.md"))
    e.add_argument("--plot", default=os.path.join(ROOT, "docs", "model-evaluation-pr.png"))
    f = sub.add_parser("final", help="the shipped risk on simulator C, scored once")
    f.add_argument("--model", default=DEFAULT_MODEL)
    f.add_argument("--report", default=os.path.join(ROOT, "docs", "model-final.md"))
    f.add_argument("--again", action="store_true",
                   help="score simulator C's fleets though a report of them exists")
    r = sub.add_parser("retrain", help="train on `medic model dataset` files")
    r.add_argument("--dataset", action="append", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--epochs", type=int,
                   help=f"at most this many epochs (default {recipes.TRAINING['epochs']}, "
                        f"{recipes.FINE_TUNE['epochs']} with --fine-tune)")
    r.add_argument("--fine-tune", metavar="MODEL",
                   help="start from MODEL (its network and scaler, without its calibration) at "
                        f"a learning rate of {recipes.FINE_TUNE['lr']:g} instead of from scratch")
    c = sub.add_parser("compare", help="compare two model files")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--tolerance", type=float, default=1e-3)
    s = sub.add_parser("smoke", help="a quick end-to-end run on a tiny fleet")
    s.add_argument("--dir", default="/tmp/medic-train-smoke")
    s.add_argument("--steps", type=int, default=300)
    args = p.parse_args()
    {"default": cmd_default, "blend": cmd_blend, "evaluate": cmd_evaluate, "final": cmd_final, "retrain": cmd_retrain,
     "compare": cmd_compare, "smoke": cmd_smoke}[args.cmd](args)


if __name__ == "__main__":
    main()
