#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Several replicas: webhook notifications/s with three `medic serve`
replicas sharing one PostgreSQL 15 audit log, beside one replica on
PostgreSQL and one medic on SQLite, in the same run; then how long a
takeover takes after kill -9 of the leader.

Every medic runs on its embedded defaults (`medic serve --listen --db`, no
configuration file): dry-run, the built-in policies and model, durable
commits; `--db postgresql://...` puts the log in PostgreSQL, and the replica
holding the lease (default 5s) decides. PostgreSQL is started by the bench
as a non-root user in a temporary directory (tests/integration/postgres_lab.py),
with its default settings (fsync and synchronous_commit on).

- throughput: wrk (one thread per target, 32 connections in all) POSTs the
  real 3-alert payload, each request with its own groupKey, for --seconds;
  with three replicas, one wrk per replica at once, their rates summed.
  Then the time until the leader has evaluated everything accepted.
- takeover: --takeovers times, kill -9 of the leader of three replicas and
  the time until another one reports medic_ha_leader 1 (the replica killed
  is started again before the next round).
- storm (--storm): scale-bench's storm, 16,000 Xid 79 alerts on 2,000 nodes
  x 8 GPUs, grouped by node (2,000 notifications of 8) and not (16,000 of
  one), from 8 connections that each wait for their answer
  (build/dev/bench/storm-client): against one medic on SQLite, then three
  replicas on PostgreSQL (the bodies dealt round-robin, 3+3+2 connections);
  the time until all are accepted and until the leader has evaluated them,
  and the decisions' caps.

usage: bench/ha-bench.py [--medic PATH] [--seconds 10] [--takeovers 3] [--storm]
                         [--connections 32] [--writers N] [--wrk-threads 1]
                         [--load-cpus LIST] [--json PATH]

