#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How medic's cost grows: webhook throughput with 0, 1,000, 10,000 open
alerts (nginx with one worker answering `return 200`, and the field's usual
Flask + gunicorn + SQLite receiver, as the references in the same run), a
storm of 2,000 nodes x 8 GPUs, and what each notification writes to disk.

medic runs on its embedded defaults (`medic serve --listen --db`, no
configuration file): dry-run, the built-in policies and model, durable
SQLite. That is what `scripts/dev.sh serve` starts.

- throughput: open alerts are first created as GPU Xid 79 alerts on
  distinct nodes (100 per notification) and waited for in
  medic_open_incidents; then wrk (one thread, 32 connections) POSTs the
  real 3-alert payload, each request with its own groupKey. The CPU time
  each server spent per request (/proc/PID/stat, nginx's and gunicorn's
  workers included) says what the machine pays for each.
- storm: 16,000 single-alert notifications (2,000 nodes x 8 GPUs, Xid 79),
  or 2,000 of 8 alerts grouped by node, from 8 concurrent connections that
  each wait for their answer (build/dev/bench/storm-client, in C); times until all are accepted and until the
  engine has evaluated all of them (read from the audit log), then checks
  the caps held and that on-call was told once.
- disk: 2,000 single-alert notifications from 4 clients; bytes medic wrote
  (/proc/PID/io wchar) and database growth after a checkpoint, per
  notification.

usage: bench/scale-bench.py [--medic PATH --label TEXT]... [--open 0,1000,10000]
                            [--seconds 10] [--skip throughput,flask,storm,disk] [--json PATH]
