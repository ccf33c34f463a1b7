#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One leader among replicas by a lease in a real PostgreSQL 15, and
fencing: three replicas (tests/pg_lease_probe, a TEST PROBE that runs
audit/lease.c's renew and fence the way a leader writing decisions will)
share one database with a 2 s lease; each writes a row per tick while it
leads, in a transaction that checks and share-locks the lease. Exactly one
leads; a leader paused (SIGSTOP) past its lease is replaced within lease
+ 3 s and, woken, writes nothing more (it learns it lost, or is fenced); a
leader frozen inside its fenced transaction (the lease row locked) is
replaced within lease + 3 s and its write never lands; a leader killed
(-9) is replaced within lease + 3 s; a clean release is taken at once. Over the whole run each epoch has one writer and no row of an
older epoch follows one of a newer.

The audit store itself (tests/pg_store_probe, a TEST PROBE over the real
store on PostgreSQL): decisions and action intents are refused without
the lease's current term (none set, a wrong epoch, another replica's name,
a released lease) and written with it; notifications and outcomes are
written whatever the term; the chains verify after."""

import os
import signal
import subprocess

from lab import Process, Suite, wait_until
from postgres_lab import PostgreSQL

LEASE_MS, TICK_MS = 2000, 200


def probe_binary():
    path = os.environ.get("MEDIC_PG_LEASE_PROBE")
    assert path and os.path.exists(path), "MEDIC_PG_LEASE_PROBE names tests/pg_lease_probe"
    return path


class Replica:
    def __init__(self, suite, url, name):
        self.name = name
        self.dir = suite.subdir(name)
        self.process = Process(name, [probe_binary(), url, name, str(LEASE_MS), str(TICK_MS)],
                               self.dir)
        suite.on_exit(self.stop)

    def events(self):
        with open(self.process.log_path) as f:
            return [line.split(" ", 3) for line in f.read().splitlines()]

    def saw(self, event):
        return [e for e in self.events() if len(e) > 1 and e[1] == event]

    def stop(self, sig=signal.SIGTERM):
        if self.process.running():
            os.kill(self.process.pid, signal.SIGCONT)
        return self.process.stop(timeout=5, sig=sig)


def leader(pg):
    rows = pg.sql("SELECT holder, epoch, expires_at > clock_timestamp() FROM medic_lease", "ha")
    return (rows[0][0], int(rows[0][1])) if rows and rows[0][2] == "t" else (None, 0)


def writes(pg):
    return [(int(i), r, int(e), float(t)) for i, r, e, t in pg.sql(
        "SELECT id, replica, epoch, extract(epoch FROM at) FROM probe_writes ORDER BY id", "ha")]


def takeover_after(pg, epoch, since):
    """Seconds from since to the first write of an epoch above epoch."""
    def first():
        later = [w for w in writes(pg) if w[2] > epoch]
        return later[0] if later else None
    w = wait_until(f"a write of an epoch after {epoch}", first, timeout=LEASE_MS / 1000 + 8)
    return w, w[3] - since


def test_one_leader_paused_killed_released(suite):
    pg = PostgreSQL(suite.subdir("pg")).start()
    suite.on_exit(pg.stop)
    url = pg.database("ha")
    replicas = {"medic-a": Replica(suite, url, "medic-a")}
    wait_until("medic-a leads", lambda: replicas["medic-a"].saw("lead"), timeout=20)
    for name in ("medic-b", "medic-c"):
        replicas[name] = Replica(suite, url, name)
    # everyone alive and ticking: a few rounds, still one writer
    wait_until("ten writes", lambda: len(writes(pg)) >= 10, timeout=20)
    assert {w[1] for w in writes(pg)} == {"medic-a"}, writes(pg)
    assert leader(pg) == ("medic-a", 1)

    # SIGSTOP past the lease: another takes over, the woken one writes nothing
    paused = replicas["medic-a"]
    os.kill(paused.process.pid, signal.SIGSTOP)
    stopped_at = float(pg.sql("SELECT extract(epoch FROM clock_timestamp())", "ha")[0][0])
    w, took = takeover_after(pg, 1, stopped_at)
    assert took < LEASE_MS / 1000 + 3, took
    print(f"  medic-a paused: {w[1]} leads epoch {w[2]} after {took:.2f} s "
          f"(lease {LEASE_MS / 1000:.0f} s)")
    os.kill(paused.process.pid, signal.SIGCONT)
    wait_until("medic-a to learn it lost", lambda: paused.saw("lost") or paused.saw("fenced"),
               timeout=10)
    new_epoch = w[2]
    wait_until("more writes of the new term", lambda: len(
        [x for x in writes(pg) if x[2] == new_epoch]) >= 5, timeout=10)
    assert not [x for x in writes(pg) if x[1] == "medic-a" and x[0] > w[0]], writes(pg)
    print(f"  medic-a woken: {(paused.saw('lost') or paused.saw('fenced'))[0][1:]}; "
          "no write of its after the takeover")

    # the leader freezes inside its fenced transaction, the lease row
    # share-locked: the takeover waits for the lock, not forever (the
    # frozen session is ended after 3 s idle in its transaction), and the
    # frozen leader's write never lands
    holder, epoch = leader(pg)
    frozen = replicas[holder]
    with open(os.path.join(frozen.dir, "stall"), "w") as f:
        f.write("8000")
    wait_until(f"{holder} to stall", lambda: frozen.saw("stalling"), timeout=10)
    stalled_at = float(pg.sql("SELECT extract(epoch FROM clock_timestamp())", "ha")[0][0])
    w, took = takeover_after(pg, epoch, stalled_at)
    assert w[1] != holder and took < LEASE_MS / 1000 + 3, (w, took)
    wait_until(f"{holder} to wake", lambda: len(frozen.saw("error")) + len(frozen.saw("lost"))
               + len(frozen.saw("fenced")) > 0, timeout=15)
    assert not [x for x in writes(pg) if x[1] == holder and x[0] > w[0]], writes(pg)
    print(f"  {holder} frozen inside a fenced transaction: {w[1]} leads epoch {w[2]} after "
          f"{took:.2f} s; the frozen write never landed")

    # kill -9 of the leader: replaced within lease + 3 s
    holder, epoch = leader(pg)
    killed_at = float(pg.sql("SELECT extract(epoch FROM clock_timestamp())", "ha")[0][0])
    replicas[holder].stop(sig=signal.SIGKILL)
    w, took = takeover_after(pg, epoch, killed_at)
    assert w[1] != holder and took < LEASE_MS / 1000 + 3, (w, took)
    print(f"  {holder} killed (-9): {w[1]} leads epoch {w[2]} after {took:.2f} s")

    # a clean stop releases the lease: the last replica takes it within a
    # few ticks, not a lease later
    holder, epoch = leader(pg)
    released_at = float(pg.sql("SELECT extract(epoch FROM clock_timestamp())", "ha")[0][0])
    assert replicas[holder].stop() == 0
    assert replicas[holder].saw("released"), replicas[holder].events()
    w, took = takeover_after(pg, epoch, released_at)
    assert took < LEASE_MS / 1000, took
    print(f"  {holder} stopped cleanly: {w[1]} leads epoch {w[2]} after {took:.2f} s")

    # every epoch had one writer, and the epochs never went back
    ws = writes(pg)
    by_epoch = {}
    for _, r, e, _ in ws:
        by_epoch.setdefault(e, set()).add(r)
    assert all(len(v) == 1 for v in by_epoch.values()), by_epoch
    epochs = [e for _, _, e, _ in ws]
    assert epochs == sorted(epochs), epochs
    print(f"  {len(ws)} fenced writes over epochs {sorted(by_epoch)}: one writer each, in order")


def test_store_fences_decisions_and_intents(suite):
    probe = os.environ.get("MEDIC_PG_STORE_PROBE")
    assert probe and os.path.exists(probe), "MEDIC_PG_STORE_PROBE names tests/pg_store_probe"
    pg = PostgreSQL(suite.subdir("pg-store")).start()
    suite.on_exit(pg.stop)
    url = pg.database("store")
    out = subprocess.run([probe, url], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert got == {
        "decision-without-term": "fenced",
        "decision-with-term": "ok",
        "intent-with-term": "ok",
        "decision-with-wrong-epoch": "fenced",
        "outcome-with-wrong-epoch": "ok",
        "decision-as-other-replica": "fenced",
        "decision-after-release": "fenced",
        "intent-after-release": "fenced",
        "notification-after-release": "ok",
        "fenced-count": "5",
    }, out.stdout
    assert pg.sql("SELECT count(*) FROM decisions", "store") == [["1"]]
    assert pg.sql("SELECT phase, result FROM actions ORDER BY id", "store") == [
        ["intent", "pending"], ["outcome", "succeeded"]]
    verify = subprocess.run([suite.medic, "audit", "verify", "--db", url], capture_output=True,
                            text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr


if __name__ == "__main__":
    Suite(__doc__).run([test_one_leader_paused_killed_released,
                        test_store_fences_decisions_and_intents])