--writers sets the replicas' audit.writers (else each chooses for its
machine); --wrk-threads and --load-cpus (a taskset list) are for machines
with more cores than one load thread fills.
Needs wrk and postgresql-15 (apt-get install wrk postgresql-15)."""

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from benchlib import Medic, pending, seconds_until, storm_bodies, storm_counts, wait_until

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests/integration"))
from postgres_lab import PostgreSQL  # noqa: E402

PAYLOAD = os.path.join(TOP, "tests/fixtures/alertmanager/am-webhook-multi-alert.json")
LUA = os.path.join(TOP, "bench/webhook-post.lua")
STORM_CLIENT = os.path.join(TOP, "build/dev/bench/storm-client")


LOAD = {"threads": 1, "cpus": None, "writers": None}


def wrk_start(port, seconds, conns, prefix):
    pin = ["taskset", "-c", LOAD["cpus"]] if LOAD["cpus"] else []
    threads = min(LOAD["threads"], conns)
    return subprocess.Popen(pin + ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", LUA,
                             f"http://127.0.0.1:{port}", "--", PAYLOAD, "", prefix],
                            stdout=subprocess.PIPE, text=True)


def wrk_result(proc):
    out = proc.communicate()[0]
    ms = {"us": 0.001, "ms": 1.0, "s": 1000.0}

    def latency(pct):
        v = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)", out, re.M)
        return float(v.group(1)) * ms[v.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+(\S+)", out).group(1)),
            "p50_ms": latency(50), "p99_ms": latency(99),
            "non2xx": int(non2xx.group(1)) if non2xx else 0,
            "requests": int(re.search(r"(\d+) requests in", out).group(1))}


def measure(ports, seconds, conns=None):
    conns = conns or LOAD["connections"]
    procs = [wrk_start(p, seconds, max(conns // len(ports), 1), f"r{i}-{time.time_ns()}")
             for i, p in enumerate(ports)]
    results = [wrk_result(p) for p in procs]
    return {"rps": sum(r["rps"] for r in results),
            "p50_ms": max(r["p50_ms"] for r in results),
            "p99_ms": max(r["p99_ms"] for r in results),
            "non2xx": sum(r["non2xx"] for r in results),
            "requests": sum(r["requests"] for r in results)}


def pending_pg(pg, name):
    return int(pg.sql("SELECT count(*) FROM notifications WHERE evaluated_at IS NULL"
                      " AND duplicate_of IS NULL", name)[0][0])


def leaders(replicas):
    out = []
    for r in replicas:
        if r.proc.poll() is not None:
            continue
        try:
            m = r.metrics()
        except OSError:
            continue
        if any(k.startswith("medic_ha_leader{") and v == 1 for k, v in m.items()):
            out.append(r)
    return out


def run_sqlite(binary, seconds):
    work = tempfile.mkdtemp(prefix="medic-ha-bench-")
    m = Medic(binary, work)
    try:
        measure([m.port], 2)  # warm-up
        wait_until("the engine to catch up", lambda: pending(m.db) == 0, 600)
        result = measure([m.port], seconds)
        result["catch_up_s"] = seconds_until("the engine to catch up", lambda: pending(m.db) == 0)
        return result
    finally:
        m.stop()
        shutil.rmtree(work, ignore_errors=True)


def start_replicas(binary, work, url, count):
    replicas = [Medic(binary, os.path.join(work, f"replica-{i}"), db=url, writers=LOAD["writers"])
                for i in range(count)]
    wait_until("a leader", lambda: len(leaders(replicas)) == 1, 60)
    return replicas


def run_pg(binary, pg, name, count, seconds):
    url = pg.database(name)
    work = tempfile.mkdtemp(prefix="medic-ha-bench-")
    replicas = start_replicas(binary, work, url, count)
    try:
        ports = [r.port for r in replicas]
        measure(ports, 2)
        wait_until("the leader to catch up", lambda: pending_pg(pg, name) == 0, 600)
        result = measure(ports, seconds)
        result["catch_up_s"] = seconds_until("the leader to catch up",
                                             lambda: pending_pg(pg, name) == 0)
        return result
    finally:
        for r in replicas:
            r.stop()
        shutil.rmtree(work, ignore_errors=True)


def storm_post(ports, bodies, work, connections=8):
    """Deals the bodies round-robin to the ports, one storm-client each
    (the connections shared out), all at once; the time until the last
    answer and the non-200 answers."""
    procs = []
    for i, port in enumerate(ports):
        path = os.path.join(work, f"storm-{i}.jsonl")
        with open(path, "w") as f:
            f.writelines(b + "\n" for b in bodies[i::len(ports)])
        conns = connections // len(ports) + (i < connections % len(ports))
        procs.append(subprocess.Popen([STORM_CLIENT, f"http://127.0.0.1:{port}/webhook", path,
                                       str(conns)], stdout=subprocess.PIPE, text=True))
    seconds, bad = 0.0, 0
    for proc in procs:
        out = proc.communicate()[0]
        m = re.search(r"^storm: posted (\d+) non-200 (\d+) in (\S+) s$", out, re.M)
        if proc.returncode or not m:
            raise SystemExit(f"ha-bench: the storm client failed:\n{out}")
        seconds, bad = max(seconds, float(m.group(3))), bad + int(m.group(2))
    return seconds, bad


def run_storm_sqlite(binary, per_node):
    work = tempfile.mkdtemp(prefix="medic-ha-storm-")
    m = Medic(binary, work)
    try:
        bodies = storm_bodies(per_node)
        t0 = time.time()
        accepted, bad = storm_post([m.port], bodies, work)
        decided = wait_until("every alert decided", lambda: pending(m.db) == 0, 600) - t0
        con = sqlite3.connect(f"file:{m.db}?mode=ro", uri=True)
        result = {"bodies": len(bodies), "non200": bad, "accepted_s": accepted,
                  "decided_s": decided, **storm_counts(lambda sql: con.execute(sql).fetchone()[0])}
        con.close()
        return result
    finally:
        m.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_storm_pg(binary, pg, name, per_node):
    url = pg.database(name)
    work = tempfile.mkdtemp(prefix="medic-ha-storm-")
    replicas = start_replicas(binary, work, url, 3)
    try:
        bodies = storm_bodies(per_node)
        t0 = time.time()
        accepted, bad = storm_post([r.port for r in replicas], bodies, work)
        # psql is a process of its own: asked every 0.1 s, not every 20 ms,
        # so that it takes little of the cores the replicas need
        while pending_pg(pg, name):
            if time.time() - t0 > 600:
                raise SystemExit("ha-bench: the storm was not decided in 600 s")
            time.sleep(0.1)
        decided = time.time() - t0
        return {"bodies": len(bodies), "non200": bad, "accepted_s": accepted,
                "decided_s": decided,
                **storm_counts(lambda sql: int(pg.sql(sql, name)[0][0]))}
    finally:
        for r in replicas:
            r.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_takeovers(binary, pg, rounds):
    url = pg.database("takeover")
    work = tempfile.mkdtemp(prefix="medic-ha-bench-")
    replicas = start_replicas(binary, work, url, 3)
    times = []
    try:
        for k in range(rounds):
            old = leaders(replicas)[0]
            t0 = time.monotonic()
            old.proc.send_signal(signal.SIGKILL)
            old.proc.wait()
            wait_until("another leader", lambda: len(leaders(replicas)) == 1, 60)
            times.append(time.monotonic() - t0)
            print(f"  takeover {k + 1}: {times[-1]:.2f}s", flush=True)
            i = replicas.index(old)
            replicas[i] = Medic(binary, os.path.join(work, f"replica-{i}-{k}"), db=url)
        return times
    finally:
        for r in replicas:
            if r.proc.poll() is None:
                r.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--medic", default=os.path.join(TOP, "build/dev/medic"))
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--takeovers", type=int, default=3)
    ap.add_argument("--storm", action="store_true", help="the storm, on SQLite and on PostgreSQL")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--writers", type=int, help="the replicas' audit.writers")
    ap.add_argument("--wrk-threads", type=int, default=1)
    ap.add_argument("--load-cpus", help="a taskset CPU list for wrk")
    ap.add_argument("--json")
    args = ap.parse_args()
    LOAD.update(threads=args.wrk_threads, cpus=args.load_cpus, writers=args.writers,
                connections=args.connections)
    if not shutil.which("wrk"):
        raise SystemExit("ha-bench: install wrk (apt-get install wrk)")
    work = tempfile.mkdtemp(prefix="medic-ha-pg-")
    pg = PostgreSQL(work).start()
    report = {"machine": f"{os.cpu_count()} cores", "writers": args.writers or "auto",
              "connections": args.connections}
    try:
        print("one medic on SQLite ...", flush=True)
        report["sqlite_1"] = run_sqlite(args.medic, args.seconds)
        print("one replica on PostgreSQL ...", flush=True)
        report["pg_1"] = run_pg(args.medic, pg, "one", 1, args.seconds)
        print("three replicas on PostgreSQL ...", flush=True)
        report["pg_3"] = run_pg(args.medic, pg, "three", 3, args.seconds)
        if args.takeovers:
            print("takeovers after kill -9 (lease 5s) ...", flush=True)
            report["takeover_s"] = run_takeovers(args.medic, pg, args.takeovers)
        if args.storm:
            for per_node, kind in ((True, "grouped"), (False, "ungrouped")):
                print(f"storm, {kind}: one medic on SQLite ...", flush=True)
                report[f"storm_{kind}_sqlite"] = run_storm_sqlite(args.medic, per_node)
                print(f"storm, {kind}: three replicas on PostgreSQL ...", flush=True)
                report[f"storm_{kind}_pg_3"] = run_storm_pg(args.medic, pg, f"storm_{kind}",
                                                            per_node)
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{report['machine']}, {args.connections} connections, audit.writers "
          f"{report['writers']}, wrk -t{args.wrk_threads}")
    print("\n| setup | notifications/s | p50 | p99 | non-2xx | leader caught up after |")
    print("|---|---|---|---|---|---|")
    for key, label in (("sqlite_1", "one medic, SQLite"), ("pg_1", "one replica, PostgreSQL"),
                       ("pg_3", "three replicas, PostgreSQL")):
        r = report[key]
        print(f"| {label} | {r['rps']:,.0f} | {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms "
              f"| {r['non2xx']} | {r['catch_up_s']:.1f} s |")
    if report.get("takeover_s"):
        t = report["takeover_s"]
        print(f"\ntakeover after kill -9 of the leader (lease 5s): "
              f"{min(t):.2f}-{max(t):.2f} s over {len(t)}")
    if args.storm:
        print("\n| storm | setup | accepted | every alert decided | decisions "
              "| disruptive taken | storm notices |")
        print("|---|---|---|---|---|---|---|")
        for kind in ("grouped", "ungrouped"):
            for key, label in ((f"storm_{kind}_sqlite", "one medic, SQLite"),
                               (f"storm_{kind}_pg_3", "three replicas, PostgreSQL")):
                r = report[key]
                print(f"| {kind} ({r['bodies']:,} notifications) | {label} "
                      f"| {r['accepted_s']:.1f} s | {r['decided_s']:.1f} s | {r['decisions']:,} "
                      f"| {r['disruptive_acted']} | {r['storm_notices']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
