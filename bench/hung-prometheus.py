#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Latency of POST /webhook, GET /metrics and GET /-/ready while the
Prometheus medic reads risks from accepts connections and never answers.

medic runs on its built-in defaults (policies, model, dry-run) plus what
this scenario needs: webhook auth and prometheus { url, timeout: 2s }.
Every webhook carries a GPU Xid 79 alert on a new node, so the built-in
gpu-fell-off-bus policy takes it and the engine asks Prometheus for its
risk. Requests go one at a time, from one client.

usage: bench/hung-prometheus.py [--medic PATH] [--requests N] [--label TEXT]...
Several --medic (with as many --label) compare builds in one run."""

import argparse
import datetime
import http.client
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time


def hung_prometheus():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(1024)
    held = []

    def accept():
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            held.append(conn)  # never answered

    threading.Thread(target=accept, daemon=True).start()
    return s, held


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def payload(i):
    t = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
    return json.dumps({"version": "4", "groupKey": f"bench-{i}", "status": "firing",
                       "receiver": "medic", "alerts": [{
                           "status": "firing",
                           "labels": {"alertname": "GPUXidError", "Hostname": f"gpu-node-{i:04d}",
                                      "gpu": "0", "xid": "79"},
                           "annotations": {}, "startsAt": t.replace("+00:00", "Z"),
                           "endsAt": "0001-01-01T00:00:00Z", "fingerprint": f"f{i:08x}"}]})


def timed(conn, method, path, body=None, headers=None):
    start = time.perf_counter()
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    r.read()
    return r.status, time.perf_counter() - start


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def run(medic, requests):
    work = tempfile.mkdtemp(prefix="medic-hung-")
    sock, held = hung_prometheus()
    port = free_port()
    token = os.path.join(work, "token")
    with open(token, "w") as f:
        f.write("bench\n")
    os.chmod(token, 0o600)
    config = os.path.join(work, "medic.yaml")
    with open(config, "w") as f:
        f.write(f"listen: 127.0.0.1:{port}\naudit: {{ path: {work}/medic.db }}\n"
                f"auth: {{ webhook_bearer_token_file: {token} }}\nlog_level: error\n"
                f"prometheus: {{ url: 'http://127.0.0.1:{sock.getsockname()[1]}', "
                "timeout: 2s }\n")
    proc = subprocess.Popen([medic, "serve", "--config", config], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                if timed(c, "GET", "/-/ready")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        hooks, metrics, ready = [], [], []
        auth = {"Authorization": "Bearer bench", "Content-Type": "application/json"}
        started = time.perf_counter()
        for i in range(requests):
            status, t = timed(conn, "POST", "/webhook", payload(i), auth)
            assert status == 200, status
            hooks.append(t)
            if i % 5 == 0:
                metrics.append(timed(conn, "GET", "/metrics")[1])
                ready.append(timed(conn, "GET", "/-/ready")[1])
        elapsed = time.perf_counter() - started
        return {"webhook": hooks, "metrics": metrics, "ready": ready, "elapsed": elapsed,
                "prometheus_connections": len(held)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        sock.close()
        for c in held:
            c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--medic", action="append")
    ap.add_argument("--label", action="append")
    ap.add_argument("--requests", type=int, default=100)
    args = ap.parse_args()
    medics = args.medic or [os.path.join(here, "..", "build", "dev", "medic")]
    labels = args.label or [os.path.basename(os.path.dirname(m)) for m in medics]
    print("| build | webhooks | webhook p50 | webhook p99 | /metrics p99 | /-/ready p99 |"
          " Prometheus connections |")
    print("|---|---|---|---|---|---|---|")
    for medic, label in zip(medics, labels):
        r = run(medic, args.requests)
        ms = lambda v: f"{v * 1000:.1f} ms"
        print(f"| {label} | {len(r['webhook'])} in {r['elapsed']:.1f} s | "
              f"{ms(statistics.median(r['webhook']))} | {ms(pct(r['webhook'], 99))} | "
              f"{ms(pct(r['metrics'], 99))} | {ms(pct(r['ready'], 99))} | "
              f"{r['prometheus_connections']} |", flush=True)


if __name__ == "__main__":
    main()
