# SPDX-License-Identifier: Apache-2.0
"""docs/model-evaluation.md and its precision-recall plot: models trained on
one simulator's fleets, tested on the held-out fleets of the same simulator
and of the other one, beside a transparent rule score and the static
thresholds over the same windows; the shipped model's calibration; what
fine-tuning on a fleet's own data changes."""

import collections

import numpy as np

import evaluate
import recipes
import simulate_wear
import sources
import sre_rule
import windows

# MODEL: medic's risk (the LSTM joined with the rule score when the model
# file holds a blend, blend.py); ALONE: the LSTM's risk alone, scored
# beside it when there is a blend
MODEL, ALONE = "model", "LSTM alone"
RULE, SRE, THRESHOLDS = "rule score", "SRE rule", "static thresholds"
# the rules a model is held to: the score over its own inputs, and the one an
# SRE would write from the raw counters (sre_rule.py)
BARS = (RULE, SRE)
# the goals the shipped model is held to on the simulator it did not train on
GOAL_AP, GOAL_RECALL_SIGNED = 0.65, 0.4
# the ship condition: a mean lead over the rule of at least SHIP_LEAD PR-AUC
# whose one-sided 95% lower bound (DRAWS resamplings of the faults and the
# healthy GPUs) is above zero, no held-out fleet more than SHIP_BEHIND
# behind it, and recall at 1% FPR at least the rule's
SHIP_LEAD, SHIP_BEHIND, DRAWS = 0.02, 0.05, 1000


def _lead(leads):
    return f"{np.median(leads):.0f} min" if len(leads) else "-"


def _at_fpr(y, w, score, limit=0.01):
    """The lowest threshold whose false-positive rate is at most limit (the
    highest score plus one where none is)."""
    _, rec, fpr, thr, _ = evaluate.pr_curve(y, w, score)
    ok = fpr <= limit
    return float(thr[ok][np.argmax(rec[ok])]) if ok.any() else float(score.max()) + 1.0


def signed(m):
    """Positive windows whose fault's build-up had begun by the window's
    end: the only ones any detector can tell from healthy ones (a sudden
    fault, an unseen one, or the part of the hour before the build-up shows
    nothing)."""
    return (m["label"] == 1) & (m["build_up"] > 0) & (m["build_up"] >= m["lead"])


def measure(m, score):
    """PR-AUC on the windows as sampled and at the real base rate, recall at
    1% FPR (of all positives and of those with a sign), and the faults
    warned of at that threshold with their lead."""
    y = m["label"].astype(int)
    score = score.astype(np.float64)
    _, rec, fpr, _, ap_sampled = evaluate.pr_curve(y, np.ones(len(y)), score)
    _, _, _, _, ap_real = evaluate.pr_curve(y, m["weight"], score)
    alarm = score >= _at_fpr(y, m["weight"], score)
    leads, faults = evaluate.lead_times(m, alarm)
    signs = signed(m)
    return {"ap": ap_sampled, "ap_real": ap_real, "recall": evaluate.recall_at_fpr(rec, fpr),
            "leads": leads, "faults": faults, "alarm": alarm, "base": y.mean(),
            "signed": signs.mean() / max(y.mean(), 1e-12),
            "recall_signed": alarm[signs].mean() if signs.any() else 0.0}


def score_run(trained, tested, m, x, score, alone=None):
    """Every detector on one simulator's held-out windows: per setting and
    over all of them. score: the model's (alone: the LSTM's alone, when the
    model blends it with the rule score); a lost GPU's window (m["lost"])
    gets medic's risk 1 (PROMETHEUS_LOST_RISK) instead."""
    detectors = {MODEL: np.where(m["lost"] == 1, 1.0, score), RULE: evaluate.rule_score(x),
                 SRE: m["sre"], THRESHOLDS: evaluate.threshold_score(x)}
    if alone is not None and alone is not score:
        detectors[ALONE] = np.where(m["lost"] == 1, 1.0, alone)
    per = {}
    for f in recipes.spec_of(tested)["held_out"]["fleets"]:
        sel = m["fleet"] == f["seed"]
        per[f["seed"]] = {k: measure(m[sel], s[sel]) for k, s in detectors.items()}
    return {"trained": trained, "tested": tested, "m": m, "detectors": detectors,
            "per": per, "all": {k: measure(m, s) for k, s in detectors.items()}}


