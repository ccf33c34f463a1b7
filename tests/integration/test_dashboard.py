#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Grafana dashboard medic ships (packaging/grafana-dashboard.json):
every PromQL expression parses under Debian's promtool, and names only
metrics a running medic serve exposes, with only labels those metrics
carry."""

import json
import os
import re
import subprocess

from lab import Medic, Suite, require_binary

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(TOP, "packaging", "grafana-dashboard.json")
# Grafana's own variables, as a query would have them filled in
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "6h"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
                "or", "unless", "offset"}


def expressions():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = []
    for panel in dash["panels"]:
        assert panel["targets"], panel["title"]
        for t in panel["targets"]:
            e = t["expr"]
            for var, value in GRAFANA_VARS.items():
                e = e.replace(var, value)
            assert "$" not in e, (panel["title"], e)
            exprs.append((panel["title"], e))
    return dash, exprs


def exposed(medic):
    """Metric families on /metrics: name -> (type, the label names of its samples)."""
    status, _, body = medic.get("/metrics")
    assert status == 200
    families = {}
    for line in body.decode().splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            families[m.group(1)] = (m.group(2), set())
            continue
        m = re.match(r"([a-z_0-9]+)(?:\{(.*)\})? ", line)
        if m and not line.startswith("#"):
            name = m.group(1)
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            family = families.get(name) or families.get(base)
            if family is not None and m.group(2):
                family[1].update(re.findall(r'([a-z_]+)="', m.group(2)))
    names = {}
    for name, (kind, labels) in families.items():
        names[name] = labels
        if kind == "histogram":
            names[name + "_bucket"] = labels | {"le"}
            names[name + "_sum"] = names[name + "_count"] = labels
    return names


def test_dashboard_matches_medic(suite):
    require_binary("promtool")
    medic = Medic(suite.medic, suite.subdir("dashboard"),
                  "prometheus: { url: 'http://127.0.0.1:1', timeout: 1s }\n"
                  "model: { fleet_interval: 1s }\n")
    medic.start()
    suite.on_exit(medic.stop)
    names = exposed(medic)
    assert "medic_gpu_failure_risk" in names and "medic_webhook_duration_seconds_bucket" in names
    # the webhook histogram counts each answered webhook
    assert medic.metric("medic_webhook_duration_seconds_count") == 0
    with open(os.path.join(TOP, "tests/fixtures/alertmanager/am-webhook-multi-alert.json")) as f:
        assert medic.post("/webhook", f.read())[0] == 200
    assert medic.metric("medic_webhook_duration_seconds_count") == 1
    assert medic.metric('medic_webhook_duration_seconds_bucket{le="+Inf"}') == 1
    assert 0 < medic.metric("medic_webhook_duration_seconds_sum") < 5
    dash, exprs = expressions()
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    used = set()
    for title, e in exprs:
        for metric in set(re.findall(r"\b(medic_[a-z0-9_]+)", e)):
            assert metric in names, f"{title}: {metric} is not on medic's /metrics"
            used.add(metric)
        # the labels a selector, a grouping or a legend names must be the metric's
        for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", e) + \
                re.findall(r"\{([^}]*)\}", e):
            labels = set(re.findall(r"([a-z_]+)\s*(?:=|!=|=~|!~|,|$)", group)) - PROMQL_WORDS
            metrics = set(re.findall(r"\b(medic_[a-z0-9_]+)", e))
            known = set().union(*(names[m] for m in metrics)) if metrics else set()
            assert labels <= known, f"{title}: labels {labels - known} not on {metrics}"
    # the panels the dashboard is for
    for metric in ("medic_notifications_total", "medic_webhook_duration_seconds_bucket",
                   "medic_decisions_total", "medic_actions_total", "medic_disrupted_nodes",
                   "medic_safety_max_disruptive_in_flight", "medic_safety_max_disrupted_nodes",
                   "medic_storm_active", "medic_gpu_failure_risk"):
        assert metric in used, f"the dashboard shows no {metric}"
    # promtool parses each expression (as a recording rule)
    rules = os.path.join(suite.workdir, "dashboard-rules.yml")
    with open(rules, "w") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, (_, e) in enumerate(exprs):
            f.write(f"      - record: dashboard:expr_{i}\n        expr: {json.dumps(e)}\n")
    out = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    print(f"  {len(exprs)} expressions in {len(dash['panels'])} panels parse under promtool "
          f"and name {len(used)} of medic's metrics")


if __name__ == "__main__":
    Suite(__doc__).run([test_dashboard_matches_medic])
