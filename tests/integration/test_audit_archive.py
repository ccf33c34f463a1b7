#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Audit retention: `medic audit archive --before T --out FILE` against a
live medic serve (its wall clock stepped forward by the clock stand-in so
that rows are hours old) moves the old notifications, alerts, decisions,
notify actions and incident changes into an SQLite archive that the
queries read, while webhooks keep arriving and every one of them is
stored. A notification that a newer duplicate names stays in the log. The
log still verifies alone and goes on writing its chains; the archive
verifies against it; a changed, shortened or foreign archive is found; a
second archive continues the chains where the first ended. Runs on SQLite
and, with MEDIC_TEST_AUDIT=postgresql, on PostgreSQL."""

import json
import os
import shutil
import sqlite3
import subprocess
import threading
import time

from lab import Medic, RecordingReceiver, SteppedClock, Suite, wait_until, write_secret

TOKEN = "archive-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HOUR = 3600


def alert(node, name, offset, status="firing", group=None):
    t = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() + offset))
    return json.dumps({"version": "4", "groupKey": group or f"g-{name}-{node}-{offset}",
                       "status": status, "receiver": "medic", "alerts": [{
                           "status": status, "labels": {"alertname": name, "instance": node},
                           "annotations": {}, "startsAt": t,
                           "endsAt": "0001-01-01T00:00:00Z"}]})


def start(suite, name="medic", audit_options=""):
    hook = RecordingReceiver()
    suite.on_exit(hook.stop)
    workdir = suite.subdir(name)
    clock = SteppedClock(workdir)
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    nodes = ", ".join(f"{{ name: gpu-node-{i:02d} }}" for i in range(1, 9))
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"inventory: {{ nodes: [ {nodes} ] }}\n"
                  f"notifiers:\n  hook: {{ type: webhook, url: '{hook.url}/hook' }}\n"
                  "policies:\n  - name: tell\n    match: '{alertname=\"GPUHot\"}'\n"
                  "    steps: [ { action: notify, notifier: hook, message: 'hot {{ $node }}' } ]\n",
                  audit_options=audit_options)
    medic.env = clock.env()
    medic.start()
    return medic, clock


def outcomes(medic):
    return len([a for a in medic.audit("actions") if a["phase"] == "outcome"])


def post(medic, body):
    status, _, raw = medic.post("/webhook", body, headers=AUTH)
    assert status == 200, (status, raw)
    return json.loads(raw)


def run(medic, clock, *args):
    return subprocess.run([medic.binary, "audit", *args], capture_output=True, text=True,
                          timeout=300, env=clock.env())


def test_archive_round_trip(suite):
    medic, clock = start(suite)
    # hour 0: two incidents told and recovered, a notification no policy
    # takes
    post(medic, alert("gpu-node-02", "GPUHot", 0))
    wait_until("a notify outcome", lambda: outcomes(medic) == 1, timeout=30)
    repeated = alert("gpu-node-01", "GPUHot", 0, group="repeated")
    first = post(medic, repeated)
    post(medic, alert("gpu-node-03", "Unmatched", 0))
    wait_until("two notify outcomes", lambda: outcomes(medic) == 2, timeout=30)
    post(medic, alert("gpu-node-02", "GPUHot", 0, status="resolved"))
    wait_until("the incident recovered", lambda: [
        i for i in medic.audit("incidents", "--node", "gpu-node-02")
        if i["state"] == "recovered"], timeout=30)

    # hour 3: Alertmanager sends the first group again (a duplicate that
    # names hour 0's notification); a new incident is told; both recover
    clock.set(3 * HOUR)
    again = post(medic, repeated)
    assert again["duplicate"] and again["id"] != first["id"], again
    post(medic, alert("gpu-node-04", "GPUHot", 3 * HOUR))
    wait_until("the new incident told", lambda: outcomes(medic) == 3, timeout=30)
    for node, offset in (("gpu-node-01", 0), ("gpu-node-04", 3 * HOUR)):
        post(medic, alert(node, "GPUHot", offset, status="resolved", group=f"end-{node}"))
        wait_until(f"{node} recovered", lambda: [
            i for i in medic.audit("incidents", "--node", node)
            if i["state"] == "recovered"], timeout=30)
    before = {k: {x["id"] for x in medic.audit(k)}
              for k in ("notifications", "alerts", "decisions", "actions", "changes")}
    assert run(medic, clock, "verify", "--db", medic.db).returncode == 0

    # refused, changing nothing: a time under an hour ago, a file that exists
    out = os.path.join(suite.subdir("archives"), "2026-hour0.db")
    r = run(medic, clock, "archive", "--db", medic.db, "--before", "30m", "--out", out)
    assert r.returncode == 2 and "at least an hour ago" in r.stderr, r.stderr
    open(out + ".taken", "w").close()
    r = run(medic, clock, "archive", "--db", medic.db, "--before", "90m", "--out", out + ".taken")
    assert r.returncode == 2 and "already exists" in r.stderr, r.stderr
    assert {k: {x["id"] for x in medic.audit(k)} for k in before} == before

    # archived while webhooks keep coming
    accepted, stop = [], threading.Event()

    def keep_posting():
        k = 0
        while not stop.is_set():
            k += 1
            got = post(medic, alert(f"gpu-node-0{5 + k % 3}", "Unmatched", 3 * HOUR,
                                    group=f"during-{k}"))
            accepted.append(got["id"])
    poster = threading.Thread(target=keep_posting)
    poster.start()
    try:
        r = run(medic, clock, "archive", "--db", medic.db, "--before", "90m", "--out", out)
    finally:
        stop.set()
        poster.join()
    assert r.returncode == 0, r.stderr
    assert "archive 1 in" in r.stdout and "taking its rows out of the log" in r.stderr, r
    assert accepted, "no webhook was answered during the archive"

    live = {k: medic.audit(k) for k in before}
    held = {k: json.loads(subprocess.run(
        [medic.binary, "audit", k, "--db", out, "--format", "json", "--limit", "100000"],
        capture_output=True, text=True, check=True).stdout) for k in before}
    ids = {n["id"] for n in live["notifications"]}
    # every webhook answered 200 during the archive is in the log
    assert set(accepted) <= ids, set(accepted) - ids
    # hour 0's notifications moved, but the one hour 3's duplicate names
    moved = {n["id"] for n in held["notifications"]}
    assert first["id"] in ids and first["id"] not in moved, (first, moved)
    assert moved and moved <= before["notifications"] and not moved & ids, (moved, ids)
    # the archive is a log the queries read: hour 0's notify actions are there
    assert [a for a in held["actions"] if a["phase"] == "outcome"], held["actions"]
    assert any(c["state"] == "recovered" for c in held["changes"]), held["changes"]
    for k in before:  # each row of before the archive in one place of the two
        h, v = {x["id"] for x in held[k]}, {x["id"] for x in live[k]}
        assert h and not h & v and h | (v & before[k]) == before[k], (k, h, v, before[k])
    for k in ("decisions", "actions", "changes"):  # the chains are cut, not thinned
        assert max(x["id"] for x in held[k]) < min(x["id"] for x in live[k]), k

    # the log alone verifies, and so does the archive beside it
    r = run(medic, clock, "verify", "--db", medic.db)
    assert r.returncode == 0 and r.stdout.startswith("ok:"), r.stdout + r.stderr
    r = run(medic, clock, "verify", "--db", medic.db, "--archive", out)
    assert r.returncode == 0 and "the log's archive 1" in r.stdout, r.stdout + r.stderr
    r = run(medic, clock, "verify", "--db", out)
    assert r.returncode == 1 and "this is an archive" in r.stderr, r.stderr

    # the daemon's chains go on from where they were
    told = outcomes(medic)
    post(medic, alert("gpu-node-08", "GPUHot", 3 * HOUR))
    wait_until("a notify after the archive", lambda: outcomes(medic) == told + 1, timeout=30)
    assert run(medic, clock, "verify", "--db", medic.db).returncode == 0

    # an archive changed, shortened or with a notification changed is found
    work = suite.subdir("tampered")
    for name, sql, table in (
            ("reason.db", "UPDATE decisions SET reason = 'nothing happened'"
             " WHERE id = (SELECT min(id) FROM decisions)", "decisions"),
            ("short.db", "DELETE FROM incident_changes"
             " WHERE id = (SELECT max(id) FROM incident_changes)", "incident_changes"),
            ("payload.db", "UPDATE alerts SET node = 'gpu-node-99'"
             " WHERE id = (SELECT min(id) FROM alerts)", "notifications")):
        copy = os.path.join(work, name)
        shutil.copy(out, copy)
        db = sqlite3.connect(copy)
        db.execute(sql)
        db.commit()
        db.close()
        r = run(medic, clock, "verify", "--db", medic.db, "--archive", copy)
        assert r.returncode == 1 and f"broken: {table}" in r.stdout, (name, r.stdout, r.stderr)
    # a log medic wrote that is no archive
    r = run(medic, clock, "verify", "--db", medic.db, "--archive", out + ".taken")
    assert r.returncode == 1, r.stdout + r.stderr

    # hour 6: a second archive takes hour 3's rows; both archives verify
    clock.set(6 * HOUR)
    told = outcomes(medic)
    post(medic, alert("gpu-node-05", "GPUHot", 6 * HOUR))
    wait_until("hour 6's notify", lambda: outcomes(medic) == told + 1, timeout=30)
    out2 = os.path.join(suite.subdir("archives"), "2026-hour3.db")
    r = run(medic, clock, "archive", "--db", medic.db, "--before", "90m", "--out", out2)
    assert r.returncode == 0 and "archive 2 in" in r.stdout, r.stdout + r.stderr
    for archive, record in ((out, 1), (out2, 2)):
        r = run(medic, clock, "verify", "--db", medic.db, "--archive", archive)
        assert r.returncode == 0 and f"the log's archive {record}" in r.stdout, r.stdout + r.stderr
    r = run(medic, clock, "verify", "--db", medic.db)
    assert r.returncode == 0, r.stdout + r.stderr
    # nothing more to move: no file, no record
    out3 = os.path.join(suite.subdir("archives"), "empty.db")
    r = run(medic, clock, "archive", "--db", medic.db, "--before", "90m", "--out", out3)
    assert r.returncode == 0 and "no archive written" in r.stdout, r.stdout + r.stderr
    assert not os.path.exists(out3)
    # hour 0's notification went with its duplicate this time
    second = json.loads(subprocess.run(
        [medic.binary, "audit", "notifications", "--db", out2, "--format", "json", "--limit",
         "100000"], capture_output=True, text=True, check=True).stdout)
    assert first["id"] in {n["id"] for n in second} and again["id"] in {n["id"] for n in second}
    assert medic.stop() == 0


def ids(db, table):
    c = sqlite3.connect(db)
    got = [r[0] for r in c.execute(f"SELECT id FROM {table} ORDER BY id")]
    c.close()
    return got


def test_stopped_archive_finished(suite):
    """A run stopped while it takes its rows out of the log (its record at
    `removing`, some rows gone) leaves a log that verifies; the next run
    finishes it from the same file before anything else, or, with that file
    gone, says so and changes nothing. The stopped state is made from a
    copy of the log taken before a complete run (an SQLite file in both
    passes): the complete run's record set to `removing` in the copy, and
    the first of its chains' rows taken out."""
    medic, clock = start(suite, "stopped", audit_options=", busy_timeout: 5s")
    for node in ("gpu-node-01", "gpu-node-02"):
        post(medic, alert(node, "GPUHot", 0))
        wait_until(f"{node} told", lambda: [
            a for a in medic.audit("actions", "--node", node) if a["phase"] == "outcome"],
            timeout=30)
    clock.set(3 * HOUR)
    post(medic, alert("gpu-node-03", "GPUHot", 3 * HOUR))
    wait_until("hour 3's notify", lambda: outcomes(medic) == 3, timeout=30)
    assert medic.stop() == 0
    work = suite.subdir("stopped-copies")
    copy = os.path.join(work, "copy.db")
    src = sqlite3.connect(medic.db)
    dst = sqlite3.connect(copy)
    src.backup(dst)
    src.close()
    dst.close()
    out = os.path.join(work, "archive.db")
    r = run(medic, clock, "archive", "--db", medic.db, "--before", "90m", "--out", out)
    assert r.returncode == 0 and "archive 1 in" in r.stdout, r.stdout + r.stderr

    # the copy as the run would have left it, stopped after its first chain
    db = sqlite3.connect(copy)
    record = sqlite3.connect(medic.db).execute(
        "SELECT * FROM audit_archives WHERE id = 1").fetchone()
    db.execute(f"INSERT INTO audit_archives VALUES ({', '.join('?' * len(record))})", record)
    db.execute("UPDATE audit_archives SET state = 'removing'")
    last_action = db.execute("SELECT actions_last_id FROM audit_archives").fetchone()[0]
    assert last_action > 0, record
    db.execute("DELETE FROM actions WHERE id <= ?", (last_action,))
    db.commit()
    db.close()
    r = run(medic, clock, "verify", "--db", copy)
    assert r.returncode == 0 and r.stdout.startswith("ok:"), r.stdout + r.stderr

    # its file gone: said, and nothing changes
    shutil.move(out, out + ".away")
    before = {t: ids(copy, t) for t in ("notifications", "decisions", "actions")}
    r = run(medic, clock, "archive", "--db", copy, "--before", "90m", "--out",
            os.path.join(work, "second.db"))
    assert r.returncode == 1 and "put it back" in r.stderr, r.stdout + r.stderr
    assert {t: ids(copy, t) for t in before} == before
    assert not os.path.exists(os.path.join(work, "second.db"))

    # back, as a run stopped before the archive kept its copy of the record
    # would have left it: finished first, and the copy holds what the
    # complete run left
    shutil.move(out + ".away", out)
    db = sqlite3.connect(out)
    db.execute("DELETE FROM audit_archives")
    db.commit()
    db.close()
    r = run(medic, clock, "verify", "--db", medic.db, "--archive", out)
    assert r.returncode == 1 and "not an archive" in r.stderr, r.stdout + r.stderr
    r = run(medic, clock, "archive", "--db", copy, "--before", "90m", "--out",
            os.path.join(work, "second.db"))
    assert r.returncode == 0 and "finished the earlier archive's removal first" in r.stdout, \
        r.stdout + r.stderr
    for t in ("notifications", "alerts", "decisions", "actions", "incident_changes"):
        assert ids(copy, t) == ids(medic.db, t), t
    state = sqlite3.connect(copy).execute("SELECT state FROM audit_archives").fetchall()
    assert state == [("done",)], state
    for args in (("--db", copy), ("--db", copy, "--archive", out)):
        r = run(medic, clock, "verify", *args)
        assert r.returncode == 0, r.stdout + r.stderr


if __name__ == "__main__":
    Suite(__doc__).run([test_archive_round_trip, test_stopped_archive_finished])