def reliability(m, risk, edges=(0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0001)):
    """Rows (bin, share of the fleet's windows, mean risk, observed fault
    rate) at the real fault rate, and the Brier score with that of always
    answering the base rate."""
    y, w = m["label"].astype(np.float64), m["weight"]
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (risk >= lo) & (risk < hi)
        if w[sel].sum() > 0:
            rows.append((f"{lo:g}–{min(hi, 1):g}", w[sel].sum() / w.sum(),
                         np.average(risk[sel], weights=w[sel]), np.average(y[sel], weights=w[sel])))
    base = np.average(y, weights=w)
    brier = np.average((risk - y) ** 2, weights=w)
    return rows, brier, np.average((base - y) ** 2, weights=w)


def named(sim):
    return recipes.spec_of(sim)["name"]


def _row(out, label, r):
    a, b, e, c = r[MODEL], r[RULE], r[SRE], r[THRESHOLDS]
    out(f"| {label} | {a['ap']:.3f} | {b['ap']:.3f} | {e['ap']:.3f} | {c['ap']:.3f} | "
        f"{a['recall_signed']:.3f} | {b['recall_signed']:.3f} | {e['recall_signed']:.3f} | "
        f"{c['recall_signed']:.3f} | {len(a['leads'])}/{a['faults']} ({_lead(a['leads'])}) | "
        f"{len(b['leads'])}/{b['faults']} | {len(e['leads'])}/{e['faults']} |")


def run_table(out, run):
    out("| setting | model PR-AUC | rule | SRE rule | thresholds | model recall at 1% FPR "
        "(windows with a sign) | rule | SRE rule | thresholds | faults the model warns of "
        "(median lead) | the rule | the SRE rule |")
    out("|---|---|---|---|---|---|---|---|---|---|---|---|")
    fleets = {f["seed"]: f for f in recipes.spec_of(run["tested"])["held_out"]["fleets"]}
    for seed, r in run["per"].items():
        _row(out, recipes.setting(fleets[seed]), r)
    _row(out, "**all together**", run["all"])
    a = run["all"][MODEL]
    out(f"\nPositives are {100 * a['base']:.1f}% of these windows as sampled; "
        f"{100 * a['signed']:.0f}% of them show a sign (the fault's build-up begun by the "
        "window's end), the most any detector's recall can reach but by chance. A detector "
        "that saw every sign and nothing else would reach a PR-AUC of "
        f"{ceiling(run['m']):.3f} on them. At the real fault rate (each healthy window "
        "weighed back to the windows it stands for) the PR-AUC over all of them is "
        + ", ".join(f"{run['all'][k]['ap_real']:.4f} for the {k}" for k in run["detectors"])
        + f". {lost_windows(run['m'])}\n")


def lost_windows(m):
    """What the windows of lost GPUs are, and how many."""
    lost = m["lost"] == 1
    return (f"{int(lost.sum())} of these windows ({int((lost & (m['label'] == 1)).sum())} "
            "positive) are of a lost GPU (its temperature silent for more than "
            f"{windows.MAX_GAP} steps while "
            "another GPU of its node reported): medic gives those risk 1, the rules score "
            "what is there.")


def closure(run, bar):
    """How much of the distance from a rule to the ceiling the model
    covers, in PR-AUC: (model - rule) / (ceiling - rule)."""
    a, r, top = run["all"][MODEL]["ap"], run["all"][bar]["ap"], ceiling(run["m"])
    return (a - r) / (top - r) if top > r else 0.0


def ceiling(m):
    """The PR-AUC of a detector that sees every sign there is and nothing
    else: the windows with a sign first, the rest in random order (the
    most a detector can reach on these windows, but by chance)."""
    rng = np.random.default_rng(1)
    y = m["label"].astype(int)
    score = signed(m) + 0.5 * rng.random(len(m))
    return evaluate.pr_curve(y, np.ones(len(y)), score)[4]


def groups(m):
    """Each window's group, the unit a resampling draws: its fault for a
    positive (a fleet, node and fault minute: the hour of windows before
    one fault rises and falls together), its GPU for a negative."""
    pos, _, ids = evaluate.fault_ids(m)
    group = np.zeros(len(m), np.int64)
    group[pos] = ids
    gpu = (m["fleet"][~pos].astype(np.int64) * 10**9 + m["node"][~pos].astype(np.int64) * 1000
           + m["gpu"][~pos])
    group[~pos] = (ids.max() + 1 if pos.any() else 0) + np.unique(gpu, return_inverse=True)[1]
    return group


