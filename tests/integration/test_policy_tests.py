#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`medic policy test` with a test file that names its configuration: the
mode and the start time set beside `config:`, an outcome event refused in
a dry-run test (no action runs there, so it would be ignored), and a key
that cannot stand there named with what may."""

import os
import subprocess

from lab import Suite, cluster_example

CONFIG = """\
mode: dry-run
inventory: { nodes: [ { name: gpu-node-01 }, { name: gpu-node-02 } ] }
notifiers: { oncall: { type: webhook, url: 'http://127.0.0.1:9/hook' } }
safety:
  max_disrupted_fraction: 1
  storm: { notifier: oncall }
  maintenance:
    - { nodes: 'gpu-node-0[1-2]', start: '2026-11-22T07:00:00Z', end: '2026-11-22T09:00:00Z',
        reason: firmware }
policies:
  - name: xid
    match: '{alertname="GPUXidError"}'
    cooldown: 1h
    steps: [ { action: drain }, { after: 10m, action: ipmi_power_cycle } ]
"""

XID = "labels: { alertname: GPUXidError, instance: gpu-node-01 }"


def run(suite, name, text):
    path = os.path.join(suite.workdir, name)
    with open(path, "w") as f:
        f.write(text)
    return subprocess.run([suite.medic, "policy", "test", path], capture_output=True, text=True,
                          timeout=60)


def test_mode_and_start_beside_config(suite):
    with open(os.path.join(suite.workdir, "medic.yaml"), "w") as f:
        f.write(CONFIG)
    # live beside the configuration's dry-run: a drain that fails stops the
    # ladder, so the power cycle never comes
    out = run(suite, "live.test.yaml", f"""\
config: medic.yaml
mode: live
tests:
  - name: a failed drain stops the ladder
    alerts:
      - {{ t: 0s, status: firing, {XID} }}
      - {{ t: 1m, outcome: failed, node: gpu-node-01, action: drain }}
      - {{ t: 12m, status: firing, {XID} }}
    expect:
      - {{ t: 0s, node: gpu-node-01, action: drain, verdict: execute }}
      - {{ t: 1m, node: gpu-node-01, action: notify, verdict: execute, reason: "drain failed" }}
""")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS a failed drain stops the ladder [live]" in out.stdout, out.stdout
    # the same test in the configuration's own dry-run: refused, not ignored
    out = run(suite, "dry.test.yaml", f"""\
config: medic.yaml
tests:
  - name: a failed drain stops the ladder
    alerts:
      - {{ t: 0s, status: firing, {XID} }}
      - {{ t: 1m, outcome: failed, node: gpu-node-01, action: drain }}
    expect:
      - {{ t: 0s, node: gpu-node-01, action: drain, verdict: dry_run }}
""")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL a failed drain stops the ladder [dry-run]" in out.stdout, out.stdout
    assert "line 6: an outcome event, but the test runs in dry-run" in out.stdout, out.stdout
    # start: the dated maintenance window of the same medic.yaml holds the
    # drain while it lasts, not after
    out = run(suite, "window.test.yaml", f"""\
config: medic.yaml
mode: live
start: '2026-11-22T08:30:00Z'
tests:
  - name: the firmware window holds the drain until 09:00, then it runs
    alerts:
      - {{ t: 0s, status: firing, {XID} }}
      - {{ t: 31m, status: firing, labels: {{ alertname: GPUXidError, instance: gpu-node-02 }} }}
    expect:
      - {{ t: 0s, node: gpu-node-01, action: drain, verdict: suppressed, reason: "maintenance window until 2026-11-22T09:00:00.000Z" }}
      - {{ t: 31m, node: gpu-node-02, action: drain, verdict: execute }}
      - {{ t: 31m, node: gpu-node-01, action: drain, verdict: execute }}
      # the ladder's later step was due meanwhile: it follows the drain
      - {{ t: 31m, node: gpu-node-01, action: ipmi_power_cycle, verdict: execute }}
      - {{ t: 31m, action: notify, verdict: execute, reason: "held steps notice" }}
