#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Draws how medic's cost grows from the figures scale-bench.py and
fleet-bench.py wrote with --json: webhook notifications/s and p99 against
open alerts (nginx and the Flask receiver of the same run as references),
and fleet scoring cycle and alert -> decision p99 against fleet size.

usage: bench/plot-scale.py SCALE.json FLEET.json OUT.png
Needs python3-matplotlib."""

import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def ms(text):
    """wrk's latency ("3.67ms", "435.00us", "1.02s") in milliseconds."""
    v, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", str(text)).groups()
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    scale = json.load(open(sys.argv[1]))
    fleet = json.load(open(sys.argv[2]))
    fig, ((a, b), (c, d)) = plt.subplots(2, 2, figsize=(11, 7.5))
    for label in dict.fromkeys(r["label"] for r in scale["throughput"]):
        rows = sorted((r for r in scale["throughput"] if r["label"] == label),
                      key=lambda r: r["open_alerts"])
        x = [r["open_alerts"] for r in rows]
        a.plot(x, [r["rps"] for r in rows], "o-", label=f"medic ({label})")
        b.plot(x, [ms(r["p99"]) for r in rows], "o-", label=f"medic ({label})")
    for name, key, style in (("nginx return 200, 1 worker", "nginx", "--"),
                             ("Flask + gunicorn + SQLite", "flask", ":")):
        if key in scale:
            a.axhline(scale[key]["rps"], linestyle=style, color="grey", label=name)
            b.axhline(ms(scale[key]["p99"]), linestyle=style, color="grey", label=name)
    a.set(title="webhook throughput (durable, built-in policies)", xlabel="open alerts",
          ylabel="notifications/s", yscale="log")
    b.set(title="webhook p99 latency", xlabel="open alerts", ylabel="ms", yscale="log")
    colours = {}
    for i, label in enumerate(dict.fromkeys(r["label"] for r in fleet["cycles"])):
        rows = sorted((r for r in fleet["cycles"] if r["label"] == label), key=lambda r: r["gpus"])
        x = [r["gpus"] for r in rows]
        colours[label] = f"C{i}"
        c.plot(x, [r["median_s"] for r in rows], "o-", color=colours[label],
               label=f"medic ({label})")
    # Prometheus answering what most cycles ask (the same in every build's
    # run): the last step, or older runs' figures
    floor = "prometheus_alone_1_step_s"
    rows = {r["gpus"]: r for r in fleet["cycles"]}
    if all(floor in r for r in rows.values()):
        c.plot(sorted(rows), [rows[g][floor] for g in sorted(rows)], "o:", color="grey",
               label="Prometheus alone, the last step of every GPU")
    else:
        c.plot(sorted(rows), [rows[g]["prometheus_alone_s"] for g in sorted(rows)], "o:",
               color="grey", label="Prometheus alone, whole windows")
    for label in dict.fromkeys(r["label"] for r in fleet["latency"]):
        rows = sorted((r for r in fleet["latency"] if r["label"] == label), key=lambda r: r["gpus"])
        colour = colours.get(label)
        d.plot([r["gpus"] for r in rows], [max(float(r["p99"]), 0.5) for r in rows], "o-",
               color=colour, label=f"medic ({label}), p99")
        # the bench gives whole milliseconds: under 1 ms is drawn at the axis' floor
        d.plot([r["gpus"] for r in rows], [max(float(r["p50"]), 0.5) for r in rows], "o--",
               color=colour, label=f"medic ({label}), p50 (under 1 ms at 0.5)")
    c.set(title="whole-fleet risk scoring cycle", xlabel="GPUs in Prometheus", ylabel="s",
          xscale="log")
    d.set(title="alert -> decision, 100 alerts/s, across a step boundary",
          xlabel="GPUs in Prometheus", ylabel="ms", xscale="log", yscale="log", ylim=(0.5, None))
    gpus = sorted({r["gpus"] for r in fleet["cycles"]})
    for ax in (c, d):
        ax.set_xticks(gpus, [f"{g:,}" for g in gpus])
        ax.minorticks_off()
    for ax in (a, b, c, d):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"How medic's cost grows ({scale['cpus']} vCPUs, {scale['date'][:10]})")
    fig.tight_layout()
    fig.savefig(sys.argv[3], dpi=100)


if __name__ == "__main__":
    main()