def paired_lead(m, a, b, draws=DRAWS, seed=1):
    """a's PR-AUC less b's on the same windows (as sampled), and the
    one-sided 95% lower bound of that lead over draws Poisson resamplings
    of the groups (faults and healthy GPUs): the windows are not
    independent, the faults are."""
    y = m["label"].astype(int)
    a, b = a.astype(np.float64), b.astype(np.float64)
    lead = evaluate.pr_curve(y, np.ones(len(y)), a)[4] - evaluate.pr_curve(
        y, np.ones(len(y)), b)[4]
    group = groups(m)
    rng = np.random.default_rng(seed)
    leads = []
    for _ in range(draws):
        w = rng.poisson(1.0, group.max() + 1)[group].astype(np.float64)
        if w[y == 1].sum() == 0 or w[y == 0].sum() == 0:
            continue
        leads.append(evaluate.pr_curve(y, w, a)[4] - evaluate.pr_curve(y, w, b)[4])
    return lead, float(np.percentile(leads, 5))


def ship_condition(run, bar):
    """The shipped model against a rule (bar) on one simulator's held-out
    fleets: its mean lead (and lower bound), the fleet it trails most, its
    recall at 1% FPR of every failing GPU's windows and the rule's, and
    whether each part of the condition holds."""
    m, det = run["m"], run["detectors"]
    lead, lower = paired_lead(m, det[MODEL], det[bar])
    worst = min(r[MODEL]["ap"] - r[bar]["ap"] for r in run["per"].values())
    recall, rule_recall = run["all"][MODEL]["recall"], run["all"][bar]["recall"]
    return {"lead": lead, "lower": lower, "worst": worst, "recall": recall,
            "rule_recall": rule_recall,
            "ok": [lead >= SHIP_LEAD and lower > 0, worst >= -SHIP_BEHIND,
                   recall >= rule_recall]}


def ship_rows(run, ships):
    """The ship condition's parts against each rule as (what, measured, met)
    rows; ships: ship_condition of run per rule."""
    rows = []
    for bar in BARS:
        ship = ships[bar]
        rows += [(f"ship: a lead over the {bar} of at least {SHIP_LEAD} PR-AUC, its 95% "
                  "lower bound above zero (faults resampled)",
                  f"{ship['lead']:+.3f} (lower bound {ship['lower']:+.3f})", ship["ok"][0]),
                 (f"ship: no held-out fleet more than {SHIP_BEHIND} PR-AUC behind the {bar}",
                  f"the furthest {ship['worst']:+.3f} ("
                  + ", ".join(f"{r[MODEL]['ap']:.3f} vs {r[bar]['ap']:.3f}"
                              for r in run["per"].values()) + ")", ship["ok"][1]),
                 (f"ship: recall at 1% FPR of every failing GPU's windows at least the {bar}'s",
                  f"{ship['recall']:.3f} vs {ship['rule_recall']:.3f}", ship["ok"][2])]
    return rows


def _classes(out, run):
    m = run["m"]
    pos, first, _ = evaluate.fault_ids(m)
    faults = collections.Counter(m["cls"][pos][first])
    out("| class | faults | model | rule score | SRE rule | thresholds | model median lead |")
    out("|---|---|---|---|---|---|---|")
    for cls in sorted(faults):
        sel = (m["cls"] == cls) | ~pos
        counts, lstm_leads, n = [], [], 0
        for name in (MODEL, RULE, SRE, THRESHOLDS):
            leads, n = evaluate.lead_times(m[sel], run["all"][name]["alarm"][sel])
            counts.append(len(leads))
            if name == MODEL:
                lstm_leads = leads
        out(f"| {cls} | {n} | " + " | ".join(str(c) for c in counts) + f" | {_lead(lstm_leads)} |")
    out("")


# the monotone probe: each evidence input raised by one unit over a
# window's last PROBE_STEPS steps, on at most PROBE_WINDOWS windows
PROBE_STEPS, PROBE_WINDOWS = 5, 5000


