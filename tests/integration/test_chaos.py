#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Chaos: two `medic serve` replicas on one PostgreSQL log (lease 2 s),
live, against a real Slurm cluster of four nodes and their ipmi_sim BMCs
(a power cycle really restarts the node's slurmd). For MEDIC_CHAOS_SECONDS
(90 by default) Xid episodes come and go on random nodes, sent to either
replica and sometimes to both (an Alertmanager HA pair); an operator drains
and resumes nodes by hand, and sometimes resumes a node medic drained; a
person releases quarantined nodes; and every
few seconds a fault strikes: the leader killed (kill -9, then started
again), the leader frozen past its lease (SIGSTOP, then SIGCONT), or
PostgreSQL restarted.

Checked at every step (each second): the nodes Slurm shows drained with
medic's mark never exceed the fleet cap plus the nodes medic quarantined;
an operator's drain is never undone by medic. Checked at the end, once the
faults stop, every episode resolved and every quarantined node released:
medic's record and the fleet agree (no node drained with medic's mark,
none medic counts as disrupted), every decision that executed an action
has exactly one intent and one outcome, every accepted notification is
stored and evaluated, and `medic audit verify` holds."""

import json
import os
import random
import signal
import subprocess
import threading
import time

from lab import IpmiBmc, RecordingReceiver, SlurmCluster, Suite, request, wait_until, write_secret
from postgres_lab import PostgreSQL
from test_approvals import payload
from test_ha_replicas import AUTH, TOKEN, Replica  # its metrics read with this token

LEASE = 2.0  # test_ha_replicas' Replica's
NODES = [f"gpu-node-{i}" for i in range(61, 65)]
CAP = 2  # max_disrupted_fraction 0.5 of four nodes
SECONDS = float(os.environ.get("MEDIC_CHAOS_SECONDS", "90"))
MARK = "(medic policy "


class Chaos:
    def __init__(self, suite):
        self.suite = suite
        self.pg = PostgreSQL(suite.subdir("chaos-pg")).start()
        suite.on_exit(self.pg.stop)
        self.url = self.pg.database("medic")
        self.cluster = SlurmCluster(suite.workdir, NODES, name="slurm-chaos")
        suite.on_exit(self.cluster.stop)
        self.cluster.start()
        self.bmcs = {}
        for n in NODES:
            b = IpmiBmc(suite.workdir, n).boots(self.cluster, n)
            b.start()
            suite.on_exit(b.stop)
            self.bmcs[n] = b
        self.oncall = RecordingReceiver()
        suite.on_exit(self.oncall.stop)
        work = suite.subdir("chaos")
        token = write_secret(os.path.join(work, "token"), TOKEN)
        creds = write_secret(os.path.join(work, "credentials.yaml"),
                             "bmc-lab: { username: admin, password: secret }\n")
        nodes = "".join(
            f"    - {{ name: {n}, slurm: {{ node: {n} }}, bmc: {{ address: '{b.address}', "
            "credentials: bmc-lab, workarounds: [opensesspriv] } }\n"
            for n, b in self.bmcs.items())
        text = (f"mode: live\nauth: {{ webhook_bearer_token_file: {token}, "
                f"admin_bearer_token_file: {token} }}\n"
                f"credentials_file: {creds}\n"
                f"slurm: {{ conf: {self.cluster.conf}, read_interval: 2s }}\n"
                f"inventory:\n  nodes:\n{nodes}"
                f"notifiers: {{ oncall: {{ type: webhook, url: '{self.oncall.url}/hook' }} }}\n"
                "engine: { tick_interval: 200ms }\n"
                "safety: { max_disruptive_in_flight: 2, max_disrupted_fraction: 0.5,\n"
                "          restart_grace: 3s, quarantine: { incidents: 3, window: 10m },\n"
                "          storm: { max_alerting_nodes: 20, notifier: oncall } }\n"
                "policies:\n  - name: xid\n    match: '{alertname=\"GPUXidError\"}'\n"
                "    steps:\n      - { action: drain }\n"
                "      - { after: 3s, action: ipmi_power_cycle }\n"
                "    on_resolved: [ { action: resume } ]\n")
        self.replicas = [Replica(suite, self.url, f"chaos-{i}", text) for i in range(2)]
        for r in self.replicas:
            r.start()
            suite.on_exit(lambda r=r: r.process and r.process.running() and (
                os.kill(r.process.pid, signal.SIGCONT), r.stop()))
        self.stop_flag = threading.Event()
        self.violations = []
        self.accepted = 0
        self.episodes = {}  # node -> startsAt of its open episode
        self.operator = {}  # node -> the reason of the operator's drain there
        self.frozen = set()
        self.samples = 0
        self.operator_drains = self.operator_resumes = self.releases = 0
        self.lock = threading.Lock()

    # --- what the fleet and medic say
    def slurm_nodes(self):
        out = self.cluster.scontrol("-o", "show", "nodes").stdout
        nodes = {}
        for line in out.splitlines():
            name = line.split("NodeName=")[1].split()[0] if "NodeName=" in line else ""
            state = line.split(" State=")[1].split()[0] if " State=" in line else ""
            reason = line.split(" Reason=", 1)[1].strip() if " Reason=" in line else ""
            nodes[name] = (state, reason)
        return nodes

    def quarantined(self):
        out = subprocess.run([self.suite.medic, "audit", "quarantined", "--db", self.url,
                              "--format", "json"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            return None  # PostgreSQL restarting
        return {row["node"] for row in json.loads(out.stdout)}

    def live(self):
        return [r for r in self.replicas if r.process.running() and r.name not in self.frozen]

    def leader(self, timeout=LEASE + 10):
        found = []

        def one():
            found[:] = [r for r in self.live() if r.leads()]
            return len(found) == 1
        wait_until("one leader", one, timeout=timeout, interval=0.1)
        return found[0]

    def sql(self, statement):
        return self.pg.sql(statement, "medic")

    # --- the workers
    def post(self, node, status, both=False):
        with self.lock:
            starts = self.episodes.get(node)
        targets = self.live()
        random.shuffle(targets)
        for r in targets[:2 if both else 1]:
            try:
                code, _, _ = request("POST", r.url + "/webhook",
                                     body=payload(node, starts, status),
                                     headers={**AUTH, "Content-Type": "application/json"},
                                     timeout=5)
            except OSError:
                code = 0
            if 200 <= code < 300:
                self.accepted += 1

    def alerts(self):
        while not self.stop_flag.wait(0.4):
            node = random.choice(NODES)
            with self.lock:
                open_ = node in self.episodes
                if not open_:
                    self.episodes[node] = time.time()
            if open_ and random.random() < 0.3:
                self.post(node, "resolved", both=random.random() < 0.3)
                with self.lock:
                    del self.episodes[node]
            else:
                self.post(node, "firing", both=random.random() < 0.3)

    def operate(self):
        """An operator: drains an idle node by hand, and later resumes it,
        checking first that the drain is still hers."""
        while not self.stop_flag.wait(3):
            node = random.choice(NODES)
            state, reason = self.cluster.node(node)
            mine = self.operator.get(node)
            if mine:
                if mine not in reason:
                    self.violations.append(f"the operator's drain of {node} was undone "
                                           f"(State={state} Reason={reason})")
                self.cluster.scontrol("update", f"NodeName={node}", "State=RESUME")
                del self.operator[node]
            elif "DRAIN" in state and MARK in reason and random.random() < 0.4:
                # she takes a node medic drained back into service by hand
                self.cluster.scontrol("update", f"NodeName={node}", "State=RESUME")
                self.operator_resumes += 1
            elif "DRAIN" not in state and "+" not in state[:4]:
                why = f"operator maintenance {random.randint(0, 10**6)}"
                if self.cluster.scontrol("update", f"NodeName={node}", "State=DRAIN",
                                         f"Reason={why}").returncode == 0:
                    self.operator[node] = why
                    self.operator_drains += 1

    def release(self):
        while not self.stop_flag.wait(5):
            nodes = self.quarantined() or set()
            targets = self.live()
            if nodes and targets:
                node = sorted(nodes)[0]
                try:
                    request("POST", random.choice(targets).url + f"/api/v1/nodes/{node}/release",
                            body=json.dumps({"reason": "checked by the chaos person"}),
                            headers={**AUTH, "Content-Type": "application/json"}, timeout=15)
                    self.releases += 1
                except OSError:
                    pass

    def sample(self):
        """Each second: medic's drains in Slurm within the cap plus what it
        quarantined."""
        while not self.stop_flag.wait(1):
            quarantined = self.quarantined()
            if quarantined is None:
                continue
            marked = {n for n, (s, r) in self.slurm_nodes().items() if "DRAIN" in s and MARK in r}
            self.samples += 1
            if len(marked - quarantined) > CAP:
                self.violations.append(f"{len(marked - quarantined)} nodes drained by medic "
                                       f"outside quarantine (cap {CAP}): {sorted(marked)}")

    def faults(self):
        kinds = ["kill", "freeze", "postgres"]
        i = 0
        while not self.stop_flag.wait(random.uniform(6, 10)):
            kind = kinds[i % len(kinds)]
            i += 1
            try:
                victim = self.leader()
            except AssertionError as e:
                self.violations.append(f"no leader before a fault: {e}")
                continue
            print(f"  fault: {kind} ({victim.name})", flush=True)
            if kind == "kill":
                victim.process.send(signal.SIGKILL)
                self.stop_flag.wait(1)
                victim.start(wait=False)
            elif kind == "freeze":
                self.frozen.add(victim.name)
                os.kill(victim.process.pid, signal.SIGSTOP)
                self.stop_flag.wait(LEASE + 2)
                os.kill(victim.process.pid, signal.SIGCONT)
                self.frozen.discard(victim.name)
            else:
                self.pg.stop("fast")
                self.stop_flag.wait(1)
                self.pg.restart()

    def run(self):
        workers = [threading.Thread(target=f, daemon=True)
                   for f in (self.alerts, self.operate, self.release, self.sample, self.faults)]
        for w in workers:
            w.start()
        self.stop_flag.wait(SECONDS)
        self.stop_flag.set()
        for w in workers:
            w.join(60)


def test_chaos(suite):
    c = Chaos(suite)
    c.leader()
    c.run()
    assert c.samples >= SECONDS / 3, c.samples  # the sampler was alive
    assert not c.violations, c.violations
    # quiet: every replica up, every episode resolved, the operator's drains
    # given back, every quarantined node released
    for r in c.replicas:
        if not r.process.running():
            r.start()
    c.leader()
    for node in list(c.episodes):
        c.post(node, "resolved")
    for node in list(c.operator):
        c.cluster.scontrol("update", f"NodeName={node}", "State=RESUME")

    def settled():
        # the leader asked each time: a replica resumed from a freeze just
        # before the chaos ended may still call itself the leader above,
        # and lose the lease a moment later (its gauges then stand still)
        try:
            now = c.leader(timeout=LEASE + 2)
        except AssertionError:
            return False
        for node in c.quarantined() or ():
            request("POST", now.url + f"/api/v1/nodes/{node}/release",
                    body=json.dumps({"reason": "end of the chaos"}),
                    headers={**AUTH, "Content-Type": "application/json"}, timeout=15)
        marked = [n for n, (s, r) in c.slurm_nodes().items() if "DRAIN" in s and MARK in r]
        return (not marked and now.metric("medic_disrupted_nodes", AUTH) == 0
                and not c.quarantined())
    wait_until("medic's record and the fleet agree, nothing held", settled, timeout=120,
               interval=1)
    # every executed action: one intent, one outcome
    executed = int(c.sql("SELECT count(*) FROM decisions WHERE verdict = 'execute'"
                         " AND action IS NOT NULL")[0][0])
    intents = int(c.sql("SELECT count(*) FROM actions WHERE phase = 'intent'")[0][0])
    outcomes = int(c.sql("SELECT count(DISTINCT intent_id) FROM actions"
                         " WHERE phase = 'outcome'")[0][0])
    wait_until("every intent's outcome", lambda: int(c.sql(
        "SELECT count(DISTINCT intent_id) FROM actions WHERE phase = 'outcome'")[0][0]) == int(
        c.sql("SELECT count(*) FROM actions WHERE phase = 'intent'")[0][0]), timeout=60)
    assert executed >= intents, (executed, intents, outcomes)
    twice = c.sql("SELECT decision_id FROM actions WHERE phase = 'intent'"
                  " GROUP BY decision_id HAVING count(*) > 1")
    assert not twice, f"decisions started twice: {twice}"
    stored = int(c.sql("SELECT count(*) FROM notifications")[0][0])
    assert stored >= c.accepted, (stored, c.accepted)
    wait_until("every notification evaluated", lambda: c.sql(
        "SELECT count(*) FROM notifications WHERE evaluated_at IS NULL")[0][0] == "0", timeout=60)
    out = subprocess.run([suite.medic, "audit", "verify", "--db", c.url], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    kinds = dict(c.sql("SELECT action, count(*) FROM decisions WHERE verdict = 'execute'"
                       " AND action IS NOT NULL GROUP BY action"))
    let_go = c.sql("SELECT count(*) FROM incident_changes WHERE cause LIKE '%Slurm shows node%'")
    print(f"  {SECONDS:g}s of chaos: {c.accepted} notifications accepted, actions executed "
          f"{kinds}, {c.operator_drains} operator drains, {c.operator_resumes} of medic's "
          f"drains resumed by hand, {c.releases} releases, "
          f"{let_go[0][0]} drains let go after Slurm showed them gone, {c.samples} samples, "
          f"on-call told {len(c.oncall.received())} times", flush=True)


if __name__ == "__main__":
    Suite(__doc__).run([test_chaos])
