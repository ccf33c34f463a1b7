#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""medic what-if over the bundled InfiniteHBD trace (400 GPU servers, 348
days) through examples/cluster-1000 with examples/what-if/infinitehbd.yaml:
every fault start is accounted for (a fault, a repeat or unmapped, counted
here from the trace itself), every fault has one fate, no cap is ever
exceeded, a tighter fleet cap holds faults back that the example acts on
(paired, same trace), the report and chart in docs/what-if.md are what
medic prints today, and bad input gets a clear error and exit status.

usage: check_trace.py MEDIC SOURCE_DIR"""

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lab import cluster_example  # noqa: E402

START = "2025-01-06T00:00:00Z"


def run(medic, *args, status=0):
    out = subprocess.run([medic, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == status, f"medic {' '.join(args)}: {out.returncode}\n" \
        f"{out.stdout[-2000:]}{out.stderr[-2000:]}"
    return out


def starts_in(trace):
    """Fault starts, and those of a fault already open on the node."""
    with open(trace) as f:
        events = json.load(f)
    events.sort(key=lambda e: e["event_time"])  # stable: the file's order among equals
    open_, starts, repeats = set(), 0, 0
    for e in events:
        ft = e["fault_type"]
        key = (e["node_id"], ft["Class"], ft["Desc"])
        if e["event_type"] == "fault_start":
            starts += 1
            repeats += key in open_
            open_.add(key)
        else:
            open_.discard(key)
    return starts, repeats, len({e["node_id"] for e in events})


def check_report(r, trace):
    starts, repeats, named = starts_in(trace)
    assert r["faults"] + r["repeats"] + r["unmapped"] == starts, (r["faults"], starts)
    assert r["repeats"] == repeats and r["named"] == named and r["nodes"] == 400, r
    fates = ["acted", "covered", "held", "pending", "notify_only", "no_policy", "unsent",
             "nothing"]
    for c in r["classes"] + [r["all"]]:
        assert sum(c[f] for f in fates) == c["faults"], c
        assert sum(c["held_by"].values()) == c["held"], c
    assert sum(c["faults"] for c in r["classes"]) == r["all"]["faults"]
    for f in fates:
        assert sum(c[f] for c in r["classes"]) == r["all"][f], f
    # Alertmanager's group_wait comes before any action
    assert r["all"]["to_action_s"]["p50"] >= 30, r["all"]["to_action_s"]
    for cap in r["caps"]:
        assert cap["peak"] <= cap["limit"], cap
    in_flight, fraction = r["caps"][0], r["caps"][1]
    assert in_flight["cap"] == "max_disruptive_in_flight", r["caps"]
    for day, disrupted, quarantined in r["timeline"]:
        assert 0 <= day <= r["days"]
        assert disrupted <= fraction["limit"] and disrupted - quarantined <= in_flight["limit"]
    assert r["disruptions"] == sum(n for a, n in r["actions"].items()
                                   if a in ("drain", "ipmi_power_cycle", "power_limit",
                                            "gpu_reset", "slurm_reboot"))


def main():
    medic, top = sys.argv[1], sys.argv[2]
    trace = os.path.join(top, "tests", "data", "infinitehbd-trace", "fault_trace.json")
    mapping = os.path.join(top, "examples", "what-if", "infinitehbd.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        config = cluster_example(os.path.join(tmp, "cluster"))
        common = ["what-if", "--config", config, "--trace", trace, "--mapping", mapping,
                  "--start", START]
        chart = os.path.join(tmp, "what-if.svg")
        r = json.loads(run(medic, *common, "--format", "json").stdout)
        check_report(r, trace)
        assert r["all"]["acted"] > 50 and r["disruptions"] > 0, r["all"]
        text = run(medic, *common, "--chart", chart).stdout

        # the docs show what medic prints today
        with open(os.path.join(top, "docs", "what-if.md")) as f:
            doc = f.read()
        block = re.search(r"<!-- report: begin -->\n```text\n(.*?)```\n<!-- report: end -->",
                          doc, re.S)
        assert block, "docs/what-if.md has no report block"
        assert block.group(1) == text, "docs/what-if.md's report is not what medic prints:\n" + text
        with open(chart) as f:
            svg = f.read()
        with open(os.path.join(top, "docs", "img", "what-if-infinitehbd.svg")) as f:
            assert f.read() == svg, "docs/img/what-if-infinitehbd.svg is not what medic draws"
        root = ET.fromstring(svg)
        labels = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
        assert "max_disrupted_fraction: 20" in labels and \
            "max_disruptive_in_flight (repairs): 8" in labels, labels

        # paired, on the same trace: one repair at a time holds faults back
        with open(config) as f:
            tight = f.read().replace("max_disruptive_in_flight: 8", "max_disruptive_in_flight: 1")
        assert "max_disruptive_in_flight: 1" in tight
        tight_config = os.path.join(os.path.dirname(config), "tight.yaml")
        with open(tight_config, "w") as f:
            f.write(tight)
        common[2] = tight_config
        t = json.loads(run(medic, *common, "--format", "json").stdout)
        check_report(t, trace)
        assert t["caps"][0]["limit"] == 1 and t["caps"][0]["peak"] == 1, t["caps"]
        assert t["all"]["held_by"].get("fleet_cap", 0) > 0, t["all"]
        assert t["all"]["acted"] < r["all"]["acted"], (t["all"], r["all"])
        assert t["faults"] == r["faults"]

        # bad input: a clear error, exit status 1 (2 for the command line)
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('[{"node_id": "a", "event_time": "soon"}]')
        out = run(medic, "what-if", "--config", config, "--trace", bad, "--mapping", mapping,
                  status=1)
        assert f"medic what-if: {bad}: event 0: \"event_time\"" in out.stderr, out.stderr
        with open(bad, "w") as f:
            f.write("rules:\n  - { class: GPU }\n")
        out = run(medic, "what-if", "--config", config, "--trace", trace, "--mapping", bad,
                  status=1)
        assert f"{bad}:2:5: a rule needs an alertname" in out.stderr, out.stderr
        out = run(medic, "what-if", "--config", config, status=2)
        assert "--config, --trace and --mapping are required" in out.stderr, out.stderr
        here = os.path.dirname(config)
        with open(config) as f:
            text = f.read().replace("file: inventory.yaml", "file: small-inventory.yaml")
        with open(os.path.join(here, "small.yaml"), "w") as f:
            f.write(text)
        with open(os.path.join(here, "small-inventory.yaml"), "w") as f:
            f.write("nodes: [ { name: 'gpu-[0001-0100]' } ]\n")
        out = run(medic, "what-if", "--config", os.path.join(here, "small.yaml"),
                  "--trace", trace, "--mapping", mapping, status=1)
        assert "the trace covers 400 nodes and the inventory has 100" in out.stderr, out.stderr
    print(f"what-if: {r['faults']} faults, {r['all']['acted']} acted on, "
          f"{r['disruptions']} disruptions; with one repair at a time "
          f"{t['all']['acted']} acted on, {t['all']['held_by'].get('fleet_cap', 0)} held by "
          "the fleet cap")


if __name__ == "__main__":
    main()