def monotone_probe(predict, x):
    """Per evidence input: the share of windows whose risk falls when that
    input is raised by one (a count, or ln(1 + count) for the log ones) over
    the last PROBE_STEPS steps, the median and the lowest ratio of the new
    risk to the old. predict: raw windows -> risks."""
    import features
    x = x[np.random.default_rng(1).permutation(len(x))[:PROBE_WINDOWS]]
    base = predict(x)
    rows = []
    for name in features.EVIDENCE:
        y = x.copy()
        y[:, -PROBE_STEPS:, features.F[name]] += 1.0
        ratio = predict(y) / np.maximum(base, 1e-12)
        rows.append((name, float(np.mean(ratio < 1 - 1e-4)), float(np.median(ratio)),
                     float(ratio.min())))
    return len(x), rows


def _seeds(out, seeds, other, shipped_ships):
    """The shipped recipe trained with other seeds, each scored on the
    simulator it did not train on: how far a seed alone moves the figures
    and the ship condition. shipped_ships: the shipped model's ship
    conditions (the first seed's), already measured for the summary."""
    out("## Training seeds\n")
    out(f"The shipped recipe trained again with other seeds, on the same windows, each "
        f"tested on the same held-out fleets of {named(other)}. The first row is the "
        "shipped model.\n")
    out("| training seed | model PR-AUC | at the real rate | recall at 1% FPR (windows with a "
        "sign) | lead over the rule score (lower bound) | lead over the SRE rule (lower "
        "bound) | ship condition |")
    out("|---|---|---|---|---|---|---|")
    leads, aps = [], []
    for i, (seed, run) in enumerate(seeds):
        a = run["all"][MODEL]
        ships = shipped_ships if i == 0 else {bar: ship_condition(run, bar) for bar in BARS}
        met = all(all(v["ok"]) for v in ships.values())
        leads.append(ships[RULE]["lead"])
        aps.append(a["ap"])
        out(f"| {seed} | {a['ap']:.3f} | {a['ap_real']:.4f} | {a['recall_signed']:.3f} | "
            + " | ".join(f"{ships[b]['lead']:+.3f} ({ships[b]['lower']:+.3f})" for b in BARS)
            + f" | {'met' if met else 'not met'} |")
    reals = [run["all"][MODEL]["ap_real"] for _, run in seeds]
    out(f"\nOver the {len(seeds)} seeds the PR-AUC runs from {min(aps):.3f} to {max(aps):.3f} "
        f"(mean {np.mean(aps):.3f}), the lead over the rule score from {min(leads):+.3f} to "
        f"{max(leads):+.3f} (mean {np.mean(leads):+.3f}; the condition asks for {SHIP_LEAD}), "
        f"and the PR-AUC at the real rate, set by the few healthy windows at the top of the "
        f"ranking, from {min(reals):.4f} to {max(reals):.4f}. A training run that meets the "
        "condition is evidence for the model it made; for the recipe, only if the other seeds "
        "meet it too.\n")


def parts_section(out, run, bl):
    """What the LSTM and the rule score each bring to medic's risk, on one
    simulator's held-out windows."""
    r, det = run["all"], run["detectors"]
    over_alone = paired_lead(run["m"], det[MODEL], det[ALONE])
    over_rule = paired_lead(run["m"], det[MODEL], det[RULE])
    out("## What each part contributes\n")
    out("medic's risk joins the LSTM's logit and the rule score over its own inputs "
        "(`model/train/blend.py`, `model/rule_score.c`): sigmoid("
        f"{bl['logit_weight']:g} x logit + {bl['rule_weight']:g} x rule "
        f"{'+' if bl['bias'] >= 0 else '-'} {abs(bl['bias']):g}), the rule's share "
        f"{bl['share']:g} of the logit's once each is divided by its spread on the "
        "validation windows (chosen there, not on the held-out fleets), the whole "
        "Platt-scaled there. Each part alone and together, on the held-out fleets of "
        f"{named(run['tested'])}:\n")
    out("| risk | PR-AUC | at the real rate | recall at 1% FPR (every failing GPU's windows) |")
    out("|---|---|---|---|")
    for name in (MODEL, ALONE, RULE):
        out(f"| {name} | {r[name]['ap']:.3f} | {r[name]['ap_real']:.4f} | "
            f"{r[name]['recall']:.3f} |")
    out(f"\nPaired on the same windows, joining them adds {over_alone[0]:+.3f} PR-AUC to the "
        f"LSTM alone (one-sided 95% lower bound {over_alone[1]:+.3f}) and {over_rule[0]:+.3f} "
        f"to the rule alone ({over_rule[1]:+.3f}). The rule's part rises with every term it "
        "adds, so more of what it reads never lowers the risk whatever the LSTM does; each "
        "risk medic reports names the rule's terms that fired.\n")


