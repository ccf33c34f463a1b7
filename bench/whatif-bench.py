#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How `medic what-if` grows: the bundled InfiniteHBD trace (400 servers,
348 days, 584 faults) through examples/cluster-1000 as shipped (1,000
nodes, 63 racks), then the same trace ten times over (4,000 servers,
5,840 faults, the copies' node ids made distinct) through the same
configuration with an inventory ten times larger (10,000 nodes, 625 racks
of 16), and the trace once more with the scheduler's tick ten times finer
(6s instead of 1m). Each case runs --runs times; the median wall time and
the time per fault are printed, with the faults acted on (at ten times
the faults the same caps hold more of them back: 8 repairs in flight are
not ten times 8).

usage: bench/whatif-bench.py [--medic PATH] [--runs 3]"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
from lab import cluster_example  # noqa: E402

TRACE = os.path.join(TOP, "tests", "data", "infinitehbd-trace", "fault_trace.json")
MAPPING = os.path.join(TOP, "examples", "what-if", "infinitehbd.yaml")
START = "2025-01-06T00:00:00Z"


def run(medic, config, trace, mapping, runs, tick="1m"):
    times, report = [], None
    for _ in range(runs):
        t0 = time.monotonic()
        out = subprocess.run([medic, "what-if", "--config", config, "--trace", trace,
                              "--mapping", mapping, "--start", START, "--tick", tick,
                              "--format", "json"], capture_output=True, text=True, timeout=600)
        times.append(time.monotonic() - t0)
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
    return statistics.median(times), report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--medic", default=os.path.join(TOP, "build", "release", "medic"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = cluster_example(os.path.join(tmp, "cluster"))
        here = os.path.dirname(config)
        # ten times the fleet: 625 racks of 16, in the example's form
        with open(os.path.join(here, "inventory-10x.yaml"), "w") as f:
            f.write("nodes:\n")
            for r in range(625):
                first, last = r * 16 + 1, r * 16 + 16
                f.write(f"  - {{ name: 'gpu-[{first:05d}-{last:05d}]', "
                        f"labels: {{ rack: r{r + 1:03d}, partition: train }} }}\n")
        with open(config) as f:
            text = f.read().replace("file: inventory.yaml", "file: inventory-10x.yaml")
        big = os.path.join(here, "medic-10x.yaml")
        with open(big, "w") as f:
            f.write(text)
        # ten copies of the trace on distinct servers
        with open(TRACE) as f:
            events = json.load(f)
        copies = [dict(e, node_id=f"{e['node_id']}-{k}") for k in range(10) for e in events]
        trace10 = os.path.join(tmp, "trace-10x.json")
        with open(trace10, "w") as f:
            json.dump(copies, f)
        with open(MAPPING) as f:
            mapping = f.read().replace("trace_nodes: 400", "trace_nodes: 4000")
        mapping10 = os.path.join(tmp, "mapping-10x.yaml")
        with open(mapping10, "w") as f:
            f.write(mapping)
        cases = [("1x: 584 faults, 1,000 nodes", config, TRACE, MAPPING, "1m"),
                 ("10x: 5,840 faults, 10,000 nodes", big, trace10, mapping10, "1m"),
                 ("1x, tick 6s", config, TRACE, MAPPING, "6s")]
        print(f"medic what-if, {args.runs} runs each, median wall time ({args.medic})")
        print(f"{'case':36} {'faults':>7} {'acted':>6} {'wall s':>8} {'us/fault':>9}")
        for name, cfg, trace, mp, tick in cases:
            wall, r = run(args.medic, cfg, trace, mp, args.runs, tick)
            print(f"{name:36} {r['faults']:7d} {r['all']['acted']:6d} {wall:8.3f} "
                  f"{wall / r['faults'] * 1e6:9.0f}")


if __name__ == "__main__":
    main()