Needs wrk, nginx, gunicorn and Flask
(apt-get install wrk nginx-light gunicorn python3-flask)."""

import argparse
import datetime
import http.client
import json
import multiprocessing
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time

from benchlib import Medic, cpu_seconds, free_port, notification, now_rfc3339, pending, post_all, \
    seconds_until, storm_bodies, storm_counts, wait_until, xid_alert

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAYLOAD = os.path.join(TOP, "tests/fixtures/alertmanager/am-webhook-multi-alert.json")
LUA = os.path.join(TOP, "bench/webhook-post.lua")
STORM_CLIENT = os.path.join(TOP, "build/dev/bench/storm-client")
# nginx's answer: medic's to a webhook, without any of its work
NGINX_ANSWER = """return 200 '{"status":"accepted","id":1,"duplicate":false}\\n';"""


def send_concurrently(port, bodies, clients):
    parts = [bodies[i::clients] for i in range(clients)]
    with multiprocessing.Pool(clients) as pool:
        return sum(pool.starmap(post_all, [(port, p) for p in parts]))


def storm_post(port, bodies, clients, work):
    """POSTs every body once over clients connections that each wait for
    their answer (build/dev/bench/storm-client: a C client, as cheap per
    request as Alertmanager's, where Python clients would take the CPU
    medic needs); returns (seconds until the last answer, non-200 count)."""
    path = os.path.join(work, "storm-bodies.jsonl")
    with open(path, "w") as f:
        f.writelines(b + "\n" for b in bodies)
    out = subprocess.run([STORM_CLIENT, f"http://127.0.0.1:{port}/webhook", path, str(clients)],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"^storm: posted (\d+) non-200 (\d+) in (\S+) s$", out, re.M)
    if not m or int(m.group(1)) != len(bodies):
        raise SystemExit(f"scale-bench: the storm client did not post every body:\n{out}")
    return float(m.group(3)), int(m.group(2))


def wrk(port, seconds, pid=None):
    """wrk's figures; with pid, also the CPU time that process (and its
    children) spent per request. Each run's groupKeys start with a prefix
    of their own, so that no request repeats one from an earlier run (a
    duplicate is answered without being written again)."""
    args = ["wrk", "-t1", "-c32", f"-d{seconds}s", "--latency", "-s", LUA,
            f"http://127.0.0.1:{port}", "--", PAYLOAD, "", f"run{time.time_ns()}"]
    cpu = cpu_seconds(pid) if pid else 0
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - cpu if pid else float("nan")
    rps = float(re.search(r"Requests/sec:\s+(\S+)", out).group(1))
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return {"rps": rps, "p50": p50, "p99": p99, "non2xx": int(non2xx.group(1)) if non2xx else 0,
            "requests": requests, "cpu_us_per_request": cpu * 1e6 / max(requests, 1)}


def throughput(binary, open_alerts, seconds):
    work = tempfile.mkdtemp(prefix="medic-scale-")
    m = Medic(binary, work)
    try:
        starts = now_rfc3339()
        bodies = [notification(f"open-{i}", [xid_alert(f"node-{i + k:05d}", 0, starts)
                                             for k in range(100)])
                  for i in range(0, open_alerts, 100)]
        if bodies:
            send_concurrently(m.port, bodies, 4)
            wait_until("the open alerts", lambda: (m.metric("medic_open_incidents") or 0)
                       >= open_alerts, 600)
        wrk(m.port, 2)  # warm-up: the WAL file reaches its working size
        wait_until("the engine to catch up", lambda: pending(m.db) == 0, 600)
        before = m.written()
        result = wrk(m.port, seconds, m.proc.pid)
        result["bytes_per_request"] = (m.written() - before) / max(result["requests"], 1)
        result["rss_mb"] = m.rss_mb()
        if m.metric("medic_duplicates_total"):
            raise SystemExit("scale-bench: wrk repeated a notification; the figures would count"
                             " duplicates, which are answered without being written")
        # everything accepted is evaluated in the end
        result["catch_up_s"] = seconds_until("the engine to catch up", lambda: pending(m.db) == 0)
        return result
    finally:
        m.stop()
        shutil.rmtree(work, ignore_errors=True)


def nginx(location, measure, files=None):
    """nginx with one worker, the given location block and files under its
    root, on a free port; returns measure(port, its master's pid)."""
    work = tempfile.mkdtemp(prefix="medic-nginx-")
    os.chmod(work, 0o755)  # its worker runs as another user and reads the files
    os.makedirs(os.path.join(work, "www"))
    for name, data in (files or {}).items():
        with open(os.path.join(work, "www", name), "wb") as f:
            f.write(data)
    port = free_port()
    with open(os.path.join(work, "nginx.conf"), "w") as f:
        f.write(f"""worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {work}/body;
  server {{
    listen 127.0.0.1:{port};
    root {work}/www;
    location / {{ {location} }}
  }}
}}
""")
    subprocess.run(["nginx", "-c", f"{work}/nginx.conf", "-p", work], check=True)
    try:
        wait_until("nginx", lambda: os.path.exists(f"{work}/nginx.pid"), 10)
        with open(f"{work}/nginx.pid") as f:
            return measure(port, int(f.read()))
    finally:
        with open(f"{work}/nginx.pid") as f:
            os.kill(int(f.read()), 15)
        wait_until("nginx to stop", lambda: not os.path.exists(f"{work}/nginx.pid"), 10)
        shutil.rmtree(work, ignore_errors=True)


def get_times(port, path, count=10):
    """count GETs of path one after another: (median ms, the last body)."""
    times, body = [], b""
    for _ in range(count):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        t0 = time.perf_counter()
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        times.append((time.perf_counter() - t0) * 1000)
        c.close()
        assert r.status == 200, (path, r.status)
    return statistics.median(times), body


def flask_reference(seconds, workers=2 * os.cpu_count() + 1):
    """The Flask + gunicorn + SQLite receiver (bench/flask_receiver.py),
    gunicorn's recommended (2 x CPUs) + 1 sync workers."""
    work = tempfile.mkdtemp(prefix="medic-flask-")
    port = free_port()
    env = dict(os.environ, MEDIC_BENCH_DB=os.path.join(work, "ref.db"))
    log = open(os.path.join(work, "gunicorn.log"), "w")
    proc = subprocess.Popen(["/usr/bin/python3", "-m", "gunicorn", "-w", str(workers), "-b",
                             f"127.0.0.1:{port}", "--chdir", os.path.join(TOP, "bench"),
                             "flask_receiver:app"], env=env, stdout=log, stderr=log)
    try:
        def answers():
            try:
                post_all(port, [notification("ready", [])])
                return True
            except OSError:
                return False
        wait_until("gunicorn", answers, 30)
        wrk(port, 2)  # warm-up, as for medic
        return wrk(port, seconds, proc.pid)
    finally:
        proc.terminate()
        proc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def storm(binary, per_node, nodes=2000, gpus=8, clients=8):
    work = tempfile.mkdtemp(prefix="medic-storm-")
    m = Medic(binary, work)
    try:
        bodies = storm_bodies(per_node, nodes, gpus)
        t0 = time.time()
        accepted, bad = storm_post(m.port, bodies, clients, work)
        decided = wait_until("every alert decided", lambda: pending(m.db) == 0, 600) - t0
        con = sqlite3.connect(f"file:{m.db}?mode=ro", uri=True)
        q = lambda sql: con.execute(sql).fetchone()[0]
        result = {
            "alerts": nodes * gpus, "non200": bad, "bodies": len(bodies), "accepted_s": accepted,
            "decided_s": decided,
            "notifications": q("SELECT count(*) FROM notifications"),
            **storm_counts(q),
            "rss_mb": m.rss_mb(),
        }
        if per_node:  # the on-call page with every node's incident open, beside nginx
            result["page_ms"], page = get_times(m.port, "/")
            result["page_bytes"] = len(page)
            result["node_page_ms"], _ = get_times(m.port, "/nodes/storm-00007")
            result["nginx_page_ms"], _ = nginx("", lambda port, _: get_times(port, "/index.html"),
                                               {"index.html": page})
        con.close()
        return result
    finally:
        m.stop()
        shutil.rmtree(work, ignore_errors=True)


def disk(binary, count=2000, clients=4):
    work = tempfile.mkdtemp(prefix="medic-disk-")
    m = Medic(binary, work)
    try:
        starts = now_rfc3339()
        # warm up (schema, first pages), then measure
        post_all(m.port, [notification(f"warm-{i}", [xid_alert(f"warm-{i:05d}", 0, starts)])
                          for i in range(50)])
        wait_until("warm-up", lambda: pending(m.db) == 0, 60)
        con = sqlite3.connect(m.db, timeout=30)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size0 = os.path.getsize(m.db)
        written0 = m.written()
        bodies = [notification(f"disk-{i}", [xid_alert(f"disk-{i:05d}", 0, starts)])
                  for i in range(count)]
        send_concurrently(m.port, bodies, clients)
        wait_until("every alert decided", lambda: pending(m.db) == 0, 600)
        written = m.written() - written0
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        grown = os.path.getsize(m.db) - size0
        con.close()
        return {"notifications": count, "written_per_notification": written / count,
                "db_growth_per_notification": grown / count}
    finally:
        m.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--medic", action="append")
    ap.add_argument("--label", action="append")
    ap.add_argument("--open", default="0,1000,10000")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--skip", default="")
    ap.add_argument("--json", help="also write the figures to this file (bench/plot-scale.py)")
    a = ap.parse_args()
    out = {"cpus": os.cpu_count(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "throughput": [], "storm": [], "disk": []}
    binaries = [os.path.abspath(b) for b in a.medic or [os.path.join(TOP, "build/dev/medic")]]
    labels = a.label or [os.path.basename(os.path.dirname(b)) for b in binaries]
    skip = set(a.skip.split(","))
    for tool in ("wrk", "nginx", "gunicorn"):
        if not shutil.which(tool) and "throughput" not in skip:
            raise SystemExit(f"scale-bench: install {tool} (apt-get install wrk nginx-light"
                             " gunicorn python3-flask)")
    print(f"# {datetime.datetime.now().isoformat(timespec='seconds')}, {os.cpu_count()} CPUs")
    if "throughput" not in skip:
        ref = out["nginx"] = nginx(NGINX_ANSWER, lambda port, pid: wrk(port, a.seconds, pid))
        print(f"nginx (1 worker): {ref['rps']:.0f} req/s p50 {ref['p50']} p99 {ref['p99']}, "
              f"{ref['cpu_us_per_request']:.1f} us of CPU per request")
        if "flask" not in skip:
            f = out["flask"] = flask_reference(a.seconds)
            print(f"Flask + gunicorn + SQLite: {f['rps']:.0f} notifications/s "
                  f"({f['rps'] / ref['rps']:.2f}x nginx) p50 {f['p50']} p99 {f['p99']} "
                  f"non-2xx {f['non2xx']}, {f['cpu_us_per_request']:.1f} us of CPU per "
                  "notification", flush=True)
        for binary, label in zip(binaries, labels):
            for n in [int(x) for x in a.open.split(",")]:
                r = throughput(binary, n, a.seconds)
                out["throughput"].append(dict(r, label=label, open_alerts=n))
                print(f"{label}: {n} open alerts: {r['rps']:.0f} notifications/s "
                      f"({r['rps'] / ref['rps']:.2f}x nginx) p50 {r['p50']} p99 {r['p99']} "
                      f"non-2xx {r['non2xx']}, {r['cpu_us_per_request']:.1f} us of CPU and "
                      f"{r['bytes_per_request'] / 1024:.1f} kB written "
                      f"per notification, RSS {r['rss_mb']:.0f} MB, engine caught up "
                      f"{r['catch_up_s']:.1f} s after the load", flush=True)
    for binary, label in zip(binaries, labels):
        for per_node in ([True, False] if "storm" not in skip else []):
            r = storm(binary, per_node)
            out["storm"].append(dict(r, label=label, per_node=per_node))
            print(f"{label}: storm of {r['alerts']} alerts in {r['bodies']} notifications: "
                  f"accepted in {r['accepted_s']:.1f} s (non-200 {r['non200']}), all decided "
                  f"after {r['decided_s']:.1f} s; {r['decisions']} decisions, "
                  f"{r['disruptive_acted']} disruptive taken, {r['storm_notices']} storm "
                  f"notice(s), RSS {r['rss_mb']:.0f} MB", flush=True)
            if per_node:
                print(f"{label}: on-call page after the storm: GET / {r['page_ms']:.1f} ms for "
                      f"{r['page_bytes'] / 1024:.0f} kB (nginx serving the same bytes: "
                      f"{r['nginx_page_ms']:.1f} ms), a node's page {r['node_page_ms']:.1f} ms "
                      "(medians of 10)", flush=True)
        if "disk" not in skip:
            r = disk(binary)
            out["disk"].append(dict(r, label=label))
            print(f"{label}: disk: {r['written_per_notification'] / 1024:.1f} kB written and "
                  f"{r['db_growth_per_notification'] / 1024:.2f} kB of database per single-alert "
                  f"notification", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
