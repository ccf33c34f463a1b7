#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""medic serve over real HTTP: every bad input gets its clear error and
writes nothing, auth, TLS, /metrics under promtool, reload, 503 when the
store is unavailable, concurrent commits, a clean SIGTERM, and 600
connections that trickle their headers keeping nobody out."""

import concurrent.futures
import socket
import json
import re
import os
import signal
import sqlite3
import ssl
import subprocess
import threading
import time

from lab import Medic, Suite, fixture, request, require_binary, wait_until, write_secret

TOKEN = "it-webhook-token"


def payload(group="g1", n_alerts=1, status="firing", extra_label=None):
    alerts = []
    for i in range(n_alerts):
        labels = {"alertname": "GPUXidError", "instance": f"gpu-node-0{i % 4 + 1}:9400",
                  "gpu": str(i), "xid": "79"}
        if extra_label:
            labels.update(extra_label)
        alerts.append({"status": status, "labels": labels, "annotations": {},
                       "startsAt": "2026-11-22T07:54:16.335297267Z",
                       "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": ""})
    return json.dumps({"version": "4", "groupKey": group, "truncatedAlerts": 0,
                       "status": status, "receiver": "medic", "groupLabels": {},
                       "commonLabels": {}, "commonAnnotations": {},
                       "externalURL": "http://127.0.0.1:9093", "alerts": alerts})


def rows(medic):
    """Rows in every table, read straight from SQLite."""
    with sqlite3.connect(f"file:{medic.db}?mode=ro", uri=True) as db:
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("notifications", "alerts", "decisions", "actions")}


def start_medic(suite, name, config="", auth=None, tls=None, **kw):
    """medic with bearer auth on the webhook; auth replaces the auth section,
    tls is (cert, key)."""
    workdir = suite.subdir(name)
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    if auth is None:
        auth = f"auth: {{ webhook_bearer_token_file: {token} }}\n"
    if tls:
        config += f"tls: {{ cert_file: {tls[0]}, key_file: {tls[1]} }}\n"
    medic = Medic(suite.medic, workdir, auth + config, **kw)
    if tls:
        medic.scheme = "https"
        medic.context = ssl.create_default_context(cafile=tls[0])
    medic.start()
    suite.on_exit(medic.stop)
    return medic


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_bad_input_gets_clear_error_and_writes_nothing(suite):
    medic = start_medic(suite, "bad", "limits: { max_alerts: 5, max_body_bytes: 64KiB }\n")
    deep = '{"version":"4","x":' + "[" * 70 + "]" * 70 + "}"
    cases = [
        ("invalid JSON", "{nope}", AUTH, "application/json", 400, "invalid JSON at line 1, column "),
        ("truncated body", payload()[:-40], AUTH, "application/json", 400, "truncated?"),
        ("wrong type", payload().replace('"truncatedAlerts": 0', '"truncatedAlerts": "0"'), AUTH,
         "application/json", 400, "truncatedAlerts: expected an integer, got string"),
        ("label not a string", payload().replace('"gpu": "0"', '"gpu": 0'), AUTH,
         "application/json", 400, "alerts[0].labels.gpu: expected a string, got number"),
        ("invalid UTF-8", payload().encode().replace(b"GPUXidError", b"GPU\xffXid", 1), AUTH,
         "application/json", 400, "invalid UTF-8 at line 1"),
        ("nesting deeper than 64", deep, AUTH, "application/json", 400,
         "nested deeper than 64 levels"),
        ("more alerts than the cap", payload(n_alerts=6), AUTH, "application/json", 400,
         "alerts: 6 alerts, over the limit of 5"),
        ("oversized label", payload(extra_label={"big": "x" * 5000}), AUTH, "application/json",
         400, "alerts[0].labels.big: 5000 bytes, over the limit of 4096"),
        ("body over the limit", payload(extra_label={"a": "y" * 70000}), AUTH,
         "application/json", 413, "over the limit of 65536 bytes"),
        ("wrong content type", payload(), AUTH, "text/plain", 415,
         "content type 'text/plain' is not supported"),
        ("no content type", payload(), AUTH, None, 415, "content type '(none)'"),
        ("missing credentials", payload(), {}, "application/json", 401, "credentials required"),
        ("wrong credentials", payload(), {"Authorization": "Bearer nope"}, "application/json",
         401, "wrong credentials"),
        ("basic instead of bearer", payload(), {"Authorization": "Basic bWVkaWM6bWVkaWM="},
         "application/json", 401, "wrong credentials"),
    ]
    for name, body, headers, ctype, code, message in cases:
        status, hdrs, resp = medic.post("/webhook", body, headers=headers, content_type=ctype)
        assert status == code, f"{name}: got {status} {resp!r}, wanted {code}"
        err = json.loads(resp)
        assert err["status"] == "error" and message in err["error"], f"{name}: {err}"
        if code == 401:
            assert hdrs.get("www-authenticate") == 'Bearer realm="medic"', hdrs
        assert medic.get("/-/healthy")[0] == 200, f"{name}: server stopped serving"
    assert rows(medic) == {"notifications": 0, "alerts": 0, "decisions": 0, "actions": 0}
    # a chunked body over the limit is cut off as it arrives
    proc = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-XPOST",
                           "-H", "Content-Type: application/json", "-H",
                           f"Authorization: Bearer {TOKEN}", "-H", "Transfer-Encoding: chunked",
                           "--data-binary", "@-", medic.url + "/webhook"],
                          input=payload(extra_label={"a": "z" * 70000}).encode(),
                          capture_output=True, timeout=30)
    assert proc.stdout == b"413", proc
    assert rows(medic)["notifications"] == 0
    # and then a good one is accepted
    status, _, resp = medic.post("/webhook", payload(), headers=AUTH)
    assert status == 200, resp
    assert json.loads(resp) == {"status": "accepted", "id": 1, "duplicate": False}
    assert rows(medic)["notifications"] == 1
    assert medic.metric('medic_http_requests_total{handler="/webhook",code="400"}') == 8
    assert medic.metric('medic_http_requests_total{handler="/webhook",code="401"}') == 3


def test_methods_and_routes(suite):
    medic = start_medic(suite, "routes")
    status, hdrs, body = medic.get("/webhook")
    assert status == 405 and hdrs["allow"] == "POST", (status, hdrs)
    assert "method GET is not allowed on /webhook" in json.loads(body)["error"]
    assert medic.post("/-/healthy", "{}")[0] == 405
    assert medic.get("/nope")[0] == 404
    assert medic.get("/-/healthy")[0] == 200
    assert medic.get("/-/ready")[0] == 200


def test_real_payloads_and_duplicates(suite):
    medic = start_medic(suite, "dup")
    names = ["am-webhook-firing.json", "am-webhook-multi-alert.json",
             "am-webhook-partially-resolved.json", "am-webhook-resolved.json",
             "am-webhook-from-prometheus-firing.json", "am-webhook-from-prometheus-resolved.json"]
    ids = {}
    for name in names:
        status, _, body = medic.post("/webhook", fixture(name), headers=AUTH)
        assert status == 200, (name, body)
        res = json.loads(body)
        assert res["duplicate"] is False, (name, res)
        ids[name] = res["id"]
    # Alertmanager's retry: the byte-identical body again
    status, _, body = medic.post("/webhook", fixture("am-webhook-multi-alert.json"), headers=AUTH)
    res = json.loads(body)
    assert status == 200 and res["duplicate"] is True, res
    assert res["duplicate_of"] == ids["am-webhook-multi-alert.json"], res
    # an HA replica's copy: other externalURL and receiver, same alerts
    copy = json.loads(fixture("am-webhook-firing.json"))
    copy["externalURL"] = "http://127.0.0.1:19022"
    status, _, body = medic.post("/webhook", json.dumps(copy), headers=AUTH)
    assert json.loads(body)["duplicate_of"] == ids["am-webhook-firing.json"], body
    notes = medic.audit("notifications")
    assert len(notes) == 8 and sum(1 for n in notes if n["duplicate_of"]) == 2, notes
    alerts = medic.audit("alerts")
    assert len(alerts) == 1 + 3 + 3 + 1 + 1 + 1, len(alerts)
    resolved = medic.audit("alerts", "--status", "resolved")
    assert {a["status"] for a in resolved} == {"resolved"} and len(resolved) == 3, resolved
    node2 = medic.audit("alerts", "--node", "gpu-node-02")
    assert node2 and all(a["node"] == "gpu-node-02" for a in node2), node2
    # the raw payload is kept byte for byte (stored compressed)
    for name, nid in ids.items():
        raw = subprocess.run([suite.medic, "audit", "payload", str(nid), "--db", medic.db],
                             capture_output=True, timeout=30)
        assert raw.returncode == 0 and raw.stdout == fixture(name), (name, raw.stderr)
    with sqlite3.connect(f"file:{medic.db}?mode=ro", uri=True) as db:
        stored, original = db.execute("SELECT sum(length(payload)), sum(payload_bytes) "
                                      "FROM notifications").fetchone()
    print(f"  payloads stored in {stored} bytes for {original} received")
    assert stored < original
    missing = subprocess.run([suite.medic, "audit", "payload", "999", "--db", medic.db],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 1 and "no notification 999" in missing.stderr, missing
    assert medic.metric("medic_duplicates_total") == 2
    # the read API answers the same query
    status, _, body = medic.get("/api/v1/alerts?node=gpu-node-02&status=firing")
    data = json.loads(body)
    assert status == 200 and data["status"] == "success" and data["data"], body
    # the policy engine evaluated every first notification (this config has
    # no policies: each firing alert instance is one no_match, recorded once:
    # 1 + 3 + 1 instances; repeats and resolutions add none)
    def decisions_now():
        return json.loads(medic.get("/api/v1/decisions?since=1h")[2])["data"]
    # all 8 notifications evaluated (duplicates too): the engine has seen
    # everything, and recorded no more than these
    wait_until("every notification evaluated", lambda: medic.metric(
        "medic_engine_notifications_evaluated_total") == 8)
    decisions = decisions_now()
    assert len(decisions) == 5, decisions
    assert {d["verdict"] for d in decisions} == {"no_match"}, decisions
    assert {d["notification_id"] for d in decisions} <= set(ids.values()), decisions
    assert medic.get("/api/v1/decisions?since=yesterday")[0] == 400


def test_metrics_pass_promtool(suite):
    promtool = require_binary("promtool")
    medic = start_medic(suite, "metrics")
    medic.post("/webhook", payload(), headers=AUTH)
    medic.post("/webhook", "{", headers=AUTH)
    status, hdrs, body = medic.get("/metrics")
    assert status == 200 and hdrs["content-type"].startswith("text/plain; version=0.0.4")
    check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                           timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == b"" and check.stderr.strip() == b"", check
    text = body.decode()
    for name in ("medic_http_requests_total", "medic_notifications_total",
                 "medic_alerts_total", "medic_duplicates_total",
                 "medic_audit_commit_duration_seconds_bucket", "medic_build_info",
                 "medic_audit_queue_depth"):
        assert name in text, name
    assert medic.metric('medic_notifications_total{result="accepted"}') == 1
    assert medic.metric('medic_alerts_total{status="firing"}') == 1
    assert medic.metric("medic_audit_commit_duration_seconds_count") >= 1


def test_read_and_admin_credentials(suite):
    workdir = suite.subdir("creds")
    read_token = write_secret(os.path.join(workdir, "read.token"), "reader")
    admin_pw = write_secret(os.path.join(workdir, "admin.pw"), "adminpw")
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    medic = start_medic(suite, "creds", auth="auth:\n"
                        f"  webhook_bearer_token_file: {token}\n"
                        f"  read_bearer_token_file: {read_token}\n"
                        f"  admin_basic_auth: {{ username: ops, password_file: {admin_pw} }}\n")
    assert medic.get("/api/v1/decisions")[0] == 401
    assert medic.get("/metrics")[0] == 401
    assert medic.get("/api/v1/decisions", headers={"Authorization": "Bearer reader"})[0] == 200
    assert medic.get("/metrics", headers={"Authorization": "Bearer reader"})[0] == 200
    # the webhook token does not open the read API, nor the reverse
    assert medic.get("/api/v1/decisions", headers=AUTH)[0] == 401
    assert medic.post("/webhook", payload(), headers={"Authorization": "Bearer reader"})[0] == 401
    status, hdrs, _ = medic.post("/-/reload", "", content_type=None)
    assert status == 401 and hdrs["www-authenticate"] == 'Basic realm="medic"'
    # the page with only a bearer token: a browser cannot sign in, and the
    # answer says what to set
    status, hdrs, body = medic.get("/")
    assert status == 401 and hdrs["www-authenticate"] == 'Bearer realm="medic"', hdrs
    assert b"set auth.read_basic_auth" in body, body
    ops = {"Authorization": "Basic b3BzOmFkbWlucHc="}  # ops:adminpw
    status, _, body = medic.post("/-/reload", "", headers=ops, content_type=None)
    assert status == 200, body
    wrong = {"Authorization": "Basic b3BzOmFkbWlucHg="}  # ops:adminpx
    assert medic.post("/-/reload", "", headers=wrong, content_type=None)[0] == 401
    # the admin may read whatever the read credential may
    for path in ("/api/v1/decisions", "/api/v1/approvals", "/metrics"):
        assert medic.get(path, headers=ops)[0] == 200, path
        assert medic.get(path, headers=wrong)[0] == 401, path
    assert medic.post("/api/v1/dry-run", payload(), headers=ops)[0] == 200
    # the admin's credential is not the webhook's
    assert medic.post("/webhook", payload(), headers=ops)[0] == 401


def test_reload_keeps_running_config_when_invalid(suite):
    medic = start_medic(suite, "reload")
    good = open(medic.config_path).read()
    with open(medic.config_path, "a") as f:
        f.write("mode: sideways\n")
    medic.process.send(signal.SIGHUP)
    wait_until("failed reload counted",
               lambda: medic.metric('medic_config_reloads_total{result="failure"}') == 1)
    assert medic.metric("medic_config_last_reload_successful") == 0
    assert medic.post("/webhook", payload("r1"), headers=AUTH)[0] == 200  # old token still works
    status, _, body = medic.post("/-/reload", "", content_type=None)
    # a refused configuration is the client's to fix: 400 with FILE:LINE:COL
    error = json.loads(body)["error"]
    assert status == 400, status
    assert re.search(r"medic\.yaml:\d+:\d+: mode: expected 'dry-run', 'approve' or 'live'", error), error
    # a valid change takes effect: a new token
    new_token = write_secret(os.path.join(medic.workdir, "webhook2.token"), "rotated")
    with open(medic.config_path, "w") as f:
        f.write(good.replace("webhook.token", "webhook2.token"))
    medic.process.send(signal.SIGHUP)
    wait_until("reload", lambda: medic.metric('medic_config_reloads_total{result="success"}') == 1)
    assert medic.metric("medic_config_last_reload_successful") == 1
    assert medic.post("/webhook", payload("r2"), headers=AUTH)[0] == 401
    assert medic.post("/webhook", payload("r2"),
                      headers={"Authorization": "Bearer rotated"})[0] == 200
    assert new_token


def test_tls(suite):
    openssl = require_binary("openssl")
    workdir = suite.subdir("tls")
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
    os.chmod(key, 0o600)
    medic = start_medic(suite, "tls", tls=(cert, key))
    status, _, body = medic.post("/webhook", payload(), headers=AUTH)
    assert status == 200 and json.loads(body)["id"] == 1, body
    # plain HTTP on the TLS port is not served
    try:
        plain = request("GET", f"http://127.0.0.1:{medic.port}/-/healthy", timeout=3)[0]
    except Exception:
        plain = None
    assert plain != 200


def wait_for_first_state_row(medic):
    """A fresh engine saves its first state row at start: the tests that
    lock the database let that commit first."""
    def saved():
        con = sqlite3.connect(f"file:{medic.db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM engine_rows WHERE kind = 'engine'"
                               ).fetchone()[0] == 1
        finally:
            con.close()
    wait_until("the engine's first state row", saved, timeout=10)


def test_store_unavailable_gives_503_then_recovers(suite):
    # a short busy timeout, so that the lock below makes the commit fail fast
    medic = start_medic(suite, "locked", audit_options=", busy_timeout: 200ms")
    wait_for_first_state_row(medic)  # or its commit would fail under the lock too
    locker = sqlite3.connect(medic.db, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        status, hdrs, resp = medic.post("/webhook", payload("locked"), headers=AUTH)
        assert status == 503, (status, resp)
        assert "locked" in json.loads(resp)["error"] and hdrs.get("retry-after") == "1"
    finally:
        locker.execute("COMMIT")
        locker.close()
    assert rows(medic)["notifications"] == 0
    status, _, resp = medic.post("/webhook", payload("locked"), headers=AUTH)
    assert status == 200 and json.loads(resp)["duplicate"] is False, resp
    assert medic.metric("medic_audit_commit_failures_total") == 1


def test_full_queue_gives_503(suite):
    # one queued request at most, and a writer held up by another process's lock
    medic = start_medic(suite, "queue", audit_options=", busy_timeout: 3s, max_pending: 1")
    wait_for_first_state_row(medic)  # or it could be the request the writer waits with
    locker = sqlite3.connect(medic.db, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    results = {}

    def post(name):
        results[name] = medic.post("/webhook", payload(name), headers=AUTH)

    try:
        first = threading.Thread(target=post, args=("q1",))
        first.start()  # taken by the writer, which waits for the lock
        time.sleep(0.5)
        second = threading.Thread(target=post, args=("q2",))
        second.start()  # waits in the queue
        wait_until("q2 queued", lambda: medic.metric("medic_audit_queue_depth") == 1, timeout=5)
        status, hdrs, body = medic.post("/webhook", payload("q3"), headers=AUTH)
        assert status == 503, (status, body)
        assert "queue is full" in json.loads(body)["error"] and hdrs["retry-after"] == "1"
    finally:
        locker.execute("COMMIT")
        locker.close()
    first.join(10)
    second.join(10)
    # the lock was released within the writer's busy timeout: both committed
    assert results["q1"][0] == 200 and results["q2"][0] == 200, results
    assert rows(medic)["notifications"] == 2


def test_concurrent_requests_share_commits(suite):
    # 32 clients from one address open a connection per request: one they
    # closed still counts against the per-address cap (64) until the server
    # has reaped it, which a slow build may not do in time; the cap is not
    # what this test is about (test_trickling_connections_keep_nobody_out is)
    medic = start_medic(suite, "concurrent", "limits: { max_connections_per_address: 512 }\n")
    n = 200

    def post(i):
        return medic.post("/webhook", payload(f"group-{i}", n_alerts=3), headers=AUTH)

    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(post, range(n)))
    assert all(r[0] == 200 for r in results), [r for r in results if r[0] != 200][:3]
    ids = sorted(json.loads(r[2])["id"] for r in results)
    assert ids == list(range(1, n + 1)), ids[:10]
    assert rows(medic)["alerts"] == 3 * n
    commits = medic.metric("medic_audit_commit_duration_seconds_count")
    assert medic.metric('medic_notifications_total{result="accepted"}') == n
    print(f"  {n} concurrent notifications in {int(commits)} commits")


def test_sigterm_drains_and_closes_cleanly(suite):
    medic = start_medic(suite, "drain")
    answers = []
    stop = threading.Event()

    def client(k):
        i = 0
        while not stop.is_set():
            try:
                status, _, body = medic.post("/webhook", payload(f"drain-{k}-{i}"), headers=AUTH)
                answers.append((status, body))
            except OSError:
                return
            i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    wait_until("some traffic", lambda: len(answers) >= 50, timeout=20)
    code = medic.stop()
    stop.set()
    for t in threads:
        t.join(10)
    assert code == 0, (code, medic.process.tail())
    accepted = {json.loads(b)["id"] for s, b in answers if s == 200}
    # every 200 that went out is in the log; nothing partial
    with sqlite3.connect(medic.db) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {r[0] for r in db.execute("SELECT id FROM notifications")}
        per_note = db.execute("SELECT count(*) FROM notifications n WHERE alert_count != "
                              "(SELECT count(*) FROM alerts a WHERE a.notification_id = n.id)"
                              ).fetchone()[0]
    assert accepted <= stored, accepted - stored
    assert per_note == 0
    log = medic.process.tail()
    assert "shutting down" in log and "audit log closed" in log, log


def test_audit_cli_while_serving(suite):
    medic = start_medic(suite, "cli")
    for i in range(3):
        medic.post("/webhook", payload(f"cli-{i}"), headers=AUTH)
    table = subprocess.run([suite.medic, "audit", "notifications", "--db", medic.db],
                           capture_output=True, text=True, timeout=30)
    assert table.returncode == 0 and table.stdout.startswith("ID "), table
    assert len(table.stdout.strip().splitlines()) == 4
    csv = subprocess.run([suite.medic, "audit", "alerts", "--db", medic.db, "--format", "csv",
                          "--limit", "2"], capture_output=True, text=True, timeout=30)
    assert csv.returncode == 0 and len(csv.stdout.splitlines()) == 3, csv
    bad = subprocess.run([suite.medic, "audit", "alerts", "--db", medic.db, "--verdict", "x"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "--verdict does not apply to alerts" in bad.stderr, bad
    # the HTTP API names its query parameter, not the command line's option
    status, _, body = medic.get("/api/v1/alerts?verdict=execute")
    assert status == 400 and b"the query parameter verdict does not apply to alerts" in body, body
    assert b"--verdict" not in body
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", medic.db],
                            capture_output=True, text=True, timeout=30)
    assert verify.returncode == 0 and verify.stdout.startswith("ok:"), verify


def test_trickling_connections_keep_nobody_out(suite):
    """600 unauthenticated connections from ten other loopback addresses
    (more than the 512 connections medic serves at once), each sending its
    header a byte a second, on the built-in limits: one address holds at
    most 64 connections, every one of them is closed at the request
    deadline (10 s) however it trickles, and Alertmanager, retrying as it
    does, gets its webhook answered, and /-/healthy answers, within it."""
    medic = start_medic(suite, "trickle")
    port = medic.port
    assert medic.post("/webhook", payload("trickle-0"), headers=AUTH)[0] == 200  # alive
    # one address: 100 connections, of which medic keeps 64 and closes the
    # rest at once (long before any deadline)
    greedy = []
    for _ in range(100):
        s = socket.socket()
        s.bind(("127.0.0.12", 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        greedy.append(s)
    suite.on_exit(lambda: [s.close() for s in greedy])

    def refused():
        n = 0
        for s in greedy:
            try:
                n += s.recv(1) == b""
            except BlockingIOError:
                pass
            except OSError:
                n += 1
        return n
    wait_until("36 of one address's connections refused", lambda: refused() == 36, timeout=5)
    for s in greedy:
        s.close()
    stop = threading.Event()
    socks = []
    for a in range(2, 12):  # 127.0.0.2 .. 127.0.0.11, 60 each
        for _ in range(60):
            s = socket.socket()
            s.bind((f"127.0.0.{a}", 0))
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)
    suite.on_exit(lambda: [s.close() for s in socks])
    suite.on_exit(stop.set)
    header = b"POST /webhook HTTP/1.1\r\nHost: medic\r\nX-Slow: " + b"a" * 200

    def trickle():
        for i in range(len(header)):
            if stop.wait(1.0):
                return
            for s in socks:
                try:
                    s.send(header[i:i + 1])
                except OSError:
                    pass  # closed by medic
    threading.Thread(target=trickle, daemon=True).start()
    # every connection medic accepted is closed by the deadline (the
    # trickle never ends a header)
    wait_until("the trickling connections closed", lambda: medic.metric(
        "medic_http_request_deadline_closed_total", headers=AUTH) >= 500, timeout=30)
    # Alertmanager retries a webhook that got no answer
    def webhook_answered():
        try:
            return request("POST", medic.url + "/webhook", payload("trickle-1"),
                           {"Content-Type": "application/json", **AUTH}, timeout=2)[0] == 200
        except OSError:
            return False
    wait_until("the webhook answered", webhook_answered, timeout=30, interval=0.5)
    assert request("GET", medic.url + "/-/healthy", timeout=2)[0] == 200
    # at most the 512 connections medic serves were open to be closed
    closed = medic.metric("medic_http_request_deadline_closed_total", headers=AUTH)
    assert 500 <= closed <= 512, closed
    stop.set()


if __name__ == "__main__":
    Suite(__doc__).run([
        test_bad_input_gets_clear_error_and_writes_nothing,
        test_methods_and_routes,
        test_real_payloads_and_duplicates,
        test_metrics_pass_promtool,
        test_read_and_admin_credentials,
        test_reload_keeps_running_config_when_invalid,
        test_tls,
        test_store_unavailable_gives_503_then_recovers,
        test_full_queue_gives_503,
        test_concurrent_requests_share_commits,
        test_sigterm_drains_and_closes_cleanly,
        test_audit_cli_while_serving,
        test_trickling_connections_keep_nobody_out,
    ])
