# SPDX-License-Identifier: Apache-2.0
"""The field's usual Alertmanager webhook receiver, as tutorials write it:
Flask under gunicorn, each notification and its alerts inserted into SQLite
(WAL, synchronous=FULL: durable before the 200) in one transaction, a
notification seen before answered as a duplicate. It is the reference
scale-bench.py runs beside medic; it decides nothing and acts on nothing.

    MEDIC_BENCH_DB=/tmp/ref.db gunicorn -w 5 -b 127.0.0.1:8080 \
        --chdir bench flask_receiver:app"""

import hashlib
import json
import os
import sqlite3
import time

from flask import Flask, jsonify, request

app = Flask(__name__)
_db = None

SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
  id INTEGER PRIMARY KEY, received_at REAL NOT NULL, group_key TEXT NOT NULL,
  status TEXT NOT NULL, receiver TEXT, dedupe_key TEXT NOT NULL UNIQUE, payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS alerts (
  id INTEGER PRIMARY KEY, notification_id INTEGER NOT NULL REFERENCES notifications(id),
  fingerprint TEXT, status TEXT, alertname TEXT, node TEXT, starts_at TEXT, labels TEXT,
  annotations TEXT);
CREATE INDEX IF NOT EXISTS alerts_by_node ON alerts(node);
"""


def db():
    global _db
    if _db is None:
        _db = sqlite3.connect(os.environ["MEDIC_BENCH_DB"], timeout=30, isolation_level=None)
        _db.execute("PRAGMA journal_mode = WAL")
        _db.execute("PRAGMA synchronous = FULL")
        _db.executescript(SCHEMA)
    return _db


@app.post("/webhook")
def webhook():
    body = request.get_data()
    try:
        n = json.loads(body)
        alerts = n["alerts"]
    except (ValueError, KeyError, TypeError):
        return jsonify(error="not an Alertmanager notification"), 400
    key = hashlib.sha256(json.dumps([n.get("groupKey"), n.get("status"),
                                     [(a.get("fingerprint"), a.get("status")) for a in alerts]],
                                    sort_keys=True).encode()).hexdigest()
    con = db()
    con.execute("BEGIN IMMEDIATE")
    try:
        if con.execute("SELECT id FROM notifications WHERE dedupe_key = ?", (key,)).fetchone():
            con.execute("COMMIT")
            return jsonify(status="accepted", duplicate=True)
        cur = con.execute("INSERT INTO notifications (received_at, group_key, status, receiver,"
                          " dedupe_key, payload) VALUES (?, ?, ?, ?, ?, ?)",
                          (time.time(), n.get("groupKey", ""), n.get("status", ""),
                           n.get("receiver"), key, body.decode()))
        nid = cur.lastrowid
        for a in alerts:
            labels = a.get("labels", {})
            con.execute("INSERT INTO alerts (notification_id, fingerprint, status, alertname, node,"
                        " starts_at, labels, annotations) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (nid, a.get("fingerprint"), a.get("status"), labels.get("alertname"),
                         labels.get("Hostname") or labels.get("instance"), a.get("startsAt"),
                         json.dumps(labels), json.dumps(a.get("annotations", {}))))
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return jsonify(status="accepted", id=nid, duplicate=False)
