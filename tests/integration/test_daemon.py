#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The daemon as an operator meets it: never stalled by a Prometheus that
hangs; live mode refused without webhook authentication (at start, by
`medic check config` with FILE:LINE:COL, and on reload) and its read and
admin endpoints guarded; template text that cannot break JSON anywhere;
decided actions that survive kill -9, and no step decided twice when it
lands under load; alerts accepted under raised limits
decided; a raw NUL byte refused; an audit store that cannot commit shown on
/-/ready and recovered by itself; steps of the wall clock (a stand-in for a stepped clock)
that neither stall nor rush the scheduler, fleet scoring or the lease;
SIGTERM under load while the disk's syncs hang: a bounded drain, the
webhooks still waiting answered 503, a clean exit, and every notification
answered 200 stored."""

import datetime
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time

from lab import (SteppedClock, Medic, Prometheus, RecordingReceiver, Suite, free_port, request,
                 wait_until, write_secret)

TOKEN = "daemon-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def alert(alertname, instance, fingerprint, annotations=None, status="firing", starts_at=None):
    return {"status": status, "labels": {"alertname": alertname, "instance": instance, "gpu": "0"},
            "annotations": annotations or {}, "startsAt": rfc3339(starts_at or time.time()),
            "endsAt": "0001-01-01T00:00:00Z", "fingerprint": fingerprint}


def notification(group, alerts):
    return json.dumps({"version": "4", "groupKey": group, "status": alerts[0]["status"],
                       "receiver": "medic", "alerts": alerts})


def live_config(workdir, extra="", notifier_url="http://127.0.0.1:9/"):
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    return (f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
            f"notifiers: {{ oncall: {{ type: webhook, url: '{notifier_url}' }} }}\n"
            "safety: { storm: { max_alerting_nodes: 50, notifier: oncall } }\n" + extra)


def decisions(medic):
    return medic.audit("decisions")


def test_hung_prometheus_stalls_nothing(suite):
    """A Prometheus that accepts and never answers: webhooks, /metrics and
    /-/ready answer while the engine waits on it; the decision says risk
    unknown at the configured timeout and follows risk_unknown."""
    workdir = suite.subdir("hung")
    hang = socket.socket()
    hang.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    hang.bind(("127.0.0.1", 0))
    hang.listen(64)
    suite.on_exit(hang.close)
    accepted = []

    def accept_forever():
        while True:
            try:
                conn, _ = hang.accept()
            except OSError:
                return
            accepted.append(conn)  # held open, never answered

    threading.Thread(target=accept_forever, daemon=True).start()
    port = hang.getsockname()[1]
    medic = Medic(suite.medic, workdir,
                  f"prometheus: {{ url: 'http://127.0.0.1:{port}', timeout: 8s }}\n"
                  # the engine's round is what waits here, not fleet scoring
                  "model: { fleet_interval: off }\n"
                  "policies:\n  - name: tell\n    match: '{alertname=\"GPUXidError\"}'\n"
                  "    when: { risk_unknown: act }\n"
                  "    steps: [ { action: drain } ]\n").start()
    suite.on_exit(medic.stop)
    assert medic.post("/webhook", notification("g0", [alert("GPUXidError", "n1", "f0")]))[0] == 200
    wait_until("the engine asks the hung Prometheus", lambda: accepted, timeout=10)
    # the engine is now waiting on Prometheus; everything else answers, each
    # within a deadline well under the 8 s Prometheus timeout
    for i in range(5):
        status, _, _ = request("POST", medic.url + "/webhook",
                               notification(f"g{i + 1}",
                                            [alert("GPUXidError", f"n{i + 2}", f"f{i + 1}")]),
                               {"Content-Type": "application/json"}, timeout=3)
        assert status == 200, status
        assert request("GET", medic.url + "/metrics", timeout=3)[0] == 200
        assert request("GET", medic.url + "/-/ready", timeout=3)[0] == 200
    # the round is still waiting (no decision yet): none of the answers above
    # waited for it
    assert not decisions(medic), "decided before Prometheus timed out"
    d = wait_until("the decision after the timeout", lambda: decisions(medic), timeout=20)[-1]
    assert d["risk"] is None and "risk unknown" in d["reason"], d
    assert "timeout" in d["reason"].lower() or "timed out" in d["reason"].lower(), d
    assert d["verdict"] == "suppressed" and d["action"] == "drain", d  # act, but no inventory


def test_live_without_auth_is_refused(suite):
    workdir = suite.subdir("noauth")
    medic = Medic(suite.medic, workdir, "mode: live\n")
    proc = subprocess.run([suite.medic, "serve", "--config", medic.config_path],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1, proc
    where = f"{medic.config_path}:3:7: mode: live needs authentication on the webhook"
    assert where in proc.stderr, proc.stderr
    assert not os.path.exists(medic.db), "serve started something before refusing"
    check = subprocess.run([suite.medic, "check", "config", medic.config_path],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 1 and where in check.stderr, check
    # a live config with auth runs; a reload to one without auth is refused
    medic.write_config(live_config(workdir))
    medic.start()
    suite.on_exit(medic.stop)
    good = open(medic.config_path).read()
    medic.write_config("mode: live\n")
    status, _, body = medic.post("/-/reload", "", headers=AUTH, content_type=None)
    assert status == 400 and "3:7: mode: live needs authentication" in body.decode(), (status, body)
    medic.process.send(signal.SIGHUP)
    wait_until("two refused reloads",
               lambda: medic.metric('medic_config_reloads_total{result="failure"}',
                                    headers=AUTH) == 2)
    assert medic.metric("medic_mode_live", headers=AUTH) == 1
    # the old configuration still runs: its token works, none is refused
    assert medic.post("/webhook", notification("a", [alert("X", "n1", "fa")]))[0] == 401
    assert medic.post("/webhook", notification("a", [alert("X", "n1", "fa")]),
                      headers=AUTH)[0] == 200
    # in live mode the read API and the admin endpoint need credentials too
    for path in ("/api/v1/decisions", "/metrics"):
        assert medic.get(path)[0] == 401, path
        assert medic.get(path, headers=AUTH)[0] == 200, path
    assert medic.post("/api/v1/dry-run", "{}")[0] == 401
    assert medic.post("/-/reload", "", content_type=None)[0] == 401
    with open(medic.config_path, "w") as f:
        f.write(good)
    assert medic.post("/-/reload", "", headers=AUTH, content_type=None)[0] == 200


def test_template_text_never_breaks_json(suite):
    workdir = suite.subdir("template")
    receiver = RecordingReceiver()
    suite.on_exit(receiver.stop)
    medic = Medic(suite.medic, workdir, live_config(
        workdir,
        "limits: { max_annotation_value_bytes: 1MiB, max_body_bytes: 4MiB }\n"
        "policies:\n  - name: tell\n    match: '{alertname=\"Chatty\"}'\n"
        "    steps: [ { action: notify, notifier: oncall, message: "
        "'{{ $annotations.description }} on {{ $node }}' } ]\n",
        notifier_url=receiver.url + "/hook")).start()
    suite.on_exit(medic.stop)
    nasty = ("é€😀\"\\\t\x01\x1f</script>" * 4000)[:100000]  # multi-byte, quotes, controls
    long_ascii = "x" * 3000
    body = notification("t", [alert("Chatty", "n1", "t1", {"description": long_ascii}),
                              alert("Chatty", "n2", "t2", {"description": nasty})])
    assert medic.post("/webhook", body, headers=AUTH)[0] == 200
    rows = wait_until("both decisions", lambda: len(decisions(medic)) == 2 and decisions(medic))
    by_node = {r["node"]: r for r in rows}
    assert by_node["n1"]["params"]["message"] == long_ascii + " on n1"  # 3 kB fits whole
    cut = by_node["n2"]["params"]["message"]
    assert cut.endswith(" [...cut by medic]") and len(cut.encode()) <= 16384, len(cut.encode())
    assert nasty.startswith(cut[:-len(" [...cut by medic]")]), "cut inside a character"
    sent = wait_until("both notifications", lambda: len(receiver.received()) == 2
                      and receiver.received())
    messages = sorted(json.loads(r["body"])["message"] for r in sent)
    assert set(messages) == {cut, long_ascii + " on n1"}, [m[:80] for m in messages]
    status, _, answer = medic.get("/api/v1/decisions", headers=AUTH)
    assert status == 200 and len(json.loads(answer)["data"]) == 2
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0, verify
    # the same text through both dry runs (new alerts: the served state
    # already decided these)
    body = body.replace('"t1"', '"t3"').replace('"t2"', '"t4"')
    body = body.replace('"n1"', '"n3"').replace('"n2"', '"n4"')  # nodes with no incident yet
    status, _, answer = medic.post("/api/v1/dry-run", body, headers=AUTH)
    assert status == 200, answer[:200]
    assert any(d["params"]["message"] == cut for d in json.loads(answer)["data"])
    path = os.path.join(workdir, "payload.json")
    with open(path, "w") as f:
        f.write(body)
    out = subprocess.run([suite.medic, "dry-run", "--config", medic.config_path, "--format",
                          "json", path], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert any(d["params"]["message"] == cut for d in json.loads(out.stdout))


def test_decided_actions_survive_kill_9(suite):
    """20 notify decisions to a receiver taking 2 s each, kill -9 a second
    in: after the restart every decision has an outcome (run, or recorded
    interrupted); none disappears."""
    workdir = suite.subdir("kill9")
    receiver = RecordingReceiver(delay=2.0)
    suite.on_exit(receiver.stop)
    medic = Medic(suite.medic, workdir, live_config(
        workdir,
        "policies:\n  - name: tell\n    match: '{alertname=\"Slow\"}'\n"
        "    steps: [ { action: notify, notifier: oncall } ]\n",
        notifier_url=receiver.url + "/hook")).start()
    alerts = [alert("Slow", f"n{i}", f"s{i}") for i in range(20)]
    assert medic.post("/webhook", notification("k", alerts), headers=AUTH)[0] == 200
    wait_until("20 decisions", lambda: len(decisions(medic)) == 20, timeout=20)
    wait_until("a notification under way", lambda: medic.audit("actions"), timeout=10)
    medic.stop(sig=signal.SIGKILL)
    started_before = len(medic.audit("actions"))
    medic.start()
    suite.on_exit(medic.stop)

    def outcomes():
        rows = medic.audit("actions")
        done = {r["decision_id"] for r in rows if r["result"] != "pending"}
        return len(done) == 20 and rows

    rows = wait_until("an outcome for every decision", outcomes, timeout=90)
    results = [r["result"] for r in rows if r["result"] != "pending"]
    assert set(results) <= {"succeeded", "interrupted"}, results
    assert results.count("interrupted") >= 1, results  # the one cut off by the kill
    ids = [r["decision_id"] for r in rows if r["result"] == "pending"]
    assert len(ids) == len(set(ids)), "a decision got two intents"
    print(f"  {started_before} action rows before the kill; after: "
          f"{results.count('succeeded')} succeeded, {results.count('interrupted')} interrupted")


def test_kill_9_under_load_repeats_no_step(suite):
    """Four clients send 200 nodes' alerts, each three times under a new
    group key, while medic is killed with SIGKILL; after the restart the
    clients send everything again (Alertmanager's retries and re-sends).
    Every node's incident decides its step exactly once: the rows of the
    engine's state committed with each round's decisions are all a restart
    needs, whenever the kill lands."""
    workdir = suite.subdir("kill9-load")
    medic = Medic(suite.medic, workdir,
                  "notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/' } }\n"
                  "safety: { storm: { max_alerting_nodes: 1000, notifier: oncall } }\n"
                  "policies:\n  - name: tell\n    match: '{alertname=\"Load\"}'\n"
                  "    steps: [ { action: notify, notifier: oncall } ]\n").start()
    suite.on_exit(medic.stop)
    now = time.time()
    bodies = [notification(f"k{r}-{i}", [alert("Load", f"n{i:03d}", f"l{i}", starts_at=now)])
              for r in range(3) for i in range(200)]
    accepted = []

    def send(part, stop_on_error):
        for body in part:
            try:
                status = medic.post("/webhook", body)[0]
            except OSError:
                if stop_on_error:
                    return
                raise
            accepted.append(status)

    def send_all(stop_on_error):
        threads = [threading.Thread(target=send, args=(bodies[k::4], stop_on_error))
                   for k in range(4)]
        for t in threads:
            t.start()
        return threads

    threads = send_all(stop_on_error=True)
    wait_until("load under way", lambda: len(accepted) >= 150, timeout=30)
    medic.stop(sig=signal.SIGKILL)
    for t in threads:
        t.join(30)
    before = len(accepted)
    medic.start()
    accepted.clear()
    for t in send_all(stop_on_error=False):
        t.join(120)
    assert accepted.count(200) == len(bodies), accepted

    def pending():
        con = sqlite3.connect(f"file:{medic.db}?mode=ro", uri=True, timeout=10)
        try:
            return con.execute("SELECT count(*) FROM notifications WHERE evaluated_at IS NULL"
                               " AND duplicate_of IS NULL").fetchone()[0]
        finally:
            con.close()

    wait_until("every notification evaluated", lambda: pending() == 0, timeout=60)
    rows = wait_until("a decision for every node", lambda: (lambda d: len(
        {r["node"] for r in d}) == 200 and d)(decisions(medic)), timeout=30)
    per_node = {}
    for r in rows:
        per_node.setdefault((r["node"], r["policy"], r["step"]), []).append(r["id"])
    twice = {k: v for k, v in per_node.items() if len(v) > 1}
    assert not twice, f"{len(twice)} steps decided twice, e.g. {list(twice.items())[:5]}"
    assert len(per_node) == 200, len(per_node)
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    print(f"  killed after {before} answers; 200 nodes decided once each")


def test_kill_9_during_checkpoints_loses_nothing_answered(suite):
    """Four clients send notifications large enough that the checkpointer
    copies the WAL into the database every few hundred of them; medic is
    killed with SIGKILL three times while it does, and started again. Every
    notification answered 200 before a kill is in the audit log afterwards,
    the database passes SQLite's integrity check and the hash chains verify:
    a checkpoint cut short loses nothing that was answered."""
    workdir = suite.subdir("kill9-checkpoints")
    medic = Medic(suite.medic, workdir).start()
    suite.on_exit(medic.stop)
    big = {"description": "x" * 2000}
    answered, lock = set(), threading.Lock()
    stop = threading.Event()

    def send(client):
        k = 0
        while not stop.is_set():
            key = f"c{client}-{k}-{time.time_ns()}"
            body = notification(key, [alert("Ckpt", f"n{i:02d}", f"{key}-{i}", big)
                                      for i in range(8)])
            try:
                status = medic.post("/webhook", body)[0]
            except OSError:
                status = None  # killed mid-request: not answered
            if status == 200:
                with lock:
                    answered.add(key)
            k += 1

    def checkpoints():
        try:
            return medic.metric('medic_audit_checkpoints_total{by="checkpointer"}')
        except OSError:
            return 0

    for round_ in range(3):
        stop.clear()
        threads = [threading.Thread(target=send, args=(c,)) for c in range(4)]
        for t in threads:
            t.start()
        # the checkpointer at work before the kill, and again just before it
        wait_until("the checkpointer copying", lambda: checkpoints() >= 2, timeout=60)
        seen = checkpoints()
        wait_until("another checkpoint", lambda: checkpoints() > seen, timeout=60,
                   interval=0.01)
        medic.stop(sig=signal.SIGKILL)
        stop.set()
        for t in threads:
            t.join(30)
        with lock:
            before = set(answered)
        medic.start()
        stored = {n["group_key"] for n in medic.audit("notifications")}
        lost = before - stored
        assert not lost, f"round {round_}: {len(lost)} answered notifications lost"
        print(f"  round {round_}: killed after {len(before)} answers, all of them stored")
    medic.stop()
    con = sqlite3.connect(medic.db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_raised_limits_are_decided(suite):
    workdir = suite.subdir("limits")
    medic = Medic(suite.medic, workdir,
                  "limits: { max_annotation_value_bytes: 1MiB, max_body_bytes: 4MiB }\n"
                  "policies:\n  - name: big\n    match: '{alertname=\"Big\"}'\n"
                  "    steps: [ { action: drain } ]\n").start()
    suite.on_exit(medic.stop)
    body = notification("big", [alert("Big", "n1", "b1", {"description": "y" * 100000})])
    assert medic.post("/webhook", body)[0] == 200
    d = wait_until("the decision", lambda: decisions(medic), timeout=15)
    assert d[0]["action"] == "drain" and d[0]["node"] == "n1", d


def test_raw_nul_refused(suite):
    workdir = suite.subdir("nul")
    medic = Medic(suite.medic, workdir).start()
    suite.on_exit(medic.stop)
    good = notification("nul", [alert("X", "n1", "z1")])
    assert medic.post("/webhook", good)[0] == 200  # the store is alive
    bad = good.replace("n1", "n\x001")
    status, _, body = medic.post("/webhook", bad.encode())
    assert status == 400, status
    assert re.search(r"U\+0000 inside a string at line 1, column \d+", body.decode()), body
    assert len(medic.audit("notifications")) == 1


def test_store_that_cannot_commit(suite):
    """Writes fail (a file size limit of one byte on the daemon, as a full
    disk would): webhooks get 503, /-/ready 503; lifted, both recover by
    themselves and what was answered 200 is all there."""
    workdir = suite.subdir("full")
    medic = Medic(suite.medic, workdir).start()
    suite.on_exit(medic.stop)
    assert medic.post("/webhook", notification("f0", [alert("X", "n1", "d0")]))[0] == 200
    assert medic.get("/-/ready")[0] == 200
    pid = str(medic.process.pid)
    subprocess.run(["prlimit", "--pid", pid, "--fsize=1:unlimited"], check=True)
    answers = [medic.post("/webhook", notification(f"f{i}", [alert("X", "n1", f"d{i}")]))[0]
               for i in range(1, 4)]
    assert 200 not in answers and 503 in answers, answers
    assert medic.get("/-/ready")[0] == 503
    assert medic.metric("medic_audit_store_healthy") == 0
    subprocess.run(["prlimit", "--pid", pid, "--fsize=unlimited:unlimited"], check=True)
    # Alertmanager retries the 503s; the first that commits makes medic ready
    wait_until("a retried webhook commits",
               lambda: medic.post("/webhook", notification("f1", [alert("X", "n1", "d1")]))[0]
               == 200, timeout=20)
    assert medic.get("/-/ready")[0] == 200
    keys = {n["group_key"] for n in medic.audit("notifications")}
    assert {"f0", "f1"} <= keys, keys


def test_wall_clock_steps(suite):
    """The wall clock steps back an hour, then forward a day (the stand-in
    tests/clock_shift; the monotonic clock stays real): each step is logged
    and counted once, and the scheduler's ticks and fleet scoring's cycles
    go on at their pace, neither stalled nor rushed (ticks that compared
    wall-clock times stopped for the hour; waits to a wall-clock deadline
    computed from a stepped time spun)."""
    workdir = suite.subdir("clock")
    prometheus = Prometheus(workdir, [], "groups: []\n", free_port())
    prometheus.start()
    suite.on_exit(prometheus.stop)
    clock = SteppedClock(workdir)
    medic = Medic(suite.medic, workdir,
                  f"prometheus: {{ url: '{prometheus.url}', timeout: 2s }}\n"
                  "model: { fleet_interval: 1s }\nengine: { tick_interval: 200ms }\n")
    medic.env = clock.env()
    medic.start()
    suite.on_exit(medic.stop)

    def fleet_cycles():
        return (medic.metric("medic_fleet_scoring_cycles_total") +
                medic.metric("medic_fleet_scoring_failures_total"))

    def goes_on(what):
        """Ticks every 200 ms and a fleet cycle a second, over 3 s of the
        monotonic clock: neither stalled nor spinning."""
        ticks, cycles = medic.metric("medic_engine_ticks_total"), fleet_cycles()
        wait_until(f"ticks {what}", lambda: medic.metric("medic_engine_ticks_total") >= ticks + 10,
                   timeout=15)
        wait_until(f"fleet cycles {what}", lambda: fleet_cycles() >= cycles + 2, timeout=15)
        start = time.monotonic()
        ticks, cycles = medic.metric("medic_engine_ticks_total"), fleet_cycles()
        wait_until("3 s to pass", lambda: time.monotonic() - start >= 3, timeout=10)
        ticked, cycled = medic.metric("medic_engine_ticks_total") - ticks, fleet_cycles() - cycles
        assert 5 <= ticked <= 30 and 1 <= cycled <= 8, (what, ticked, cycled)

    goes_on("before any step")  # the counters watched below are alive
    assert medic.metric("medic_wall_clock_steps_total") == 0
    for steps, offset in ((1, -3600), (2, 86400)):
        clock.set(offset)
        wait_until(f"the step to {offset} seen", lambda: medic.metric(
            "medic_wall_clock_steps_total") == steps, timeout=10)
        goes_on(f"after the step to {offset}")
        assert medic.post("/webhook", notification(f"clock{steps}", [
            alert("GPUXidError", "n1", f"c{steps}")]))[0] == 200
    log = open(medic.process.log_path).read()
    steps = re.findall(r'msg="the wall clock stepped[^"]*" step=([-+]\d+)\.\d+s', log)
    assert steps in (["-3600", "+90000"], ["-3599", "+89999"], ["-3600", "+89999"],
                     ["-3599", "+90000"]), steps


def test_sigterm_while_the_disk_hangs(suite):
    """Four clients send notifications; the disk stops answering syncs
    (the stand-in tests/slow_sync holds every fsync while a file exists);
    SIGTERM: medic waits its 10 s for the webhooks in flight, answers the
    ones whose commit has not come back 503 (Alertmanager sends them
    again) instead of stopping libmicrohttpd with them suspended, and once
    the disk answers again exits 0 with every notification it answered
    200 stored."""
    library = os.environ.get("MEDIC_SLOW_SYNC", "")
    assert os.path.exists(library), "MEDIC_SLOW_SYNC names tests/slow_sync's library (ctest sets it)"
    workdir = suite.subdir("slowdisk")
    hang = os.path.join(workdir, "hang")
    medic = Medic(suite.medic, workdir)
    medic.env = dict(os.environ, LD_PRELOAD=library, MEDIC_TEST_SLOW_SYNC_FILE=hang,
                     ASAN_OPTIONS="verify_asan_link_order=0:" + os.environ.get("ASAN_OPTIONS", ""))
    medic.start()
    suite.on_exit(lambda: os.path.exists(hang) and os.remove(hang))
    suite.on_exit(medic.stop)
    answers = {}  # group key -> status (or the error)
    stop = threading.Event()

    def client(k):
        i = 0
        while not stop.is_set() and i < 100000:
            key = f"slow-{k}-{i}"
            try:
                answers[key] = request("POST", medic.url + "/webhook", notification(
                    key, [alert("X", f"n{k}", key)]), {"Content-Type": "application/json"},
                    timeout=30)[0]
            except OSError as exc:
                answers[key] = type(exc).__name__
            i += 1
    clients = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(4)]
    for c in clients:
        c.start()
    wait_until("webhooks committed", lambda: list(answers.values()).count(200) >= 50, timeout=30)
    open(hang, "w").close()
    wait_until("a sync held", lambda: os.path.exists(hang + ".held"), timeout=30)
    # the held sync may be the engine's alone: SIGTERM once a webhook waits
    # on it (the in-flight gauge counts it beside the scrape that reads it),
    # else there is nothing to answer 503 and every client is refused
    wait_until("a webhook waiting on the held sync",
               lambda: medic.metric("medic_http_requests_in_flight") >= 2, timeout=30)
    medic.process.send(signal.SIGTERM)
    # the 10 s drain, then the answers: a loaded 2-core machine running
    # the sanitizer build once took longer than 30 s to log them
    wait_until("the waiting webhooks answered 503", lambda: "are answered 503" in open(
        medic.process.log_path).read(), timeout=60)
    stop.set()
    os.remove(hang)  # the disk answers again
    code = medic.process.stop(timeout=30)
    assert code == 0, (code, medic.process.tail())
    for c in clients:
        c.join(30)
    statuses = list(answers.values())
    assert 503 in statuses, statuses[-20:]
    with sqlite3.connect(f"file:{medic.db}?mode=ro", uri=True) as db:
        stored = {row[0] for row in db.execute("SELECT group_key FROM notifications")}
    lost = [k for k, v in answers.items() if v == 200 and k not in stored]
    assert not lost, lost[:10]


if __name__ == "__main__":
    Suite(__doc__).run([test_raw_nul_refused, test_raised_limits_are_decided,
                        test_live_without_auth_is_refused, test_template_text_never_breaks_json,
                        test_hung_prometheus_stalls_nothing, test_decided_actions_survive_kill_9,
                        test_kill_9_under_load_repeats_no_step,
                        test_kill_9_during_checkpoints_loses_nothing_answered,
                        test_store_that_cannot_commit, test_wall_clock_steps,
                        test_sigterm_while_the_disk_hangs])
