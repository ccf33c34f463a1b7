#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Fleet risk scoring and live alert scoring against a real Prometheus.

A Prometheus (Debian's) is backfilled with `promtool tsdb
create-blocks-from openmetrics` with the last 95 minutes (the window and
the hour its features look back over) of the eleven DCGM series the
built-in model reads, for N nodes x 8 GPUs, one sample a minute. medic
runs on its built-in defaults (policies, model, dry-run, durable SQLite,
fleet scoring every 30 s) plus what the scenario needs: prometheus { url }.
--fleet-interval 1s samples cycles faster (a cycle's work does not depend
on the interval).

- fleet: the cycle time medic reports (medic_fleet_scoring_duration_seconds,
  median and worst of the cycles seen), the query_range requests per cycle,
  and the GPUs scored, for each fleet size; beside it, in the same run,
  the time Prometheus itself takes to answer the same whole-fleet queries
  (one per model feature, four at a time, from Python): the floor any
  client pays.
- rss: at the largest fleet, 10,000 open alerts are added (Xid 79 on
  distinct nodes Prometheus does not know, 100 per notification: the
  engine asks Prometheus for their risk, finds none and holds them as open,
  unmatched alerts) and medic's resident memory is read once all are
  decided and two cycles have run since.
- latency: at every fleet size, single-alert notifications (a GPU Xid 79 on a node
  Prometheus knows, so the engine scores the GPU from Prometheus) at a
  steady rate, across a step boundary of the model's window (a quarter of
  the way in); alert -> decision is decisions.created_at minus the
  notification's received_at, both written by medic (milliseconds).

usage: bench/fleet-bench.py [--medic PATH --label TEXT]... [--nodes 64,256,1024]
                            [--cycles 5] [--rate 100] [--seconds 20] [--skip rss,latency]
                            [--fleet-interval DURATION] [--json PATH]
Several --medic (with as many --label) compare builds in one run."""

import argparse
import concurrent.futures
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from benchlib import Medic, free_port, notification, post_all, wait_until, xid_alert

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what the built-in model reads (model/train/features.py SERIES)
GAUGES = ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_POWER_USAGE",
          "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_XID_ERRORS"]
COUNTERS = ["DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"]


def node_name(i):
    return f"gpu-node-{i:05d}"


def openmetrics(path, nodes, end, minutes=95):
    """One sample a minute of every series, ending at end: the window and
    the hour its features look back over."""
    times = [end - 60 * k for k in range(minutes, -1, -1)]
    with open(path, "w") as f:
        for m in GAUGES + COUNTERS:
            f.write(f"# TYPE {m} gauge\n")
            for n in range(nodes):
                node = node_name(n)
                for g in range(8):
                    seed = (n * 8 + g) % 97
                    labels = f'{{Hostname="{node}",gpu="{g}"}}'
                    for k, t in enumerate(times):
                        if m == "DCGM_FI_DEV_GPU_TEMP":
                            v = 55 + 8 * math.sin(k / 7 + seed)
                        elif m == "DCGM_FI_DEV_MEMORY_TEMP":
                            v = 60 + 5 * math.cos(k / 9 + seed)
                        elif m == "DCGM_FI_DEV_POWER_USAGE":
                            v = 250 + 40 * math.sin(k / 5 + seed)
                        elif m == "DCGM_FI_DEV_SM_CLOCK":
                            v = 1410 - seed
                        elif m == "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS":
                            v = 4 if k % 10 else 0
                        elif m == "DCGM_FI_DEV_XID_ERRORS":
                            v = 0
                        else:  # counters: a few errors now and then
                            v = (k * seed) // 400
                        f.write(f"{m}{labels} {v:.2f} {t}\n")
        f.write("# EOF\n")


class Prometheus:
    def __init__(self, work, nodes):
        self.dir = os.path.join(work, f"prom-{nodes}")
        os.makedirs(os.path.join(self.dir, "data"))
        om = os.path.join(self.dir, "history.om")
        end = int(time.time()) - 10
        openmetrics(om, nodes, end)
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", om,
                        os.path.join(self.dir, "data")], check=True, capture_output=True)
        os.unlink(om)
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            f.write("global: { scrape_interval: 15s }\n")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.dir}/prometheus.yml",
             f"--storage.tsdb.path={self.dir}/data", f"--web.listen-address=127.0.0.1:{self.port}",
             "--storage.tsdb.retention.time=30d"], stdout=self.log, stderr=self.log)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                body = urllib.request.urlopen(
                    self.url + "/api/v1/query?query=count(DCGM_FI_DEV_GPU_TEMP)", timeout=5).read()
                result = json.loads(body)["data"]["result"]
                if result and int(result[0]["value"][1]) == nodes * 8:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit("prometheus did not load the history: see " + self.log.name)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def model_queries(binary):
    """The built-in model's feature queries for the whole fleet."""
    out = subprocess.run([binary, "model", "info"], capture_output=True, text=True, check=True)
    line = re.search(r"^  features: (.*)$", out.stdout, re.M).group(1)
    return [f["query"].replace('="{{node}}"', '=~".+"').replace('="{{gpu}}"', '=~".+"')
            for f in json.loads(line)]


def prometheus_floor(url, queries, repeats=5, steps=30):
    """Seconds Prometheus takes to answer the whole-fleet queries over the
    last steps steps, four at a time."""
    end = int(time.time()) // 60 * 60
    start = end - (steps - 1) * 60

    def one(q):
        qs = urllib.parse.urlencode({"query": q, "start": start, "end": end, "step": 60})
        return len(urllib.request.urlopen(f"{url}/api/v1/query_range?{qs}", timeout=60).read())

    times = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for _ in range(repeats):
            t0 = time.perf_counter()
            sizes = list(pool.map(one, queries))
            times.append(time.perf_counter() - t0)
    return statistics.median(times), sum(sizes)


def prometheus_requests(url):
    """API requests Prometheus has answered (its own counter)."""
    body = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return sum(float(m.group(2)) for m in re.finditer(
        r'^prometheus_http_requests_total\{[^}]*handler="(/api/v1/[^"]*)"[^}]*\} (\S+)$', body,
        re.M))


def cycles(m, count, prometheus_url):
    """Durations of count complete cycles after the first: as medic reports
    them or, for a build without that metric, the time between cycles (an
    upper bound: a cycle starts at most once a second); the first cycle's
    (whole windows) when it is seen; the requests per cycle as Prometheus
    counts them."""
    seen, durations, at, asked, first = None, [], None, None, None
    deadline = time.time() + 60 + 70 * count
    while len(durations) < count and time.time() < deadline:
        x = m.metrics()
        c = x.get("medic_fleet_scoring_cycles_total", 0)
        if seen is not None and c > seen:
            durations.append(x.get("medic_fleet_scoring_duration_seconds",
                                   time.monotonic() - at))
        if c > (seen or 0):
            if seen is None:
                asked = (prometheus_requests(prometheus_url), c)
                if c == 1:
                    first = x.get("medic_fleet_scoring_duration_seconds")
            seen, at = c, time.monotonic()
        # /metrics with a risk gauge per GPU costs medic a few ms to render:
        # asked for 50 times a second it would take CPU from the cycle it
        # measures (Prometheus scrapes it every 15 s or so)
        time.sleep(0.25)
    x = m.metrics()
    requests = (prometheus_requests(prometheus_url) - asked[0]) / max(
        x["medic_fleet_scoring_cycles_total"] - asked[1], 1)
    scored = sum(1 for k in x if k.startswith("medic_gpu_failure_risk{"))
    return {"durations": durations, "scored": scored, "requests_per_cycle": requests,
            "measured": "medic_fleet_scoring_duration_seconds" in x, "first": first,
            "full_fetches": x.get("medic_fleet_scoring_full_fetches_total")}


def post(port, body):
    return 200 if post_all(port, [body]) == 0 else 500


def open_alerts(m, count):
    bodies = [notification(f"open-{i}", [xid_alert(f"open-node-{i + k:05d}", 0)
                                         for k in range(100)]) for i in range(0, count, 100)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert all(s == 200 for s in pool.map(lambda b: post(m.port, b), bodies))
    # every alert decided (most are no_match: their nodes have no telemetry,
    # so their risk is unknown) and held as open alerts in the engine's state
    wait_until("the open alerts decided", lambda: sum(
        v for k, v in m.metrics().items() if k.startswith("medic_decisions_total{")) >= count,
        600)


def latency(m, nodes, rate, seconds):
    """Single-alert notifications at rate per second, each on a node (and
    GPU) Prometheus knows; alert -> decision from the audit log."""
    total = int(rate * seconds)
    # every run crosses a step of the model (a minute) a quarter of the way
    # in: until the fleet's cycle for the new step is done, alerts fetch
    # their own windows, which a run that misses the boundary never shows
    while (time.time() + seconds / 4) % 60 > 1:
        time.sleep(0.1)
    t0 = time.perf_counter()
    late = 0
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = []
        for i in range(total):
            due = t0 + i / rate
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            else:
                late += 1
            body = notification(f"live-{i}", [xid_alert(node_name(i % nodes), i // nodes % 8)])
            futures.append(pool.submit(post, m.port, body))
        assert all(f.result() == 200 for f in futures)
    con = sqlite3.connect(f"file:{m.db}?mode=ro", uri=True, timeout=30)

    def decided():
        n = con.execute("SELECT count(*) FROM decisions d JOIN notifications n ON "
                        "n.id = d.notification_id WHERE n.group_key LIKE 'live-%'").fetchone()[0]
        return n >= total

    wait_until("every live alert decided", decided, 600)
    rows = con.execute("SELECT d.created_at - n.received_at, d.risk IS NULL FROM decisions d "
                       "JOIN notifications n ON n.id = d.notification_id "
                       "WHERE n.group_key LIKE 'live-%'").fetchall()
    con.close()
    ms = sorted(r[0] for r in rows)
    return {"count": len(ms), "p50": ms[len(ms) // 2], "p99": ms[int(len(ms) * 0.99) - 1],
            "max": ms[-1], "unknown_risk": sum(r[1] for r in rows), "late_sends": late}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--medic", action="append")
    ap.add_argument("--label", action="append")
    ap.add_argument("--nodes", default="64,256,1024")
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--skip", default="")
    ap.add_argument("--fleet-interval", help="model.fleet_interval (default: medic's own)")
    ap.add_argument("--json", help="also write the figures to this file (bench/plot-scale.py)")
    args = ap.parse_args()
    out = {"cpus": os.cpu_count(), "cycles": [], "latency": [], "rss": []}
    medics = [os.path.abspath(m) for m in args.medic or [os.path.join(TOP, "build/dev/medic")]]
    labels = args.label or [os.path.basename(os.path.dirname(m)) for m in medics]
    skip = set(args.skip.split(",")) - {""}
    sizes = [int(x) for x in args.nodes.split(",")]
    queries = model_queries(medics[-1])
    work = tempfile.mkdtemp(prefix="medic-fleet-")
    version = subprocess.run(["prometheus", "--version"], capture_output=True, text=True)
    print(f"machine: {os.cpu_count()} CPUs; Prometheus {version.stdout.split()[2]}; "
          f"fleet_interval {args.fleet_interval or 'as built in'}", flush=True)
    fleet = f"model: {{ fleet_interval: {args.fleet_interval} }}\n" if args.fleet_interval else ""
    try:
        print("\n| nodes | GPUs | build | first cycle (whole windows) | cycle median | "
              "cycle worst | whole-window fetches | requests per cycle | GPUs scored | "
              "Prometheus alone, whole windows | Prometheus alone, last 2 steps | "
              "Prometheus alone, last step |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
        rss, lat = [], []
        for nodes in sizes:
            t = time.time()
            p = Prometheus(work, nodes)
            floor, size = prometheus_floor(p.url, queries)
            floor2, size2 = prometheus_floor(p.url, queries, steps=2)
            floor1, size1 = prometheus_floor(p.url, queries, steps=1)
            setup = time.time() - t
            try:
                for binary, label in zip(medics, labels):
                    m = Medic(binary, os.path.join(work, f"{label}-{nodes}"),
                              f"prometheus: {{ url: '{p.url}', timeout: 10s }}\n" + fleet)
                    try:
                        r = cycles(m, args.cycles, p.url)
                        d = r["durations"] or [float("nan")]
                        out["cycles"].append({"label": label, "nodes": nodes, "gpus": nodes * 8,
                                              "median_s": statistics.median(d), "worst_s": max(d),
                                              "requests": r["requests_per_cycle"],
                                              "prometheus_alone_s": floor,
                                              "prometheus_alone_2_steps_s": floor2,
                                              "prometheus_alone_1_step_s": floor1,
                                              "first_s": r["first"],
                                              "full_fetches": r["full_fetches"]})
                        first = f"{r['first']:.3f} s" if r["first"] is not None else "-"
                        full = r["full_fetches"]
                        print(f"| {nodes} | {nodes * 8} | {label} | {first} | "
                              f"{statistics.median(d):.3f} s | "
                              f"{max(d):.3f} s{'' if r['measured'] else ' (from cycle spacing)'} | "
                              f"{'-' if full is None else int(full)} | "
                              f"{r['requests_per_cycle']:.1f} | {r['scored']} | "
                              f"{floor:.3f} s ({size / 1e6:.1f} MB of JSON) | "
                              f"{floor2:.3f} s ({size2 / 1e6:.1f} MB) | "
                              f"{floor1:.3f} s ({size1 / 1e6:.1f} MB) |", flush=True)
                        if nodes == max(sizes) and "rss" not in skip:
                            open_alerts(m, 10000)
                            c = m.metrics()["medic_fleet_scoring_cycles_total"]
                            wait_until("two cycles", lambda: m.metrics()[
                                "medic_fleet_scoring_cycles_total"] >= c + 2, 180)
                            rss.append((label, nodes * 8, m.rss_mb()))
                            out["rss"].append({"label": label, "gpus": nodes * 8,
                                               "rss_mb": rss[-1][2]})
                        if "latency" not in skip:
                            r = latency(m, nodes, args.rate, args.seconds)
                            lat.append((label, nodes, r))
                            out["latency"].append(dict(r, label=label, nodes=nodes,
                                                       gpus=nodes * 8))
                    finally:
                        m.stop()
            finally:
                p.stop()
                shutil.rmtree(p.dir, ignore_errors=True)
            print(f"(Prometheus with {nodes * 8} GPUs set up in {setup:.0f} s)", flush=True)
        if rss:
            print("\n| build | scored GPUs | open alerts | medic RSS |")
            print("|---|---|---|---|")
            for label, gpus, mb in rss:
                print(f"| {label} | {gpus} | 10,000 | {mb:.0f} MB |")
        if lat:
            print(f"\n| build | GPUs | alerts at {args.rate:.0f}/s | alert -> decision p50 | p99 | "
                  "worst | risk unknown | sends behind schedule |")
            print("|---|---|---|---|---|---|---|---|")
            for label, nodes, r in lat:
                print(f"| {label} | {nodes * 8} | {r['count']} | {r['p50']} ms | {r['p99']} ms | "
                      f"{r['max']} ms | {r['unknown_risk']} | {r['late_sends']} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
