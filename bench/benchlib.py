# SPDX-License-Identifier: Apache-2.0
"""What the bench scripts share: a medic process on loopback, Alertmanager
notifications of GPU Xid 79 alerts, and waiting on a condition."""

import datetime
import http.client
import json
import os
import re
import socket
import sqlite3
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def now_rfc3339(timespec="milliseconds"):
    t = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec=timespec)
    return t.replace("+00:00", "Z")


def notification(key, alerts):
    return json.dumps({"version": "4", "groupKey": key, "status": "firing", "receiver": "medic",
                       "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
                       "externalURL": "http://am", "truncatedAlerts": 0, "alerts": alerts})


def xid_alert(node, gpu, starts=None):
    """A GPU Xid 79 alert; starts defaults to now, to the microsecond."""
    return {"status": "firing",
            "labels": {"alertname": "GPUXidError", "Hostname": node, "gpu": str(gpu), "xid": "79"},
            "annotations": {"summary": "GPU fell off the bus"},
            "startsAt": starts or now_rfc3339("microseconds"),
            "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prometheus/graph",
            "fingerprint": f"{abs(hash((node, gpu))):016x}"}


def post_all(port, bodies):
    """POSTs bodies to /webhook one after another; returns how many were not 200."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    bad = 0
    for b in bodies:
        c.request("POST", "/webhook", b, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        bad += r.status != 200
    c.close()
    return bad


def seconds_until(what, check, seconds=600):
    """How long until check() is true (at most seconds)."""
    t0 = time.time()
    wait_until(what, check, seconds)
    return time.time() - t0


def pending(db):
    """Notifications the engine has not evaluated yet, in the SQLite log db."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute("SELECT count(*) FROM notifications WHERE evaluated_at IS NULL"
                           " AND duplicate_of IS NULL").fetchone()[0]
    finally:
        con.close()


def wait_until(what, check, seconds):
    """Polls check until it is true; returns the time it was, or exits."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return time.time()
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {what}")


def cpu_seconds(pid):
    """CPU time (user and system) of process pid and of its children that
    still run (nginx's workers under its master), in seconds."""
    def own(p):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0, None
        # after the command: state ppid ... utime (14th field) stime (15th)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[1])
    total = own(pid)[0]
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pid:
            t, parent = own(int(entry))
            if parent == pid:
                total += t
    return total


class Medic:
    """`medic serve` on loopback: on its embedded defaults (`--listen --db`)
    or, with config, on that YAML text plus listen and the audit path."""

    def __init__(self, binary, work, config=None, db=None, writers=None):
        os.makedirs(work, exist_ok=True)
        self.port = free_port()
        self.db = db or os.path.join(work, "medic.db")
        argv = [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--db", self.db]
        if config is not None or writers:
            path = os.path.join(work, "medic.yaml")
            audit = f"path: {self.db}" + (f", writers: {writers}" if writers else "")
            with open(path, "w") as f:
                f.write(f"listen: 127.0.0.1:{self.port}\naudit: {{ {audit} }}\n" + (config or ""))
            argv = [binary, "serve", "--config", path]
        self.log = open(os.path.join(work, "medic.log"), "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log, cwd=work)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if self.get("/-/ready")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("medic did not start: see " + self.log.name)

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, body

    def metrics(self):
        """Every sample on /metrics, by name with its labels."""
        return {m.group(1): float(m.group(2)) for m in
                re.finditer(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", self.get("/metrics")[1], re.M)}

    def metric(self, name):
        return self.metrics().get(name)

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0

    def written(self):
        """Bytes the process has written (wchar)."""
        with open(f"/proc/{self.proc.pid}/io") as f:
            return int(dict(line.split(": ") for line in f.read().splitlines())["wchar"])

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def storm_bodies(per_node, nodes=2000, gpus=8):
    """The storm: an Xid 79 on every GPU of nodes nodes, grouped by node (a
    notification of gpus alerts each) or not (a notification per alert)."""
    starts = now_rfc3339()
    if per_node:
        return [notification(f"storm-{n}", [xid_alert(f"storm-{n:05d}", g, starts)
                                            for g in range(gpus)]) for n in range(nodes)]
    return [notification(f"storm-{n}-{g}", [xid_alert(f"storm-{n:05d}", g, starts)])
            for n in range(nodes) for g in range(gpus)]


def storm_counts(q):
    """What the storm decided, through q(sql) -> a count."""
    return {"decisions": q("SELECT count(*) FROM decisions"),
            "disruptive_acted": q("SELECT count(*) FROM decisions WHERE verdict IN"
                                  " ('execute','dry_run') AND action IN"
                                  " ('drain','ipmi_power_cycle','power_limit')"),
            "storm_notices": q("SELECT count(*) FROM decisions WHERE reason LIKE 'storm started%'")}
