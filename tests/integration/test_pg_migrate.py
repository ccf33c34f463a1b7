#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Moving up from one replica: `medic audit migrate` copies an SQLite audit
log that medic serve wrote (notifications, alerts, decisions, notify
actions with their intents and outcomes, incident changes, engine rows)
into a real PostgreSQL 15 started by the test, in one transaction, and the
hash chains verify there; the two dialects' schemas agree (tables,
columns in order with their types and nullability, indexes); every `medic audit` query, and a replay of a
changed policy, reads the same from either; `medic audit verify --db postgresql://...` names
a row changed behind medic's back; a second migration into the same
database, a wrong password and a log medic never wrote are refused and
change nothing. A log that an earlier medic (schema 5) created in
PostgreSQL is brought up to date by the first replica that opens it."""

import json
import os
import sqlite3
import subprocess
import time

from lab import Medic, RecordingReceiver, Suite, schema_version, wait_until, write_secret
from postgres_lab import PostgreSQL

TOKEN = "pg-migrate-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TABLES = ["notifications", "alerts", "decisions", "actions", "engine_state",
          "incident_changes", "engine_rows", "approvals"]


def alert(node, name, status="firing"):
    t = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    return json.dumps({"version": "4", "groupKey": f"g-{name}-{node}", "status": status,
                       "receiver": "medic", "alerts": [{
                           "status": status, "labels": {"alertname": name, "instance": node},
                           "annotations": {}, "startsAt": t,
                           "endsAt": "0001-01-01T00:00:00Z"}]})


def sqlite_log(suite):
    """An audit log with rows in every chained table."""
    hook = RecordingReceiver()
    suite.on_exit(hook.stop)
    workdir = suite.subdir("sqlite")
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    medic = Medic(suite.medic, workdir,
                  f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  "inventory: { nodes: [ { name: gpu-node-01 }, { name: gpu-node-02 } ] }\n"
                  f"notifiers:\n  hook: {{ type: webhook, url: '{hook.url}/hook' }}\n"
                  "policies:\n  - name: tell\n    match: '{alertname=\"GPUHot\"}'\n"
                  "    steps: [ { action: notify, notifier: hook, message: 'hot {{ $node }}' } ]\n")
    medic.start()
    for node in ("gpu-node-01", "gpu-node-02"):
        assert medic.post("/webhook", alert(node, "GPUHot"), headers=AUTH)[0] == 200
    assert medic.post("/webhook", alert("gpu-node-01", "Unmatched"), headers=AUTH)[0] == 200
    wait_until("two notify outcomes", lambda: len(
        [a for a in medic.audit("actions") if a["phase"] == "outcome"]) == 2, timeout=20)
    assert medic.post("/webhook", alert("gpu-node-01", "GPUHot", "resolved"),
                      headers=AUTH)[0] == 200
    wait_until("the incident recovered", lambda: [
        i for i in medic.audit("incidents", "--node", "gpu-node-01")
        if i["state"] == "recovered"], timeout=20)
    assert medic.stop() == 0
    return medic.db


def counts(db):
    c = sqlite3.connect(db)
    return {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def postgres(suite, name):
    pg = PostgreSQL(suite.subdir(name)).start()
    suite.on_exit(pg.stop)
    return pg


def run(suite, *args):
    return subprocess.run([suite.medic, "audit", *args], capture_output=True, text=True,
                          timeout=120)


SQL_TYPES = {"INTEGER": {"bigint", "integer"}, "TEXT": {"text"}, "BLOB": {"bytea"},
             "REAL": {"double precision"}}


def dialects_agree(db, pg):
    """The schema exists once per dialect (audit/schema.c's migrations,
    audit/postgres.c's DDL): the same tables, each with the same columns
    in the same order, of matching types and nullability, and the same
    indexes by name."""
    lite = sqlite3.connect(db)
    tables = sorted(t for t, in lite.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
    pg_tables = sorted(t for t, in pg.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
        "medic"))
    # PostgreSQL keeps the schema's version and the lease in tables of its own
    assert sorted(set(pg_tables) - {"medic_schema", "medic_lease"}) == tables, (tables, pg_tables)
    for t in tables:
        mine = [(name, typ.upper(), bool(notnull or pk)) for _, name, typ, notnull, _, pk
                in lite.execute(f"PRAGMA table_info({t})")]
        theirs = [(name, typ, nullable == "NO") for name, typ, nullable in pg.sql(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            f"WHERE table_name = '{t}' ORDER BY ordinal_position", "medic")]
        assert [c[0] for c in mine] == [c[0] for c in theirs], (t, mine, theirs)
        for (name, typ, notnull), (_, pg_typ, pg_notnull) in zip(mine, theirs):
            assert pg_typ in SQL_TYPES[typ], (t, name, typ, pg_typ)
            assert notnull == pg_notnull, (t, name, notnull, pg_notnull)
    lite_indexes = sorted(n for n, in lite.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL"))
    pg_indexes = sorted(n for n, in pg.sql(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' "
        "AND indexname NOT LIKE '%_pkey'", "medic"))
    # the one-writer log lists its firsts' key prefixes for its writer's
    # memory; PostgreSQL finds a first by its unique key
    assert set(lite_indexes) - {"notifications_firsts"} <= set(pg_indexes), (
        lite_indexes, pg_indexes)
    assert "notifications_firsts" in lite_indexes and "notifications_firsts" not in pg_indexes
    assert not {"notifications_first_by_dedupe_prefix", "alerts_by_time",
                "alerts_by_alertname"} & set(lite_indexes + pg_indexes), (lite_indexes, pg_indexes)


def test_migrate_then_verify(suite):
    db = sqlite_log(suite)
    want = counts(db)
    assert all(want[t] > 0 for t in ("decisions", "actions", "incident_changes")), want
    pg = postgres(suite, "pg-migrate")
    url = pg.database("medic")
    # a wrong password is refused, and the message does not repeat it
    r = run(suite, "migrate", "--from", db, "--to", pg.url("medic", password="not-it"))
    assert r.returncode == 1 and "password authentication failed" in r.stderr, r.stderr
    assert "not-it" not in r.stderr and pg.password not in r.stderr
    r = run(suite, "migrate", "--from", db, "--to", url)
    assert r.returncode == 0, r.stderr
    assert "hash chains intact" in r.stdout, r.stdout
    for t in TABLES:
        got = int(pg.sql(f"SELECT count(*) FROM {t}", "medic")[0][0])
        assert got == want[t], (t, got, want[t])
    assert pg.sql("SELECT max(version) FROM medic_schema", "medic") == [
        [schema_version(suite.medic)]]
    print(f"  migrated: {r.stdout.strip().splitlines()[0]}")
    dialects_agree(db, pg)
    # the payloads are the bytes stored, as stored
    stored = sqlite3.connect(db).execute(
        "SELECT id, lower(hex(payload)), payload_encoding FROM notifications ORDER BY id")
    assert pg.sql("SELECT id, encode(payload, 'hex'), payload_encoding FROM notifications "
                  "ORDER BY id", "medic") == [[str(i), h, e] for i, h, e in stored]
    r = run(suite, "verify", "--db", url)
    assert r.returncode == 0 and "hash chains intact" in r.stdout, r
    # every query medic audit answers reads the same from either database
    queries = [[k, "--format", "json"] for k in
               ("notifications", "alerts", "decisions", "actions", "incidents", "changes")]
    queries += [["decisions", "--node", "gpu-node-01", "--format", "json"],
                ["timeline", "--node", "gpu-node-01", "--format", "json"],
                ["payload", "1"], ["payload", "3"]]
    for q in queries:
        lite, post = run(suite, *q, "--db", db), run(suite, *q, "--db", url)
        assert lite.returncode == 0 and post.returncode == 0, (q, lite.stderr, post.stderr)
        assert lite.stdout == post.stdout and lite.stdout.strip(), (q, lite.stdout, post.stdout)
    print(f"  {len(queries)} medic audit queries read the same from SQLite and PostgreSQL")
    # so does a replay of a changed policy against the recorded history
    changed = os.path.join(suite.workdir, "changed.yaml")
    with open(changed, "w") as f:
        f.write("mode: live\n"
                "inventory: { nodes: [ { name: gpu-node-01 }, { name: gpu-node-02 } ] }\n"
                "policies:\n  - name: drain-hot\n    match: '{alertname=\"GPUHot\"}'\n"
                "    steps: [ { action: drain } ]\n")
    replays = [subprocess.run([suite.medic, "replay", "--config", changed, "--db", where,
                               "--since", "1h", "--format", "json"],
                              capture_output=True, text=True, timeout=120) for where in (db, url)]
    assert all(r.returncode == 0 for r in replays), [r.stderr for r in replays]
    # the same report, but for its window, which each run takes from its own now
    lite, post = ({k: v for k, v in json.loads(r.stdout).items() if k not in ("since", "until")}
                  for r in replays)
    # new: the two drains the fleet cap holds, and the held steps' notice about them
    assert lite == post and lite["new"] == 3 and lite["gone"] == 2, (lite, post)
    assert [c["new_reason"] for c in lite["changes"] if c["node"] is None][0].startswith(
        "held steps notice: 1 incident(s)"), lite
    print("  medic replay of a changed policy: the same from SQLite and PostgreSQL")
    # a second migration into the same log is refused and adds nothing
    r = run(suite, "migrate", "--from", db, "--to", url)
    assert r.returncode == 1 and "not empty" in r.stderr, r.stderr
    assert int(pg.sql("SELECT count(*) FROM decisions", "medic")[0][0]) == want["decisions"]
    # a row changed behind medic's back is named
    pg.sql("UPDATE decisions SET reason = 'nothing to see' WHERE id = 2", "medic")
    r = run(suite, "verify", "--db", url)
    assert r.returncode == 1 and "chain broken: decisions row 2" in r.stdout, r
    print(f"  after an UPDATE in PostgreSQL: {r.stdout.strip()}")


def test_refusals(suite):
    pg = postgres(suite, "pg-refusals")
    url = pg.database("other")
    junk = os.path.join(suite.workdir, "junk.db")
    with open(junk, "w") as f:
        f.write("not a database")
    r = run(suite, "migrate", "--from", junk, "--to", url)
    assert r.returncode == 1 and "nothing was copied" in r.stderr, r.stderr
    r = run(suite, "migrate", "--from", junk)
    assert r.returncode == 2 and "--to postgresql://" in r.stderr, r.stderr
    # refused before connecting: nothing was created there
    assert pg.sql("SELECT count(*) FROM pg_tables WHERE tablename = 'decisions'",
                  "other") == [["0"]]


class OnPostgres(Medic):
    """`medic serve`, alone, on a PostgreSQL audit log."""

    def __init__(self, suite, url, name):
        self.pg_url = url
        workdir = suite.subdir(name)
        token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
        super().__init__(suite.medic, workdir,
                         f"auth: {{ webhook_bearer_token_file: {token} }}\n", name=name)

    def write_config(self, text):
        with open(self.config_path, "w") as f:
            f.write(f"listen: 127.0.0.1:{self.port}\naudit: {{ url: '{self.pg_url}' }}\n"
                    f"ha: {{ replica: {self.name} }}\n" + text)


def test_schema_upgrade(suite):
    pg = postgres(suite, "pg-upgrade")
    url = pg.database("medic")
    bodies = [alert("gpu-node-01", "GPUHot"), alert("gpu-node-02", "GPUHot")]

    def store(body, times=1):
        medic = OnPostgres(suite, url, "upgrade")
        medic.start()
        for _ in range(times):
            assert medic.post("/webhook", body, headers=AUTH)[0] == 200
        wait_until("every notification evaluated", lambda: pg.sql(
            "SELECT count(*) FROM notifications WHERE evaluated_at IS NULL", "medic") == [["0"]],
            timeout=30)
        assert medic.stop() == 0

    store(bodies[0], times=2)  # the second is a duplicate
    # the log as medic's schema 5 left it: bodies could be 'identity' or
    # 'deflate'; duplicates were never evaluated, nor waited for
    pg.sql("UPDATE notifications SET evaluated_at = NULL WHERE duplicate_of IS NOT NULL;"
           "ALTER TABLE notifications DROP CONSTRAINT notifications_payload_encoding_check,"
           " ADD CONSTRAINT notifications_payload_encoding_check"
           " CHECK (payload_encoding IN ('identity','deflate')) NOT VALID;"
           "DROP INDEX notifications_pending;"
           "CREATE INDEX notifications_pending ON notifications(id)"
           "  WHERE evaluated_at IS NULL AND duplicate_of IS NULL;"
           "ALTER TABLE medic_lease DROP COLUMN config_hash, DROP COLUMN forced,"
           " DROP COLUMN last_forced;"
           "DROP TABLE approvals; DROP TABLE pause_requests; DROP TABLE release_requests;"
           "ALTER TABLE decisions DROP CONSTRAINT decisions_verdict_check,"
           " ADD CONSTRAINT decisions_verdict_check CHECK (verdict IN"
           " ('execute','dry_run','suppressed','no_match','error'));"
           "DELETE FROM medic_schema; INSERT INTO medic_schema VALUES (5)", "medic")
    bad = ("INSERT INTO notifications (received_at, group_key, status, alert_count, dedupe_key,"
           " dedupe_prefix, payload, payload_encoding, payload_bytes)"
           " VALUES (0, 'g', 'firing', 0, 'k', 0, 'x', 'lz4', 1)")
    try:
        pg.sql(bad, "medic")
        refused = ""
    except AssertionError as e:  # what psql said
        refused = str(e)
    assert "payload_encoding_check" in refused, refused
    store(bodies[1])
    assert pg.sql("SELECT max(version) FROM medic_schema", "medic") == [
        [schema_version(suite.medic)]]
    # schema 10: the releases of quarantined nodes
    assert pg.sql("SELECT count(*) FROM release_requests", "medic") == [["0"]]
    # schema 9: approve mode's answers, and the verdict 'pending'
    assert pg.sql("SELECT count(*) FROM approvals", "medic") == [["0"]]
    check = pg.sql("SELECT pg_get_constraintdef(oid) FROM pg_constraint"
                   " WHERE conname = 'decisions_verdict_check'", "medic")
    assert "'pending'" in check[0][0], check
    # schema 8: the lease carries its holder's configuration hash again
    assert pg.sql("SELECT count(*) FROM information_schema.columns WHERE table_name ="
                  " 'medic_lease' AND column_name IN ('config_hash', 'forced', 'last_forced')",
                  "medic") == [["3"]]
    # the duplicate stored before counts as evaluated (by the upgrade, at the
    # time it was received): no backlog after the upgrade
    assert pg.sql("SELECT count(*) FROM notifications WHERE duplicate_of IS NOT NULL"
                  " AND evaluated_at = received_at", "medic") == [["1"]]
    index = pg.sql("SELECT indexdef FROM pg_indexes WHERE indexname = 'notifications_pending'",
                   "medic")
    assert "duplicate_of" not in index[0][0] and "evaluated_at IS NULL" in index[0][0], index
    rows = pg.sql("SELECT id, payload_encoding FROM notifications WHERE duplicate_of IS NULL"
                  " ORDER BY id", "medic")
    assert [e for _, e in rows] == ["lz4", "lz4"], rows
    for (i, _), body in zip(rows, bodies):
        r = run(suite, "payload", i, "--db", url)
        assert r.returncode == 0 and r.stdout.strip() == body, (r.stdout, r.stderr)
    print("  a schema 5 log was upgraded in place; both bodies read back as posted")


if __name__ == "__main__":
    Suite(__doc__).run([test_migrate_then_verify, test_refusals, test_schema_upgrade])