""")
    assert out.returncode == 0, out.stdout + out.stderr
    # ignore: [notify]: the on-call notices need not be expected; without
    # it the same test fails on them, and a name that is no action is refused
    test = f"""\
config: medic.yaml
mode: live
tests:
  - name: only the drain matters here
    ignore: [notify]
    alerts:
      - {{ t: 0s, status: firing, {XID} }}
      - {{ t: 1m, outcome: failed, node: gpu-node-01, action: drain }}
    expect:
      - {{ t: 0s, node: gpu-node-01, action: drain, verdict: execute }}
"""
    out = run(suite, "ignore.test.yaml", test)
    assert out.returncode == 0 and "PASS only the drain matters here" in out.stdout, out
    out = run(suite, "strict.test.yaml", test.replace("    ignore: [notify]\n", ""))
    assert out.returncode == 1 and "+ t=1m" in out.stdout and " notify " in out.stdout, out
    out = run(suite, "bad-ignore.test.yaml", test.replace("[notify]", "[notice]"))
    assert out.returncode != 0 and "ignore: a list of action names" in out.stderr, out
    # anything else beside config is refused, with what may stand there
    out = run(suite, "bad.test.yaml", "config: medic.yaml\nlog_level: debug\ntests: []\n")
    assert out.returncode != 0
    assert "'log_level' cannot stand beside config (only mode and start can)" in out.stderr, out
    out = run(suite, "bad-start.test.yaml", "config: medic.yaml\nstart: tomorrow\ntests: []\n")
    assert out.returncode != 0 and "start: an RFC 3339 time" in out.stderr, out


def test_check_config_strict(suite):
    """`medic check config` prints what is valid but risky as a warning and
    passes; with --strict (for CI) the same warning fails the file, and a
    file without warnings still passes."""
    risky = os.path.join(suite.workdir, "risky.yaml")
    with open(risky, "w") as f:
        f.write(CONFIG.replace("    cooldown: 1h\n", ""))
    calm = os.path.join(suite.workdir, "calm.yaml")
    with open(calm, "w") as f:
        f.write(CONFIG)
    out = subprocess.run([suite.medic, "check", "config", risky], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "warning:" in out.stderr and "cooldown" in out.stderr, out
    out = subprocess.run([suite.medic, "check", "config", "--strict", risky],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "--strict makes them fail" in out.stderr, out
    out = subprocess.run([suite.medic, "check", "config", "--strict", calm], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "warning" not in out.stderr, out


def test_cluster_example(suite):
    """examples/cluster-1000, the complete configuration of a 1,000-node
    Slurm cluster, with its secrets written as credentials.example.yaml
    says: `medic check config` accepts it with no warning, and its policy
    tests pass. The Slurm host's slurm.conf is stood for by a file of the
    work directory: without one, check config warns that drains will
    fail."""
    work = os.path.join(suite.workdir, "cluster-1000")
    config = cluster_example(work)
    out = subprocess.run([suite.medic, "check", "config", config], capture_output=True,
                         text=True, timeout=60)
    if not os.path.exists("/etc/slurm/slurm.conf"):
        assert "slurm.conf '/etc/slurm/slurm.conf' cannot be read on this host" in out.stderr, \
            out.stdout + out.stderr
        with open(config) as f:
            text = f.read()
        with open(config, "w") as f:
            f.write(text.replace("/etc/slurm/slurm.conf", os.path.join(work, "slurm.conf")))
        open(os.path.join(work, "slurm.conf"), "w").close()
        out = subprocess.run([suite.medic, "check", "config", config], capture_output=True,
                             text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "mode live" in out.stdout and "1000 inventory nodes" in out.stdout, out.stdout
    assert "warning" not in out.stdout + out.stderr, out.stdout + out.stderr
    out = subprocess.run([suite.medic, "policy", "test", os.path.join(work, "cluster.test.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "5 passed, 0 failed" in out.stdout, out.stdout + out.stderr


if __name__ == "__main__":
    Suite(__doc__).run([test_mode_and_start_beside_config, test_check_config_strict,
                        test_cluster_example])