def write(report_path, plot_path, model_path, meta, runs, tuned, calibration, monotone=None,
          seeds=None, blend=None):
    """runs: score_run results, the shipped model's first (trained on
    recipes.SHIPPED); tuned: (description, score_run) of the shipped model
    fine-tuned on the other simulator's fleet; calibration: the Platt
    parameters the shipped model's last layer holds; seeds: (training
    seed, score_run on the other simulator) of the shipped recipe, the
    shipped model's first."""
    lines = []
    out = lines.append
    shipped = recipes.SHIPPED
    other = next(s for s in recipes.SIMULATORS if s != shipped)
    unseen = next(r for r in runs if r["trained"] == shipped and r["tested"] == other)
    own = next(r for r in runs if r["trained"] == shipped and r["tested"] == shipped)
    u = unseen["all"]
    out("# Model evaluation: a risk that transfers to fleets the model never saw\n")
    out("Produced by `/usr/bin/python3 model/train/medic_train.py evaluate` from "
        f"`{'/'.join(model_path.split('/')[-2:])}`; every figure below comes from that run. "
        "**The data is synthetic**: fleets of raw dcgm-exporter scrapes from two simulators "
        "written apart, `model/train/simulate.py` (A) and `model/train/simulate_wear.py` (B), "
        "whose fault rates and mix come from published figures (`model/train/sources.py`) but "
        "whose telemetry before a fault is each simulator's assumption, not a measurement. "
        "They differ on purpose where real fleets differ (B: Xid codes held until the next "
        "one, lifetime counters with an older GPU's baselines, clocks set by power "
        "management, GPUs that always run hotter than their siblings and never fail, "
        "node-wide cooling hiccups, operator power caps, lost scrapes, other GPU models "
        "up to B200, other precursors and a share of faults with none). A model trained on "
        "one is tested on the other, which it never saw: that says whether it learned GPU "
        "failure or one simulator's habits. The features are computed from the scrapes as "
        "Prometheus computes them (`model/train/features.py`, checked against a real "
        "Prometheus by `tests/integration/test_features.py`).\n")

    ships = {bar: ship_condition(unseen, bar) for bar in BARS}
    strong = max(BARS, key=lambda k: u[k]["ap"])
    out("## Summary\n")
    out(f"The shipped model was trained on {named(shipped)}. On {named(other)}, which it "
        f"never saw, it ranks windows with a PR-AUC of {u[MODEL]['ap']:.3f} against "
        f"{u[RULE]['ap']:.3f} for the hand-written rule score over its own inputs, "
        f"{u[SRE]['ap']:.3f} for the rule an SRE would write from the raw DCGM counters "
        f"(`model/train/sre_rule.py`) and {u[THRESHOLDS]['ap']:.3f} for the static "
        f"thresholds, and at a 1% false-positive rate it recalls "
        f"{u[MODEL]['recall_signed']:.3f} of the windows that show a sign against "
        f"{u[RULE]['recall_signed']:.3f}, {u[SRE]['recall_signed']:.3f} and "
        f"{u[THRESHOLDS]['recall_signed']:.3f}. Paired on the same windows, its lead is "
        + " and ".join(f"{ships[k]['lead']:+.3f} PR-AUC over the {k} (one-sided 95% lower "
                       f"bound {ships[k]['lower']:+.3f})" for k in BARS)
        + f", the faults and the healthy GPUs (not the windows: each fault gives an hour of "
        f"them) resampled {DRAWS} times; it closes {closure(unseen, strong):.0%} of the "
        f"distance from the stronger of the two, the {strong}, to a detector that sees "
        "every sign. "
        + ("It meets the condition for shipping it (below)."
           if all(all(v["ok"]) for v in ships.values()) else
           "**It does not meet the condition for shipping it** (below). Until a model "
           "meets it, the shipped "
           "policies and `examples/` show the risk with each decision but do not act on it, "
           "and `medic check config` warns about a policy that waits for the built-in "
           "model's risk (`when.risk_at_least`).") + "\n")
    goals = ship_rows(unseen, ships)
    goals += [(f"PR-AUC over all of them at least {GOAL_AP}", f"{u[MODEL]['ap']:.3f}",
               u[MODEL]["ap"] >= GOAL_AP),
              (f"recall at 1% FPR of the windows with a sign at least {GOAL_RECALL_SIGNED}",
               f"{u[MODEL]['recall_signed']:.3f}", u[MODEL]["recall_signed"] >= GOAL_RECALL_SIGNED)]
    top = ceiling(unseen["m"])
    out(f"On these windows a detector that saw every sign and nothing else would reach a "
        f"PR-AUC of {top:.3f}: {100 * u[MODEL]['signed']:.0f}% of the positive windows of "
        "that simulator show a sign (its faults with none, and node faults that count every "
        "GPU of the node)" + (f", so a PR-AUC of {GOAL_AP} is out of any detector's reach "
                             "there; the model trained on that simulator itself (below) is "
                             "the nearer yardstick." if top < GOAL_AP else ".") + "\n")
    out("| goal (on the simulator it did not train on) | measured | met |")
    out("|---|---|---|")
    for goal, got, ok in goals:
        out(f"| {goal} | {got} | {'yes' if ok else '**no**'} |")
    out("")
    if seeds:
        _seeds(out, seeds, other, ships)

    if blend and ALONE in unseen["detectors"]:
        parts_section(out, unseen, blend)

    out("## The bar: the rule an SRE would write\n")
    out("`model/train/sre_rule.py` scores each GPU from dcgm-exporter's raw series as an "
        "operator's alerting rules would, looking back a day where the model looks back an "
        "hour, and adds the alerts that fire by severity (4 critical, 2 warning, 1 info), "
        "each growing with how far past its threshold the count is. Its alerts follow "
        "NVIDIA's guidance; where each fires is set as an SRE sets it from a fleet's "
        "dashboards, at about the 99.9th percentile of the healthy GPU-minutes of simulator "
        "A's training fleet (the simulator the shipped model trains on). It was fixed before "
        "it was scored on simulator B and not changed after:\n")
    out("| alert | severity | fires on |")
    out("|---|---|---|")
    for name, sev, promql, _ in sre_rule.RULES:
        out(f"| {name} | {sev:g} | `{promql}` |")
    out("")

    if monotone:
        n, rows = monotone
        out("## Monotone in the evidence\n")
        out(f"More evidence of a failing GPU must never lower its risk. On {n} held-out "
            f"windows of {named(other)}, each evidence input raised by one (one more "
            f"error, or one more e-fold of a count kept as its logarithm) over the last "
            f"{PROBE_STEPS} minutes, the shipped model's risk:\n")
        out("| input | windows whose risk falls | median new/old risk | lowest |")
        out("|---|---|---|---|")
        for name, falls, median, lowest in rows:
            out(f"| `{name}` | {falls:.1%} | {median:.2f} | {lowest:.2f} |")
        worst = max(rows, key=lambda r: r[1])
        out(f"\n{'**It is not monotone**' if worst[1] > 0.01 else 'It is monotone'}: "
            + (f"`{worst[0]}` lowers the risk of {worst[1]:.1%} of the windows. The "
               "trainer's monotone penalty (`fault_predictor.py`) punishes a logit that "
               "falls when one evidence count is raised in a training window; it is a "
               "penalty on the windows it sees, not a guarantee by construction. `medic "
               "model check --dataset` refuses a model that lowers the risk for more "
               "evidence in more than 1% of a fleet's windows.\n"
               if worst[1] > 0.01 else "no input lowers the risk of more than 1% of the "
               "windows.\n"))

    out("## Leave one simulator out\n")
    out("Each model is trained on one simulator's training fleets (early stopping and the "
        "operating threshold on its validation fleet) and tested on the held-out fleets of "
        "both. PR-AUC is the average precision over the windows as sampled (every minute of "
        "the hour before each fault, and one healthy window every 240 minutes per GPU). "
        "Recall at 1% FPR counts the windows that show a sign; the false-positive rate is "
        "taken at the real fault rate (healthy windows weighed back). A fault is warned of "
        "when a window in the hour before it crosses that threshold; its lead is the time "
        "from the first such window to the fault.\n")
    for run in runs:
        kind = "never seen" if run["trained"] != run["tested"] else "the same simulator"
        out(f"### Trained on {named(run['trained'])}, tested on {named(run['tested'])} "
            f"({kind})\n")
        run_table(out, run)

    out("## Per fault class, on the simulator each model did not train on (1% FPR)\n")
    for run in runs:
        if run["trained"] != run["tested"]:
            out(f"Trained on {named(run['trained'])}, tested on {named(run['tested'])}:\n")
            _classes(out, run)
    out("Faults that strike with nothing in the telemetry beforehand (the `unseen` class: "
        "NICs, cables, boards; and the share of each class a simulator makes sudden) "
        "cannot be warned of; they bound the recall.\n")

    a, b = calibration
    out("## Calibration\n")
    out("Policies compare `risk` with fixed numbers (`when.risk_at_least`), so the risk is "
        "a probability: that the GPU fails within the horizon, at the real fault rate of a "
        "fleet scored every minute. The network is trained with a focal loss, whose output "
        "is a score; Platt scaling fitted on the validation fleet (logit x "
        f"{a:.3f} {'+' if b >= 0 else '-'} {abs(b):.3f}) is folded into its last layer, so "
        "the file medic reads has the same shape"
        + ("; joined with the rule score (above), the whole is Platt-scaled again on the same "
           "fleet, and the risk below is the joined one" if blend else "")
        + ". Below, the windows of each held-out set weighed back to the real fault rate, by "
        "the risk the shipped model gives them:\n")
    for run in (own, unseen):
        rows, brier, base = reliability(run["m"], run["detectors"][MODEL])
        verdict = ("better than" if brier < base else "no better than")
        out(f"{named(run['tested'])}: Brier score {brier:.6f}, {verdict} always answering the "
            f"base rate ({base:.6f}).\n")
        out("| risk | share of windows | mean risk | observed rate of faults within the hour |")
        out("|---|---|---|---|")
        for label, share, mean, seen in rows:
            out(f"| {label} | {share:.5f} | {mean:.4f} | {seen:.4f} |")
        out("")
    out("Read the tables row by row: where the observed rate is below the mean risk, the "
        "model is overconfident there. The scaling is fitted on one fleet; fleets of other "
        "settings move it, and a fleet whose GPUs fail less often (simulator B's trace "
        "rate is a tenth of simulator A's) sees risks as many times too high. Its ranking "
        "is what transfers; its level is the right order of magnitude on the simulator it "
        "was fitted on, and a fleet's own data (`medic model dataset`, `retrain`) fits it "
        "to that fleet. A risk of 0.85 is rare: it asks for a GPU nearly certain to fail "
        "within the hour.\n")

    desc, trun = tuned
    out("## What a fleet's own data changes\n")
    out(f"The shipped model fine-tuned on {desc} (`medic model dataset` and `medic_train.py "
        "retrain` do the same on a real fleet), tested on the same held-out fleets of "
        f"{named(other)} as above:\n")
    run_table(out, trun)
    t_lead, t_lower = paired_lead(trun["m"], trun["detectors"][MODEL], unseen["detectors"][MODEL])
    r_lead, r_lower = paired_lead(trun["m"], trun["detectors"][MODEL], trun["detectors"][RULE])
    ft = recipes.FINE_TUNE
    out(f"Fine-tuning starts from the shipped network without the calibration folded into its "
        f"last layer, at a learning rate of {ft['lr']:g} for at most {ft['epochs']} epochs, "
        "keeps the epoch with the lowest loss on the validation fleet (the model it started "
        "from unless one does better) and is calibrated again there. Paired on the same "
        f"windows, the fine-tuned model's lead is {t_lead:+.3f} PR-AUC over the shipped model "
        f"(one-sided 95% lower bound {t_lower:+.3f}) and {r_lead:+.3f} over the rule score "
        f"({r_lower:+.3f}); at the real fault rate its PR-AUC is "
        f"{trun['all'][MODEL]['ap_real']:.4f} against the shipped model's "
        f"{u[MODEL]['ap_real']:.4f}. `medic model check` makes the same comparison on a "
        "fleet's later weeks before a retrained model replaces the one in use.\n")

    out("## Settings\n")
    for sim, spec in recipes.SIMULATORS.items():
        out(f"{named(sim)}, faults {spec['train']['accel']}x the cited rate "
            f"({spec['held_out']['accel']}x in the held-out fleets):\n")
        out("- training: " + "; ".join(recipes.setting(f) for f in spec["train"]["fleets"]))
        out("- validation: " + "; ".join(recipes.setting(f)
                                         for f in spec["validation"]["fleets"]))
        out("- held out: " + "; ".join(recipes.setting(f) for f in spec["held_out"]["fleets"]))
        out("")
    out(f"8 GPUs per server; features on a 60 s grid, windows of {windows.WINDOW} steps. A "
        f"window is positive when a hardware fault takes its GPU out within "
        f"{windows.HORIZON} minutes (a GPU fault: that GPU; a node fault: all eight).\n")

    out("## Where the simulators' figures come from\n")
    mix_a, mix_b = sources.fault_mix(), simulate_wear.fault_mix()
    out(f"- Simulator A: a server MTBF of {sources.SERVER_MTBF_HOURS:,.0f} hours (the source "
        f"documents' 8xA100 figure); memory {mix_a['gpu_memory']:.0%} and power supply "
        f"{mix_a['power_supply']:.0%} of faults (source documents), the rest split as the "
        "InfiniteHBD trace splits its other hardware faults.")
    out(f"- Simulator B: the InfiniteHBD trace alone: one hardware fault per "
        f"{sources.infinitehbd_server_mtbf_hours():,.0f} server-hours, and its own mix: "
        + ", ".join(f"{k} {v:.1%}" for k, v in mix_b.items()) + "; GPU models from the "
        "vendors' datasheets (board power, maximum SM clock).")
    out("- Both: repair times drawn from the InfiniteHBD trace's hardware faults.")
    out("- Everything else (how each class shows beforehand, the share that is sudden, the "
        "healthy fleet's load, benign events, exporter gaps) is an assumption, marked in "
        "each simulator's source.\n")
    out("## Precision-recall curves\n")
    out("![precision-recall curves](model-evaluation-pr.png)\n")
    out("## What this does not show\n")
    out("- A real fleet's telemetry: two simulators that disagree are a harder test than "
        "one, not a measurement.")
    out("- Both rules were written once: the rule score from what the failure modes show, "
        "over the model's inputs; the SRE rule from NVIDIA's guidance, over the raw counters "
        "(a day of them, where the model sees an hour), its thresholds at simulator A's "
        "healthy baseline. Neither was tuned on simulator B; rules tuned on a real fleet "
        "would do better than here, and so would a model retrained on one (`medic model "
        "dataset`, docs/model.md).")
    sim_b = named(other)[:1].upper() + named(other)[1:]
    out(f"- {sim_b} was written knowing the model's features and was looked at "
        "while they were chosen: it is a development set more than a held-out one. "
        "Simulator C (`model/train/simulate_hazard.py`, written from the Llama 3 report "
        "and dcgm-exporter's conventions, not from the features) is kept for the final "
        "figures: `medic_train.py final` scores the chosen model on it once "
        "([model-final.md](model-final.md)).")
    out("- The lower bounds resample the faults of one run's held-out fleets; fleets drawn "
        "again would add their own spread" + (", as the training seeds (above) do" if seeds
                                              else ", and so would other training seeds")
        + ".\n")
    out("## Reproducing\n")
    out("`model/train/regenerate.sh` trains the shipped model again on one core with "
        "Debian's torch (reference BLAS, one thread) and compares it with the committed "
        "file; `/usr/bin/python3 model/train/medic_train.py evaluate` rewrites this page "
        "and its plot (it trains the model of the other simulator, the fine-tuned one and the "
        "shipped recipe with the other seeds in the run).\n")
    out("## Model\n")
    out("| key | value |")
    out("|---|---|")
    for k in ("input_dim", "hidden_dim", "window", "step", "horizon", "seed", "epochs",
              "threshold", "calibration", "blend", "torch_version"):
        if k in meta:
            out(f"| `{k}` | {meta[k]} |")
    out(f"\n`description`: {meta.get('description', '')}\n")
    with open(report_path, "w") as f:
        f.write("\n".join(lines))
    _plot(plot_path, own, unseen)


def _plot(path, own, unseen):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), dpi=100, sharey=True)
    for ax, run in zip(axes, (own, unseen)):
        y = run["m"]["label"].astype(int)
        for i, (name, s) in enumerate(run["detectors"].items()):
            prec, rec, _, _, ap = evaluate.pr_curve(y, np.ones(len(y)), s.astype(np.float64))
            ax.step(rec, prec, where="pre", color=f"C{i}", label=f"{name}: PR-AUC {ap:.3f}")
        ax.axhline(y.mean(), color="grey", lw=0.8, ls=":", label="no skill (base rate)")
        ax.set_xlabel("recall (windows in the hour before a fault)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
        ax.set_title(f"shipped model on {named(run['tested'])}", fontsize=9)
    axes[0].set_ylabel("precision (windows as sampled)")
    fig.tight_layout()
    fig.savefig(path)
