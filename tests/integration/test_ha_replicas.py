#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Several replicas: three `medic serve` sharing one audit log in a real
PostgreSQL 15 (started by the test as a non-root user), live, with a policy
that notifies a recording receiver outside medic once per alert, so that
every action run is seen there. Every scenario waits on events with
deadlines:
- webhooks round-robin across the replicas, each sent to a second replica
  too (as an Alertmanager HA pair does): every 2xx is stored once, the
  other copy flagged duplicate, each alert decided and acted on once;
- kill -9 of the leader under load: another replica leads within lease +
  3 s, nothing accepted is lost, no action runs twice;
- SIGSTOP of the leader past its lease, then SIGCONT: another leads, and
  the woken one writes no decision, starts no action and steps down;
- PostgreSQL restarted under load: 503 while it is down, then recovery
  with nothing accepted lost;
- a leader paused (SIGSTOP) after Slurm told it a node is drained, while
  its power cycle is under way: another leads and resumes the node; woken,
  the old leader asks for its lease right before the BMC command, and
  sends nothing (a real slurmctld and ipmi_sim BMC);
- replicas started at the same instant on an empty database, many times:
  every one starts (schema creation is serialised among them);
- a replica reloaded with another policy says that its configuration
  differs from the leader's, and does not take the lease when the leader
  dies, until an operator forces it (`medic audit lease --force-takeover`,
  recorded in the lease);
- the leader paused while alerts reach the others: the new leader's own
  first actions, started while it recovers, are never taken for left over
  (none interrupted, none twice);
- approve mode: an answer given to the replica that does not lead is
  taken by the leader from the shared log, and the step runs once;
- a resume queued when the leader was killed is run by the next start
  after its engine was held reading the state until its lease was nearly
  spent: it is not refused under a lease gone meanwhile, its outcome
  reaches the incident, which recovers;
- a leader whose recovery waits on a notifier that never answers keeps
  renewing its lease: one term, no step down;
- a replica whose wall clock is 40 minutes off the database's never
  leads, says so, and leads once its clock is right;
- `medic audit verify` on the log after each."""

import calendar
import json
import os
import re
import signal
import subprocess
import threading
import time

from lab import (HOST, IpmiBmc, Medic, RecordingReceiver, SlurmCluster, SteppedClock, Suite,
                 request, schema_version, wait_until, write_secret)
from postgres_lab import PostgreSQL

TOKEN = "ha-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LEASE = 2.0  # seconds: the scenarios wait lease + 3 s at most for a takeover


class Replica(Medic):
    """`medic serve` on the shared PostgreSQL log."""

    def __init__(self, suite, url, name, config_text):
        self.pg_url = url
        super().__init__(suite.medic, suite.subdir(name), config_text, name=name)
        self.db = url  # what `audit` reads

    def write_config(self, text):
        with open(self.config_path, "w") as f:
            f.write(f"listen: {HOST}:{self.port}\n"
                    f"audit: {{ url: '{self.pg_url}', writers: 3 }}\n"
                    f"ha: {{ replica: {self.name}, lease: {LEASE:g}s }}\n" + text)

    def leads(self):
        try:
            return self.metric(f'medic_ha_leader{{replica="{self.name}"}}', AUTH) == 1
        except (AssertionError, OSError):
            return False

    def webhook(self, body):
        return self.post("/webhook", body, headers=AUTH)


class Cluster:
    def __init__(self, suite, name):
        self.suite = suite
        self.pg = PostgreSQL(suite.subdir(name)).start()
        suite.on_exit(self.pg.stop)
        self.url = self.pg.database("medic")
        self.hook = RecordingReceiver()
        suite.on_exit(self.hook.stop)
        workdir = suite.subdir(name)
        token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
        config = (f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                  f"notifiers:\n  rec: {{ type: webhook, url: '{self.hook.url}/oncall' }}\n"
                  "policies:\n"
                  "  - name: tell-oncall\n"
                  "    match: '{alertname=\"GPUXidError\"}'\n"
                  "    steps: [ { action: notify, notifier: rec, "
                  "message: 'xid on {{ $node }}' } ]\n")
        self.replicas = [Replica(suite, self.url, f"{name}-{i}", config) for i in range(3)]
        for r in self.replicas:
            r.start()
            suite.on_exit(lambda r=r: r.process.running() and (
                os.kill(r.process.pid, signal.SIGCONT), r.stop()))

    def alive(self):
        return [r for r in self.replicas if r.process.running()]

    def leader(self, timeout=LEASE + 3, exclude=None):
        found = []

        def one():
            found[:] = [r for r in self.alive() if r is not exclude and r.leads()]
            return len(found) == 1
        wait_until("one leader", one, timeout=timeout, interval=0.05)
        return found[0]

    def sql(self, statement):
        return self.pg.sql(statement, "medic")

    def count(self, statement):
        return int(self.sql(statement)[0][0])

    def acted_nodes(self):
        return [json.loads(r["body"])["message"].split(" on ")[1]
                for r in self.hook.received("/oncall")]

    def verify(self):
        out = subprocess.run([self.suite.medic, "audit", "verify", "--db", self.url],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr


def payload(node, status="firing"):
    t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return json.dumps({"version": "4", "groupKey": f"g-{node}", "status": status,
                       "receiver": "medic", "alerts": [{
                           "status": status,
                           "labels": {"alertname": "GPUXidError", "instance": f"{node}:9400",
                                      "gpu": "0"},
                           "annotations": {}, "startsAt": t,
                           "endsAt": "0001-01-01T00:00:00Z"}]})


def on_state_read(pg, db, body):
    """Runs body (PL/pgSQL) in each read of the engine's stored state, as the
    engine's start reads it: a restrictive row-level policy on engine_rows
    calls a SECURITY DEFINER function (the superuser may stat a file), so
    that a test can hold or refuse that read. The policy is asked per row:
    the table must hold some."""
    pg.sql("CREATE FUNCTION on_state_read() RETURNS boolean LANGUAGE plpgsql "
           "SECURITY DEFINER AS $$ DECLARE n int := 0; BEGIN "
           "IF current_query() LIKE 'SELECT kind, key, value FROM engine_rows%' THEN "
           f"{body} END IF; RETURN true; END $$", db=db)
    for statement in ("ALTER TABLE engine_rows ENABLE ROW LEVEL SECURITY",
                      "ALTER TABLE engine_rows FORCE ROW LEVEL SECURITY",
                      "CREATE POLICY rows ON engine_rows USING (true) WITH CHECK (true)",
                      "CREATE POLICY read ON engine_rows AS RESTRICTIVE FOR SELECT "
                      "USING (on_state_read())"):
        pg.sql(statement, db=db)


def notifying_replica(suite, name, receiver, safety=""):
    """One live replica on a PostgreSQL server of its own, leading, whose
    policy notifies receiver of every Xid alert: (the server, the replica)."""
    pg = PostgreSQL(suite.subdir(name)).start()
    suite.on_exit(pg.stop)
    workdir = suite.subdir(f"{name}-config")
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    config = (f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
              f"notifiers:\n  oncall: {{ type: webhook, url: '{receiver.url}/hook' }}\n"
              "engine: { tick_interval: 200ms }\n" + safety +
              "policies:\n  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
              "    steps: [ { action: notify, notifier: oncall } ]\n")
    medic = Replica(suite, pg.database(name), f"{name}-a", config)
    medic.start()
    suite.on_exit(medic.stop)
    wait_until("the replica leads", medic.leads, timeout=LEASE + 3)
    return pg, medic


def log_lines(replica):
    """Its log as (unix time, line) pairs."""
    out = []
    with open(replica.process.log_path) as f:
        for line in f:
            if line.startswith("ts="):
                t = calendar.timegm(time.strptime(line[3:22], "%Y-%m-%dT%H:%M:%S"))
                out.append((t + int(line[23:26]) / 1000, line))
    return out


def multi_payload(group_key, nodes):
    t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return json.dumps({"version": "4", "groupKey": group_key, "status": "firing",
                       "receiver": "medic", "alerts": [{
                           "status": "firing",
                           "labels": {"alertname": "GPUXidError", "instance": f"{node}:9400",
                                      "gpu": "0"},
                           "annotations": {"summary": 'a "quoted", {braced} \\ value'},
                           "startsAt": t, "endsAt": "0001-01-01T00:00:00Z"}
                           for node in nodes]})


def every_alert_decided_and_acted_once(c, nodes):
    """Each accepted node's alert has one execute decision and one action
    seen at the receiver; none twice."""
    wanted = set(nodes)
    wait_until("every accepted alert decided", lambda: c.count(
        "SELECT count(DISTINCT node) FROM decisions WHERE verdict = 'execute'") >= len(wanted),
        timeout=30)
    decided = c.sql("SELECT node, count(*) FROM decisions WHERE verdict = 'execute' "
                    "GROUP BY node")
    assert all(int(n) == 1 for _, n in decided), [d for d in decided if int(d[1]) != 1]
    assert wanted <= {node for node, _ in decided}, wanted - {node for node, _ in decided}
    acted = c.acted_nodes()
    assert len(acted) == len(set(acted)), "an action ran twice: " + str(
        sorted(n for n in set(acted) if acted.count(n) > 1))
    # an action the takeover interrupted is not run again, so it may be
    # missing at the receiver; every other one ran
    wait_until("every action run or interrupted", lambda: wanted <= set(c.acted_nodes()) | {
        n for n, in c.sql("SELECT node FROM actions WHERE result = 'interrupted'")}, timeout=30)


def test_round_robin_and_duplicates(suite):
    c = Cluster(suite, "rr")
    c.leader()
    nodes = [f"rr-node-{i:03d}" for i in range(60)]
    answers = {}
    for i, node in enumerate(nodes):
        first, second = c.replicas[i % 3], c.replicas[(i + 1) % 3]
        body = payload(node)
        results = []

        def send(r):
            results.append(r.webhook(body))
        threads = [threading.Thread(target=send, args=(r,)) for r in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        answers[node] = results
    for node, results in answers.items():
        assert [s for s, _, _ in results] == [200, 200], (node, results)
        dup = sorted(json.loads(b)["duplicate"] for _, _, b in results)
        assert dup == [False, True], (node, dup)
    assert c.count("SELECT count(*) FROM notifications WHERE duplicate_of IS NULL") == 60
    assert c.count("SELECT count(*) FROM notifications WHERE duplicate_of IS NOT NULL") == 60
    assert c.count("SELECT count(*) FROM alerts") == 60
    every_alert_decided_and_acted_once(c, nodes)
    # notifications of several alerts stored by all three replicas at once:
    # each one's alerts get consecutive ids in position order (the engine
    # finds alert k at the first id plus k), and each decision names its
    # own alert
    groups = [[f"rr-multi-{g:02d}-{k}" for k in range(4)] for g in range(12)]
    threads = [threading.Thread(target=lambda g=g, i=i: c.replicas[i % 3].webhook(
        multi_payload(f"multi-{i}", g))) for i, g in enumerate(groups)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = c.sql("SELECT n.group_key, a.position, a.id, a.node FROM alerts a "
                 "JOIN notifications n ON n.id = a.notification_id "
                 "WHERE n.group_key LIKE 'multi-%' ORDER BY n.group_key, a.position")
    assert len(rows) == 48, rows
    for g in range(12):
        mine = [r for r in rows if r[0] == f"multi-{g}"]
        ids = [int(r[2]) for r in mine]
        assert ids == list(range(ids[0], ids[0] + 4)), mine
        assert [r[3] for r in mine] == groups[g], mine
    every_alert_decided_and_acted_once(c, [n for g in groups for n in g])
    assert c.count("SELECT count(*) FROM decisions d JOIN alerts a ON a.id = d.alert_id "
                   "WHERE d.node <> a.node") == 0
    wait_until("every action at the receiver", lambda: len(c.acted_nodes()) == 60 + 48,
               timeout=30)
    # the on-call page of a replica that does not lead names the leader
    # and shows the committed state: the same open incidents as the leader's
    leader = c.leader()
    follower = next(r for r in c.replicas if r is not leader)

    def page(r):
        status, _, body = r.get("/", headers=AUTH)
        assert status == 200, status
        return body.decode()
    assert f"{leader.name} leads" in page(follower), page(follower)
    assert f"this replica ({leader.name}) leads" in page(leader)
    count = re.compile(r"open incidents <b>(\d+)</b>")
    wait_until("the same open incidents on both pages", lambda: count.search(page(follower))
               .group(1) == count.search(page(leader)).group(1) != "0", timeout=10)
    c.verify()


class Load:
    """Posts a new alert every `gap` seconds to the live replicas in turn;
    remembers the nodes a 2xx accepted and the statuses seen."""

    def __init__(self, c, prefix, gap=0.02):
        self.c, self.prefix, self.gap = c, prefix, gap
        self.accepted, self.statuses = [], []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        i = 0
        while not self.stop_flag.is_set():
            live = self.c.alive()
            r = live[i % len(live)]
            node = f"{self.prefix}-{i:05d}"
            i += 1
            try:
                status, _, _ = request("POST", r.url + "/webhook", body=payload(node),
                                       headers={**AUTH, "Content-Type": "application/json"},
                                       timeout=5)
            except OSError:
                status = 0  # a replica killed or stopped under the request
            self.statuses.append(status)
            if 200 <= status < 300:
                self.accepted.append(node)
            time.sleep(self.gap)

    def stop(self):
        self.stop_flag.set()
        self.thread.join(30)
        return self.accepted


def stored_nodes(c):
    return {n for n, in c.sql("SELECT node FROM alerts")}


def test_kill_leader_under_load(suite):
    c = Cluster(suite, "kill")
    old = c.leader()
    load = Load(c, "kill-node")
    wait_until("load accepted", lambda: len(load.accepted) >= 30, timeout=30)
    killed_at = time.monotonic()
    old.process.send(signal.SIGKILL)
    new = c.leader(exclude=old)
    took = time.monotonic() - killed_at
    assert took <= LEASE + 3, took
    wait_until("the new leader accepts and decides", lambda: len(load.accepted) >= 120,
               timeout=30)
    accepted = load.stop()
    missing = set(accepted) - stored_nodes(c)
    assert not missing, f"accepted but not stored: {sorted(missing)[:5]}"
    every_alert_decided_and_acted_once(c, accepted)
    assert new.metric("medic_ha_epoch", AUTH) > 1
    print(f"  takeover after kill -9: {took:.2f}s (lease {LEASE:g}s)")
    c.verify()


def test_sigstop_leader_is_fenced(suite):
    c = Cluster(suite, "stop")
    old = c.leader()
    for i in range(20):
        assert old.webhook(payload(f"stop-before-{i:02d}"))[0] == 200
    wait_until("decided before the stop", lambda: c.count(
        "SELECT count(*) FROM decisions WHERE node LIKE 'stop-before-%'") == 20, timeout=20)
    stopped_at = time.monotonic()
    old.process.send(signal.SIGSTOP)
    new = c.leader(exclude=old)
    took = time.monotonic() - stopped_at
    assert took <= LEASE + 3, took
    others = [r for r in c.replicas if r is not old]
    for i in range(20):
        assert others[i % 2].webhook(payload(f"stop-during-{i:02d}"))[0] == 200
    wait_until("the new leader decides", lambda: c.count(
        "SELECT count(*) FROM decisions WHERE node LIKE 'stop-during-%'") == 20, timeout=20)
    # a webhook waits in the stopped leader's socket: when it wakes, it
    # stores it and its engine, which still believes it leads, tries to
    # decide it; the database must refuse that decision
    waiting = []
    sender = threading.Thread(target=lambda: waiting.append(
        old.webhook(payload("stop-woken-00"))))
    sender.start()
    woke_at = time.time()
    old.process.send(signal.SIGCONT)
    sender.join(15)
    assert waiting and waiting[0][0] == 200, waiting
    wait_until("the woken replica steps down", lambda: not old.leads()
               and old.metric('medic_ha_leadership_changes_total{change="lost"}', AUTH) == 1,
               timeout=LEASE + 5)
    wait_until("the new leader decides what the woken one stored", lambda: c.count(
        "SELECT count(*) FROM decisions WHERE node = 'stop-woken-00'") == 1, timeout=20)
    # the woken replica committed no decision and ran no action (it logs
    # each only once committed): the new leader made the one above
    late = [line for line in log_lines(old) if line[0] >= woke_at
            and ('msg="decision"' in line[1] or 'msg="action finished"' in line[1])]
    assert not late, late
    assert old.webhook(payload("stop-after-00"))[0] == 200
    wait_until("the new leader decides what the old one stored", lambda: c.count(
        "SELECT count(*) FROM decisions WHERE node = 'stop-after-00'") == 1, timeout=20)
    fenced = old.metric("medic_audit_fenced_writes_total", AUTH)
    print(f"  writes the woken leader had refused: {fenced:g}")
    assert new.leads()
    every_alert_decided_and_acted_once(
        c, [f"stop-{w}-{i:02d}" for w in ("before", "during") for i in range(20)]
        + ["stop-woken-00", "stop-after-00"])
    print(f"  takeover after SIGSTOP: {took:.2f}s (lease {LEASE:g}s)")
    c.verify()


def test_postgres_restart_under_load(suite):
    c = Cluster(suite, "pgrestart")
    c.leader()
    load = Load(c, "pg-node", gap=0.05)
    wait_until("load accepted", lambda: len(load.accepted) >= 20, timeout=30)
    c.pg.stop("fast")
    wait_until("503 while PostgreSQL is down", lambda: 503 in load.statuses[-5:], timeout=20)
    accepted_while_down = len(load.accepted)
    c.pg.restart()
    wait_until("accepted again after the restart",
               lambda: len(load.accepted) >= accepted_while_down + 20, timeout=40)
    accepted = load.stop()
    c.leader(timeout=LEASE + 10)
    missing = set(accepted) - stored_nodes(c)
    assert not missing, f"accepted but not stored: {sorted(missing)[:5]}"
    every_alert_decided_and_acted_once(c, accepted)
    c.verify()


def test_takeover_with_work_waiting(suite):
    """The leader is paused with four notifications under way (its workers
    wait on a slow endpoint); 30 alerts reach the others before one of them
    leads, so that the new leader's first round decides them all and its
    workers start on them at once, while the takeover recovers what the
    paused leader left: its four intents are recorded interrupted, and its
    recovery takes time to record them. None of the new leader's own work
    is taken for left over: nothing else is interrupted, no decision is
    started twice, every notification is sent once."""
    c = Cluster(suite, "waiting")
    old = c.leader()
    c.hook.delay = 5
    left = [f"waiting-left-{i}" for i in range(4)]
    for node in left:
        assert old.webhook(payload(node))[0] == 200
    wait_until("the paused leader's four intents", lambda: c.count(
        "SELECT count(*) FROM actions WHERE phase = 'intent'") == 4, timeout=20)
    old.process.send(signal.SIGSTOP)
    c.hook.delay = 0.01
    others = [r for r in c.replicas if r is not old]
    nodes = [f"waiting-{i:02d}" for i in range(30)]
    for i, node in enumerate(nodes):
        assert others[i % 2].webhook(payload(node))[0] == 200
    # and more while one of them takes over, each handed to its engine at
    # once once it leads
    led, answers = [], []

    def send_through_the_takeover():
        i = 0
        while (not led or time.monotonic() < led[0] + 1) and i < 600:
            node = f"waiting-t{i:03d}"
            answers.append((node, others[i % 2].webhook(payload(node))[0]))
            i += 1
    sender = threading.Thread(target=send_through_the_takeover)
    sender.start()
    new = c.leader(exclude=old, timeout=LEASE + 5)
    led.append(time.monotonic())
    sender.join(30)
    assert all(status == 200 for _, status in answers), answers
    nodes += [node for node, _ in answers]

    def started_twice():
        return c.sql("SELECT decision_id, count(*) FROM actions WHERE phase = 'intent' "
                     "GROUP BY decision_id HAVING count(*) > 1")
    wait_until("every notification sent, or one started twice", lambda: started_twice() or
               set(nodes) <= set(c.acted_nodes()), timeout=60)
    assert started_twice() == [], started_twice()[:10]
    interrupted = {n for n, in c.sql("SELECT node FROM actions WHERE result = 'interrupted'")}
    assert interrupted == set(left), interrupted
    # the takeover's recovery ran none of the new leader's decisions as
    # left over
    recovered = [line for _, line in log_lines(new) if "work left by a previous medic" in line]
    assert len(recovered) == 1 and "decided_and_run_now=0" in recovered[0], recovered
    acted = [n for n in c.acted_nodes() if n in nodes]
    assert sorted(acted) == nodes, acted
    c.hook.delay = 0
    os.kill(old.process.pid, signal.SIGCONT)
    c.verify()


def test_approval_on_another_replica(suite):
    """Approve mode on two replicas: a drain waits for a person; the answer
    goes to the replica that does not lead, which records it; the leader
    takes it from the shared log and drains the node once (a real
    slurmctld), and the follower answers with what came of it."""
    pg = PostgreSQL(suite.subdir("approve")).start()
    suite.on_exit(pg.stop)
    url = pg.database("approve")
    cluster = SlurmCluster(suite.workdir, ["gpu-node-01"], name="slurm-approve")
    suite.on_exit(cluster.stop)
    cluster.start()
    oncall = RecordingReceiver()
    suite.on_exit(oncall.stop)
    workdir = suite.subdir("approve-config")
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    alice = write_secret(os.path.join(workdir, "alice.token"), "alice-secret")
    config = (f"mode: approve\nauth: {{ webhook_bearer_token_file: {token},\n"
              f"  approvers: [ {{ name: alice, token_file: {alice} }} ] }}\n"
              f"slurm: {{ conf: {cluster.conf} }}\n"
              "inventory:\n  nodes:\n    - { name: gpu-node-01, slurm: { node: gpu-node-01 } }\n"
              f"notifiers: {{ oncall: {{ type: webhook, url: '{oncall.url}/hook' }} }}\n"
              "safety: { max_disruptive_in_flight: 2, max_disrupted_fraction: 1,\n"
              "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
              "policies:\n  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
              "    steps: [ { action: drain } ]\n    on_resolved: [ { action: resume } ]\n")
    a = Replica(suite, url, "approve-a", config)
    a.start()
    suite.on_exit(a.stop)
    wait_until("approve-a leads", a.leads, timeout=LEASE + 3)
    b = Replica(suite, url, "approve-b", config)
    b.start()
    suite.on_exit(b.stop)

    def decisions(verdict):
        out = subprocess.run([suite.medic, "audit", "decisions", "--db", url, "--format",
                              "json", "--node", "gpu-node-01"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return [d for d in json.loads(out.stdout)
                if d["action"] == "drain" and d["verdict"] == verdict]

    assert a.webhook(payload("gpu-node-01"))[0] == 200
    pending = wait_until("the drain pending", lambda: decisions("pending"), timeout=30)
    assert not b.leads() and "DRAIN" not in cluster.node("gpu-node-01")[0]
    status, _, body = b.post(f"/api/v1/approvals/{pending[0]['id']}",
                             json.dumps({"decision": "approve", "reason": "on the follower"}),
                             headers={"Authorization": "Bearer alice-secret"})
    got = json.loads(body)
    assert status == 200 and "approved by alice (on the follower)" in got["data"]["result"], got
    wait_until("the leader drains the node",
               lambda: "DRAIN" in cluster.node("gpu-node-01")[0], timeout=30)
    assert len(decisions("execute")) == 1
    answered = pg.sql("SELECT by_name, result_decision_id IS NOT NULL, evaluated_at IS NOT NULL"
                      " FROM approvals", "approve")
    assert answered == [["alice", "t", "t"]], answered
    out = subprocess.run([suite.medic, "audit", "verify", "--db", url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_paused_leader_sends_no_power_cycle(suite):
    pg = PostgreSQL(suite.subdir("fence")).start()
    suite.on_exit(pg.stop)
    url = pg.database("fence")
    cluster = SlurmCluster(suite.workdir, ["gpu-node-01"], name="slurm-fence")
    suite.on_exit(cluster.stop)
    cluster.start()
    bmc = IpmiBmc(suite.workdir, "gpu-node-01")
    bmc.start()
    suite.on_exit(bmc.stop)
    oncall = RecordingReceiver()
    suite.on_exit(oncall.stop)
    workdir = suite.subdir("fence")
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    creds = write_secret(os.path.join(workdir, "credentials.yaml"),
                         "bmc-lab: { username: admin, password: secret }\n")
    # a stand-in around the real scontrol for the first leader: while HOLD
    # exists, `scontrol show` gets Slurm's answer and then holds it back (a
    # slurmctld slow to answer), saying so in HELD
    hold, held = os.path.join(workdir, "hold"), os.path.join(workdir, "held")
    slow = os.path.join(workdir, "slow-scontrol")
    with open(slow, "w") as f:
        f.write(f"#!/bin/sh\nif [ \"$1\" = show ] && [ -e {hold} ]; then\n"
                "  out=$(scontrol \"$@\"); rc=$?\n"
                f"  touch {held}\n  while [ -e {hold} ]; do sleep 0.05; done\n"
                "  printf '%s\\n' \"$out\"; exit $rc\nfi\nexec scontrol \"$@\"\n")
    os.chmod(slow, 0o755)

    def config(scontrol):
        return (f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
                f"credentials_file: {creds}\n"
                f"slurm: {{ conf: {cluster.conf}, scontrol: {scontrol} }}\n"
                "inventory:\n  nodes:\n    - { name: gpu-node-01, slurm: { node: gpu-node-01 }, "
                f"bmc: {{ address: '{bmc.address}', credentials: bmc-lab, "
                "workarounds: [opensesspriv] } }\n"
                f"notifiers: {{ oncall: {{ type: webhook, url: '{oncall.url}/hook' }} }}\n"
                "engine: { tick_interval: 200ms }\n"
                "safety: { max_disruptive_in_flight: 2, max_disrupted_fraction: 1,\n"
                "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                "policies:\n  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
                "    steps: [ { action: drain }, { after: 3s, action: ipmi_power_cycle } ]\n"
                "    on_resolved: [ { action: resume } ]\n")
    a = Replica(suite, url, "fence-a", config(slow))
    a.start()
    suite.on_exit(lambda: a.process.running() and (os.kill(a.process.pid, signal.SIGCONT),
                                                    a.stop()))
    wait_until("fence-a leads", a.leads, timeout=LEASE + 3)
    b = Replica(suite, url, "fence-b", config("scontrol"))
    b.start()
    suite.on_exit(b.stop)

    def outcomes(action):
        out = subprocess.run([suite.medic, "audit", "actions", "--db", url, "--format", "json"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return [r for r in json.loads(out.stdout) if r["phase"] == "outcome"
                and r["action"] == action]

    assert a.webhook(payload("gpu-node-01"))[0] == 200
    wait_until("the drain", lambda: [o for o in outcomes("drain") if o["result"] == "succeeded"],
               timeout=30)
    open(hold, "w").close()
    # the power cycle comes due: Slurm says the node is drained, and fence-a
    # is paused before it acts on that answer
    wait_until("fence-a's drain check to be held", lambda: os.path.exists(held), timeout=30)
    a.process.send(signal.SIGSTOP)
    wait_until("fence-b leads", b.leads, timeout=LEASE + 5)
    assert b.webhook(payload("gpu-node-01", "resolved"))[0] == 200
    wait_until("fence-b resumes the node", lambda: "DRAIN" not in cluster.node("gpu-node-01")[0],
               timeout=30)
    os.remove(hold)
    woke_at = time.time()
    a.process.send(signal.SIGCONT)
    # woken, fence-a finishes the check with Slurm's old answer; the lease,
    # asked right before the BMC command, says no
    refused = wait_until("fence-a gives the power cycle up", lambda: [
        line for t, line in log_lines(a) if t >= woke_at and 'msg="action finished' in line
        and "action=ipmi_power_cycle" in line], timeout=30)
    assert "not sent" in refused[0], refused
    # its outcome row is refused (the new leader recorded the step): its log
    # says the outcome is not the record, never that it is
    assert "result_unrecorded=refused" in refused[0] and "not in the audit log" in refused[0], \
        refused
    assert bmc.log() == [], bmc.log()
    assert "DRAIN" not in cluster.node("gpu-node-01")[0]
    # the audit log: the step is interrupted (never sent), once
    cycles = outcomes("ipmi_power_cycle")
    assert [o["result"] for o in cycles] == ["interrupted"], cycles


def test_replicas_started_together(suite):
    pg = PostgreSQL(suite.subdir("together")).start()
    suite.on_exit(pg.stop)
    token = write_secret(os.path.join(suite.subdir("together"), "webhook.token"), TOKEN)
    config = f"auth: {{ webhook_bearer_token_file: {token} }}\n"
    for round_ in range(12):
        url = pg.database(f"together{round_}")
        replicas = [Replica(suite, url, f"together{round_}-{i}", config) for i in range(3)]
        for r in replicas:  # all three at once, before any is ready
            r.start(wait=False)
        try:
            for r in replicas:
                wait_until(f"{r.name} ready or gone", lambda r=r: not r.process.running()
                           or r.get("/-/ready")[0] == 200, timeout=30)
            gone = [(r.name, r.process.tail()) for r in replicas if not r.process.running()]
            assert not gone, gone
            assert pg.sql("SELECT count(*), max(version) FROM medic_schema",
                          f"together{round_}") == [["1", schema_version(suite.medic)]]
        finally:
            for r in replicas:
                r.stop()


def lease_shown(url, medic, *extra):
    out = subprocess.run([medic, "audit", "lease", "--db", url, *extra], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    return dict(line.split(":", 1) for line in out.stdout.splitlines())


def test_replica_with_another_configuration(suite):
    pg = PostgreSQL(suite.subdir("config")).start()
    suite.on_exit(pg.stop)
    url = pg.database("medic")
    token = write_secret(os.path.join(suite.subdir("config"), "webhook.token"), TOKEN)
    config = (f"auth: {{ webhook_bearer_token_file: {token} }}\n"
              "notifiers:\n  rec: { type: webhook, url: 'http://127.0.0.1:9/oncall' }\n"
              "policies:\n"
              "  - name: tell-oncall\n"
              "    match: '{alertname=\"GPUXidError\"}'\n"
              "    steps: [ { action: notify, notifier: rec } ]\n")
    replicas = [Replica(suite, url, f"config-{i}", config) for i in range(2)]
    for r in replicas:
        r.start()
        suite.on_exit(lambda r=r: r.process.running() and r.stop())
    found = []
    wait_until("one leader", lambda: (found.__setitem__(slice(None), [
        r for r in replicas if r.leads()]), len(found) == 1)[1], timeout=LEASE + 3)
    leader = found[0]
    other = replicas[1] if leader is replicas[0] else replicas[0]
    assert other.metric("medic_ha_config_matches_leader", AUTH) == 1
    shown = lease_shown(url, suite.medic)
    assert shown["holder"].strip() == leader.name and shown["state"].strip() == "live", shown
    # the other replica is reloaded with another policy: it says so
    other.write_config(config.replace("tell-oncall", "tell-oncall-v2"))
    other.process.send(signal.SIGHUP)
    wait_until("the difference seen", lambda: other.metric(
        "medic_ha_config_matches_leader", AUTH) == 0, timeout=LEASE + 5)
    with open(other.process.log_path) as f:
        assert "configuration differs from the leader's" in f.read()
    status, _, page = other.get("/", headers=AUTH)
    assert status == 200 and "differs from the leader" in page.decode(), page[:2000]
    # the leader dies: the lease expires, and the other replica, alive and
    # renewing (its renewals counted), does not take it
    leader.process.send(signal.SIGKILL)
    wait_until("the leader gone", lambda: not leader.process.running(), timeout=10)
    renewals = lambda: other.metric("medic_ha_lease_renew_duration_seconds_count", AUTH)
    before = renewals()
    wait_until("the lease expired", lambda: lease_shown(url, suite.medic)["state"].strip()
               .startswith("expired"), timeout=LEASE + 3)
    wait_until("renewals past the expiry", lambda: renewals() >= before + 6, timeout=LEASE * 4)
    assert not other.leads()
    assert other.get("/-/ready")[0] == 200  # it still stores webhooks
    # an operator forces it, with a reason: it takes the lease, and says so
    shown = lease_shown(url, suite.medic, "--force-takeover", "RMA of the old leader's host")
    assert "RMA of the old leader's host (forced at" in shown["forced"], shown
    wait_until("the forced takeover", other.leads, timeout=LEASE + 3)
    with open(other.process.log_path) as f:
        log = f.read()
    assert "took the lease with a configuration that differs" in log, log[-2000:]
    shown = lease_shown(url, suite.medic)
    assert shown["holder"].strip() == other.name and shown["forced"].strip() == "(no)", shown
    assert f"(taken by {other.name} at" in shown["last forced"], shown
    assert other.metric("medic_ha_config_matches_leader", AUTH) == 1


def test_replica_with_a_wrong_clock_does_not_lead(suite):
    """A replica started with its wall clock 40 minutes ahead (the clock
    stand-in) compares it with the database's: it says how far off it is
    (log, medic_ha_clock_offset_seconds, and to on-call through
    safety.storm.notifier) and never takes the lease, also once the replica
    that led stops, for it would take every fresh alert for a stale one.
    Once its clock is right again it leads, and on-call hears that too."""
    pg = PostgreSQL(suite.subdir("clock")).start()
    suite.on_exit(pg.stop)
    url = pg.database("clock")
    workdir = suite.subdir("clock-config")
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    oncall = RecordingReceiver()
    suite.on_exit(oncall.stop)
    config = (f"auth: {{ webhook_bearer_token_file: {token} }}\n"
              f"notifiers: {{ oncall: {{ type: webhook, url: '{oncall.url}/hook' }} }}\n"
              "safety: { storm: { notifier: oncall } }\n")
    clock = SteppedClock(suite.subdir("clock-shift"))
    clock.set(2400)
    fast = Replica(suite, url, "clock-fast", config)
    fast.env = clock.env()
    fast.start()
    suite.on_exit(fast.stop)
    wait_until("the offset seen", lambda: abs(fast.metric(
        "medic_ha_clock_offset_seconds", AUTH) - 2400) < 5, timeout=LEASE + 5)
    good = Replica(suite, url, "clock-good", config)
    good.start()
    suite.on_exit(good.stop)
    wait_until("the replica with the right clock leads", good.leads, timeout=LEASE + 3)
    assert not fast.leads()
    good.stop()
    stopped = time.monotonic()
    # three leases pass: the fast replica, alive (it answers, its offset
    # is read afresh), still does not lead
    while time.monotonic() < stopped + 3 * LEASE:
        assert not fast.leads()
        assert abs(fast.metric("medic_ha_clock_offset_seconds", AUTH) - 2400) < 5
        time.sleep(0.2)
    said = [line for _, line in log_lines(fast) if "wall clock is off from the database" in line]
    offset = re.search(r"offset_seconds=(-?[0-9.]+)", said[0]) if len(said) == 1 else None
    assert offset and abs(float(offset.group(1)) - 2400) < 5, said
    wait_until("on-call told how far off the clock is", lambda: [
        m for m in (json.loads(r["body"])["message"] for r in oncall.received("/hook"))
        if re.match(r"medic replica clock-fast: its wall clock is 2[34][0-9][0-9]\.[0-9]+s off "
                    r"from the database's", m)], timeout=15)
    clock.set(0)  # time sync fixed the host
    wait_until("the replica leads once its clock is right", fast.leads, timeout=3 * LEASE + 5)
    wait_until("on-call told it agrees again", lambda: [
        r for r in oncall.received("/hook")
        if b"clock-fast: its wall clock agrees with the database's again" in r["body"]],
        timeout=15)


def test_recovered_undo_reaches_its_incident(suite):
    """A resume decided but still queued when the leader is killed (its four
    action workers busy with drains of four other nodes that a stand-in
    around the real scontrol holds) is run by the next start. That start is
    held while its engine reads the stored state (a row-level policy on the
    state's table in PostgreSQL waits while a file exists) for longer than
    two leases: the lease is renewed meanwhile (one term throughout, no
    step down), and nothing is recovered before the engine is wired to
    hear its outcomes. By then the alert is older than
    safety.max_alert_age (6 s here), which holds back what disrupts but
    never an undo. The resume's outcome reaches its incident, which ends
    `recovered`, not stuck `undoing` holding a cap slot, the node back."""
    pg = PostgreSQL(suite.subdir("undo")).start()
    suite.on_exit(pg.stop)
    url = pg.database("undo")
    nodes = [f"gpu-node-0{i}" for i in range(1, 6)]
    cluster = SlurmCluster(suite.workdir, nodes, name="slurm-undo")
    suite.on_exit(cluster.stop)
    cluster.start()
    oncall = RecordingReceiver()
    suite.on_exit(oncall.stop)
    workdir = suite.subdir("undo-config")
    token = write_secret(os.path.join(workdir, "webhook.token"), TOKEN)
    # the stand-in: a drain of gpu-node-02..05 waits (a minute at most)
    # while no gate file exists, each leaving a mark that it waits
    gate = os.path.join(workdir, "gate")
    held = os.path.join(workdir, "held-scontrol")
    with open(held, "w") as f:
        f.write("#!/bin/sh\ncase \" $* \" in *\" NodeName=gpu-node-0\"[2-5]\" State=DRAIN \"*)\n"
                f"  touch {workdir}/waiting-$$; n=0\n"
                f"  while [ ! -e {gate} ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done;;\n"
                "esac\nexec scontrol \"$@\"\n")
    os.chmod(held, 0o755)
    suite.on_exit(lambda: open(gate, "w").close())
    inventory = "".join(f"    - {{ name: {n}, slurm: {{ node: {n} }} }}\n" for n in nodes)
    config = (f"mode: live\nauth: {{ webhook_bearer_token_file: {token} }}\n"
              f"slurm: {{ conf: {cluster.conf}, scontrol: {held} }}\n"
              f"inventory:\n  nodes:\n{inventory}"
              f"notifiers:\n  oncall: {{ type: webhook, url: '{oncall.url}/hook' }}\n"
              "engine: { tick_interval: 200ms }\n"
              "safety: { max_disruptive_in_flight: 5, max_disrupted_fraction: 1,\n"
              "          storm: { max_alerting_nodes: 20, notifier: oncall },\n"
              "          max_alert_age: 6s }\n"
              "policies:\n  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
              "    steps: [ { action: drain } ]\n    on_resolved: [ { action: resume } ]\n")
    medic = Replica(suite, url, "undo-a", config)
    medic.start()
    suite.on_exit(medic.stop)
    wait_until("the replica leads", medic.leads, timeout=LEASE + 3)

    def actions(action, phase):
        return [a for a in medic.audit("actions") if a["action"] == action and a["phase"] == phase]

    fired_at = time.time()
    fired = payload("gpu-node-01")
    assert medic.webhook(fired)[0] == 200
    wait_until("the drain", lambda: [o for o in actions("drain", "outcome")
                                     if o["result"] == "succeeded"], timeout=30)
    for n in nodes[1:]:  # every action worker waits on a held drain
        assert medic.webhook(payload(n))[0] == 200
    wait_until("four drains held", lambda: len(
        [f for f in os.listdir(workdir) if f.startswith("waiting-")]) == 4, timeout=30)
    resolved = json.loads(fired)
    resolved["status"] = resolved["alerts"][0]["status"] = "resolved"
    resolved["alerts"][0]["endsAt"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    assert medic.webhook(json.dumps(resolved))[0] == 200
    wait_until("the resume decided", lambda: [d for d in medic.audit("decisions")
                                              if d["action"] == "resume"], timeout=30)
    assert actions("resume", "intent") == []  # queued behind the workers
    medic.stop(signal.SIGKILL)
    assert "DRAIN" in cluster.node("gpu-node-01")[0]
    wait_until("the alert to be older than max_alert_age",
               lambda: time.time() > fired_at + 8, timeout=20)
    # the engine's next start waits in its read of the stored state while
    # the hold file exists (the policy runs as the superuser, who may stat it)
    hold = os.path.join(pg.dir, "hold-state-read")
    open(hold, "w").close()
    suite.on_exit(lambda: os.path.exists(hold) and os.unlink(hold))
    on_state_read(pg, "undo", f"WHILE (pg_stat_file('{hold}', true)).size IS NOT NULL "
                  "AND n < 1200 LOOP PERFORM pg_sleep(0.05); n := n + 1; END LOOP;")
    before = len(log_lines(medic))  # the next start's lines follow these
    medic.start(wait=False)
    wait_until("the engine's start held in its read of the state", lambda: pg.sql(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
        "AND query LIKE 'SELECT kind, key, value FROM engine_rows%'", db="undo")[0][0] == "1",
        timeout=30)
    def lease():
        epoch, expires = pg.sql("SELECT epoch, extract(epoch FROM expires_at) FROM medic_lease",
                                db="undo")[0]
        return int(epoch), float(expires)

    # the lease renewed in the same term past two leases while the start waits
    term, expires = lease()
    wait_until("the lease renewed past two leases while the engine starts", lambda: (
        lambda now: now[0] != term or now[1] >= expires + 2 * LEASE)(lease()),
        timeout=LEASE * 6)
    assert lease()[0] == term, "the lease lapsed while the engine started"
    assert actions("resume", "outcome") == []
    os.unlink(hold)
    resumed = wait_until("the recovered resume", lambda: actions("resume", "outcome"),
                         timeout=60)
    assert resumed[0]["result"] == "succeeded", resumed
    wait_until("the incident recovered", lambda: [
        i for i in medic.audit("incidents") if i["node"] == "gpu-node-01"
        and i["state"] == "recovered"], timeout=30)
    assert "DRAIN" not in cluster.node("gpu-node-01")[0]
    wait_until("the cap slot let go", lambda: medic.metric("medic_disrupted_nodes", AUTH) == 0,
               timeout=30)
    since = [line for _, line in log_lines(medic)[before:]]
    assert len([line for line in since if "this replica leads" in line]) == 1, since
    assert not [line for line in since if "no longer leads" in line], since


def test_a_start_that_fails_gives_the_lease_up(suite):
    """The engine's start fails on a shared log: its read of the stored
    state is refused (a row-level policy in PostgreSQL raises while a file
    exists). The replica says so and gives the lease up each time, so that
    another could lead (a new term each time it takes it again), and
    decides nothing meanwhile; once the state can be read it leads, and the
    alert that came in while it could not start is decided and notified."""
    hook = RecordingReceiver()
    suite.on_exit(hook.stop)
    pg, medic = notifying_replica(suite, "fails", hook)
    # an incident first: the engine's state has rows for the policy below
    assert medic.webhook(payload("gpu-node-09"))[0] == 200
    wait_until("the first alert notified", lambda: hook.requests, timeout=30)
    wait_until("its incident in the engine's state", lambda: int(pg.sql(
        "SELECT count(*) FROM engine_rows", db="fails")[0][0]) > 0, timeout=30)
    medic.stop()
    decided = len(medic.audit("decisions"))
    refuse = os.path.join(pg.dir, "refuse-state-read")
    open(refuse, "w").close()
    suite.on_exit(lambda: os.path.exists(refuse) and os.unlink(refuse))
    on_state_read(pg, "fails", f"IF (pg_stat_file('{refuse}', true)).size IS NOT NULL THEN "
                  "RAISE EXCEPTION 'the state read is refused'; END IF;")
    before = len(log_lines(medic))
    medic.start(wait=False)

    def given_up():
        return [line for _, line in log_lines(medic)[before:]
                if "no longer leads" in line and "could not start" in line]

    wait_until("the start refused and the lease given up", given_up, timeout=LEASE * 5)
    assert medic.webhook(payload("gpu-node-01"))[0] == 200
    # twice more after the alert was stored: the replica is alive, and
    # still decides nothing
    seen = len(given_up())
    wait_until("the lease given up twice more", lambda: len(given_up()) >= seen + 2,
               timeout=LEASE * 10)
    assert len(medic.audit("decisions")) == decided, medic.audit("decisions")
    assert len(hook.requests) == 1
    terms = [int(re.search(r"epoch=(\d+)", line).group(1)) for _, line in log_lines(medic)[before:]
             if "this replica leads" in line]
    assert len(terms) >= 3 and len(set(terms)) == len(terms), terms  # a new term each time
    os.unlink(refuse)
    wait_until("the alert notified once the state can be read", lambda: len(hook.requests) == 2,
               timeout=LEASE * 5 + 10)
    wait_until("the replica leads", medic.leads, timeout=LEASE * 3)
    notified = sorted((d["id"], d["node"]) for d in medic.audit("decisions")
                      if d["action"] == "notify")
    assert [node for _, node in notified] == ["gpu-node-09", "gpu-node-01"], notified


def test_recovery_beside_a_hung_notifier_keeps_the_lease(suite):
    """A leader killed while a notify step waits on a receiver that does not
    answer leaves an intent without an outcome. The next start records it
    interrupted and tells on-call through the storm notifier, the same hung
    receiver (one attempt, 2 s): longer than nothing, as long as the lease.
    The lease is renewed all the while: the replica keeps its term (one
    `leads` since the start, no step down)."""
    hung = RecordingReceiver(delay=60)
    suite.on_exit(hung.stop)
    _, medic = notifying_replica(suite, "hung", hung, "safety: { storm: { notifier: oncall } }\n")
    assert medic.webhook(payload("gpu-node-01"))[0] == 200
    wait_until("the notify under way", lambda: [
        a for a in medic.audit("actions") if a["action"] == "notify" and a["phase"] == "intent"],
        timeout=30)
    medic.stop(signal.SIGKILL)
    before = len(log_lines(medic))  # the next start's lines follow these
    medic.start()
    told = wait_until("on-call told (or not) of the interrupted notify", lambda: [
        line for _, line in log_lines(medic)[before:]
        if "told on-call about interrupted actions" in line], timeout=30)
    assert "result=succeeded" not in told[0], told  # the receiver never answered
    # two renewals after the answer gave up: a lease that lapsed while on-call
    # was being told would show by now
    seen = medic.metric("medic_ha_lease_renew_duration_seconds_count", AUTH)
    wait_until("two more renewals", lambda: medic.metric(
        "medic_ha_lease_renew_duration_seconds_count", AUTH) >= seen + 2, timeout=LEASE * 3)
    since = [line for _, line in log_lines(medic)[before:]]
    assert len([line for line in since if "this replica leads" in line]) == 1, since
    assert not [line for line in since if "no longer leads" in line], since
    assert medic.leads()


if __name__ == "__main__":
    Suite(__doc__).run([test_round_robin_and_duplicates, test_kill_leader_under_load,
                        test_sigstop_leader_is_fenced, test_postgres_restart_under_load,
                        test_paused_leader_sends_no_power_cycle, test_replicas_started_together,
                        test_replica_with_another_configuration,
                        test_replica_with_a_wrong_clock_does_not_lead,
                        test_recovered_undo_reaches_its_incident,
                        test_a_start_that_fails_gives_the_lease_up,
                        test_recovery_beside_a_hung_notifier_keeps_the_lease,
                        test_takeover_with_work_waiting,
                        test_approval_on_another_replica])
