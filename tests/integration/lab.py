# SPDX-License-Identifier: Apache-2.0
"""medic's own test harness: starts real servers on 127.0.0.1, records their
PIDs, stops them by PID. Uses only Python's standard library (run it with
Debian's /usr/bin/python3).

Servers: `medic serve` itself, Debian's prometheus-alertmanager (one replica
or a gossiping HA pair). A test never skips a missing server: a missing
binary is a failure."""

import argparse
import http.client
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HOST = "127.0.0.1"
# The audit log of every `medic serve` a test starts: "sqlite" (a file in
# its work directory), or "postgresql" (a database of its own on a
# PostgreSQL server the suite starts): the same tests on either backend.
AUDIT_BACKEND = os.environ.get("MEDIC_TEST_AUDIT", "sqlite")
_suite = None  # the running Suite, which owns that PostgreSQL server


def schema_version(medic):
    """The audit log's schema version the medic binary writes (`medic
    version` says it), as PostgreSQL's medic_schema holds it: text."""
    out = subprocess.run([medic, "version"], capture_output=True, text=True, timeout=30).stdout
    return re.search(r"audit schema:\s+(\d+)", out).group(1)


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_until(what, predicate, timeout=30.0, interval=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:  # the server may not be up yet
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" +
                         (f" (last error: {last})" if last else ""))


def request(method, url, body=None, headers=None, timeout=10, context=None):
    """One HTTP request; returns (status, headers dict, body bytes)."""
    scheme, rest = url.split("://", 1)
    hostport, _, path = rest.partition("/")
    host, port = hostport.rsplit(":", 1)
    if scheme == "https":
        conn = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        if isinstance(body, str):
            body = body.encode()
        conn.request(method, "/" + path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def require_binary(name):
    path = shutil.which(name)
    if not path:
        raise AssertionError(f"'{name}' is not installed: run the README's test command, "
                             "which installs every server the tests use")
    return path


class Process:
    """A daemon we started: its PID is recorded in DIR/NAME.pid and it is
    stopped by that PID only."""

    def __init__(self, name, argv, workdir, env=None):
        self.name = name
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.pid_path = os.path.join(workdir, f"{name}.pid")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=workdir, env=env,
                                     start_new_session=True)
        with open(self.pid_path, "w") as f:
            f.write(f"{self.proc.pid}\n")

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc.poll() is None

    def send(self, sig):
        if self.running():
            os.kill(self.proc.pid, sig)

    def stop(self, timeout=20.0, sig=signal.SIGTERM):
        """Returns the exit code; SIGKILL after the timeout."""
        if self.running():
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()
        if os.path.exists(self.pid_path):
            os.unlink(self.pid_path)
        return self.proc.returncode

    def tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""


class Medic:
    """`medic serve` with a config file written from YAML text."""

    def __init__(self, binary, workdir, config_text="", port=None, name="medic",
                 audit_options=""):
        self.binary = binary
        self.workdir = workdir
        self.port = port or free_port()
        self.db = os.path.join(workdir, "medic.db")
        self.config_path = os.path.join(workdir, f"{name}.yaml")
        self.name = name
        self.scheme = "http"
        self.context = None
        self.audit_options = audit_options
        if AUDIT_BACKEND == "postgresql" and not audit_options:
            self.db = _suite.postgres_database(workdir, name)
        self.env = None  # the daemon's environment; None: the test's
        self.write_config(config_text)
        self.process = None

    def write_config(self, text):
        with open(self.config_path, "w") as f:
            # on PostgreSQL, notifications on two connections of their own
            # beside the ordered writer, as a larger machine runs by default
            audit = f"url: '{self.db}', writers: 3" if self.db.startswith("postgresql://") \
                else f"path: {self.db}{self.audit_options}"
            f.write(f"listen: {HOST}:{self.port}\naudit: {{ {audit} }}\n" + text)

    @property
    def url(self):
        return f"{self.scheme}://{HOST}:{self.port}"

    def start(self, wait=True):
        self.process = Process(self.name, [self.binary, "serve", "--config", self.config_path,
                                           "--log-level", "debug"], self.workdir, env=self.env)
        if wait:
            wait_until("medic /-/ready", lambda: self.get("/-/ready")[0] == 200
                       or not self.process.running(), timeout=15)
            if not self.process.running():
                raise AssertionError("medic exited at start:\n" + self.process.tail())
        return self

    def stop(self, sig=signal.SIGTERM):
        return self.process.stop(sig=sig) if self.process else None

    def get(self, path, headers=None):
        return request("GET", self.url + path, headers=headers, context=self.context)

    def post(self, path, body, headers=None, content_type="application/json"):
        h = {"Content-Type": content_type} if content_type else {}
        h.update(headers or {})
        return request("POST", self.url + path, body=body, headers=h, context=self.context)

    def audit(self, kind, *args):
        out = subprocess.run([self.binary, "audit", kind, "--db", self.db, "--format", "json",
                              "--limit", "100000", *args],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise AssertionError(f"medic audit {kind} failed: {out.stderr}")
        return json.loads(out.stdout)

    def metric(self, name_with_labels, headers=None):
        status, _, body = self.get("/metrics", headers=headers)
        assert status == 200, status
        for line in body.decode().splitlines():
            if line.startswith(name_with_labels + " "):
                return float(line.split()[-1])
        raise AssertionError(f"metric {name_with_labels} not exposed")


class SteppedClock:
    """A wall clock that steps while medic runs: the test stand-in
    tests/clock_shift (MEDIC_CLOCK_SHIFT names it) preloaded into one
    process adds an offset, written to a file, to its wall clock; its
    monotonic clock stays real."""

    def __init__(self, workdir):
        self.library = os.environ.get("MEDIC_CLOCK_SHIFT", "")
        if not os.path.exists(self.library):
            raise AssertionError("MEDIC_CLOCK_SHIFT names tests/clock_shift's library (ctest "
                                 "sets it)")
        self.path = os.path.join(workdir, "clock-offset")
        self.set(0)

    def set(self, seconds):
        with open(self.path + ".new", "w") as f:
            f.write(f"{seconds}\n")
        os.replace(self.path + ".new", self.path)

    def env(self):
        # an ASan build's runtime need not come first: the stand-in only
        # wraps the clock
        return dict(os.environ, LD_PRELOAD=self.library, MEDIC_TEST_CLOCK_OFFSET_FILE=self.path,
                    ASAN_OPTIONS="verify_asan_link_order=0:" + os.environ.get("ASAN_OPTIONS", ""))


class Alertmanager:
    """Debian's prometheus-alertmanager on loopback; `peer` makes it one of
    an HA pair."""

    def __init__(self, workdir, webhook_url, bearer_token=None, name="am", route=None,
                 port=None, cluster_port=None, peer=None, peer_timeout="15s"):
        self.binary = require_binary("prometheus-alertmanager")
        self.dir = os.path.join(workdir, name)
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        self.port = port or free_port()
        self.cluster_port = cluster_port
        self.name = name
        route = route or {}
        webhook = ("    webhook_configs:\n"
                   f"      - url: {webhook_url}\n"
                   "        send_resolved: true\n"
                   "        max_alerts: 0\n")
        if bearer_token:
            webhook += ("        http_config:\n"
                        "          authorization:\n"
                        "            type: Bearer\n"
                        f"            credentials: {bearer_token}\n")
        with open(os.path.join(self.dir, "alertmanager.yml"), "w") as f:
            f.write("route:\n"
                    "  receiver: medic\n"
                    "  group_by: [alertname, instance]\n"
                    f"  group_wait: {route.get('group_wait', '1s')}\n"
                    f"  group_interval: {route.get('group_interval', '2s')}\n"
                    f"  repeat_interval: {route.get('repeat_interval', '1h')}\n"
                    "receivers:\n"
                    "  - name: medic\n" + webhook)
        self.argv = [self.binary, f"--config.file={self.dir}/alertmanager.yml",
                     f"--storage.path={self.dir}/data",
                     f"--web.listen-address={HOST}:{self.port}",
                     f"--web.external-url=http://{HOST}:{self.port}", "--log.level=debug"]
        if cluster_port:
            self.argv += [f"--cluster.listen-address={HOST}:{cluster_port}",
                          f"--cluster.peer={HOST}:{peer}",
                          f"--cluster.peer-timeout={peer_timeout}",
                          "--cluster.settle-timeout=5s", "--cluster.reconnect-timeout=5m"]
        else:
            self.argv += ["--cluster.listen-address="]
        self.process = None

    @property
    def url(self):
        return f"http://{HOST}:{self.port}"

    def start(self):
        self.process = Process(self.name, self.argv, self.dir)
        wait_until(f"{self.name} /-/ready",
                   lambda: request("GET", self.url + "/-/ready")[0] == 200, timeout=30)
        return self

    def cluster_ready(self):
        status, _, body = request("GET", self.url + "/api/v2/status")
        return status == 200 and json.loads(body)["cluster"]["status"] == "ready"

    def push(self, alerts):
        status, _, body = request("POST", self.url + "/api/v2/alerts", body=json.dumps(alerts),
                                  headers={"Content-Type": "application/json"})
        assert status == 200, (status, body)

    def stop(self):
        return self.process.stop(timeout=20) if self.process else None


class Suite:
    """Runs test functions in order; prints 'N passed, N failed'."""

    def __init__(self, description):
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("--medic", required=True, help="path to the medic binary")
        parser.add_argument("--keep", action="store_true", help="keep the work directory")
        self.args = parser.parse_args()
        self.medic = os.path.abspath(self.args.medic)
        self.workdir = tempfile.mkdtemp(prefix="medic-it-")
        self.cleanups = []
        self.passed = 0
        self.failed = 0
        self.postgres = None
        self.databases = {}
        global _suite
        _suite = self

    def postgres_database(self, workdir, name):
        """The PostgreSQL audit log of the medic named name in workdir (the
        same one each time a test starts it again), on the suite's server,
        started at the first call."""
        key = (workdir, name)
        if key not in self.databases:
            if self.postgres is None:
                from postgres_lab import PostgreSQL
                self.postgres = PostgreSQL(self.subdir("postgres-audit")).start()
            self.databases[key] = self.postgres.database(f"audit_{len(self.databases)}")
        return self.databases[key]

    def subdir(self, name):
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def on_exit(self, fn):
        self.cleanups.append(fn)

    def run(self, tests):
        try:
            for test in tests:
                start = time.monotonic()
                try:
                    test(self)
                    self.passed += 1
                    print(f"PASS {test.__name__} ({time.monotonic() - start:.1f}s)", flush=True)
                except Exception:
                    self.failed += 1
                    print(f"FAIL {test.__name__}", flush=True)
                    traceback.print_exc()
                finally:
                    while self.cleanups:
                        try:
                            self.cleanups.pop()()
                        except Exception:
                            traceback.print_exc()
        finally:
            if self.postgres:
                self.postgres.stop()
            if not self.args.keep and self.failed == 0:
                shutil.rmtree(self.workdir, ignore_errors=True)
            elif self.failed:
                print(f"work directory kept: {self.workdir}")
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)


def fixture(name):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "fixtures", "alertmanager", name), "rb") as f:
        return f.read()


def write_secret(path, value):
    with open(path, "w") as f:
        f.write(value + "\n")
    os.chmod(path, 0o600)
    return path


def cluster_example(work):
    """examples/cluster-1000 copied to work with its secrets written as
    credentials.example.yaml says; returns its medic.yaml."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    shutil.copytree(os.path.join(top, "examples", "cluster-1000"), work)
    shutil.copy(os.path.join(work, "credentials.example.yaml"),
                os.path.join(work, "credentials.yaml"))
    os.chmod(os.path.join(work, "credentials.yaml"), 0o600)
    for name in ("webhook.token", "oncall.password", "ops.password"):
        write_secret(os.path.join(work, name), "a-secret")
    return os.path.join(work, "medic.yaml")


class RecordingReceiver:
    """A recording HTTP receiver on 127.0.0.1 (the stand-in for a webhook,
    Slack or PagerDuty endpoint): keeps every request's path, headers and
    body; answers each with the next queued status, 200 when none, after
    `delay` seconds (a slow endpoint)."""

    def __init__(self, delay=0.0):
        import http.server
        import threading
        receiver = self
        self.delay = delay
        self.requests = []
        self.statuses = []
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                if receiver.delay:
                    time.sleep(receiver.delay)
                with receiver.lock:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.requests.append({"path": self.path, "headers": dict(self.headers),
                                              "body": body, "status": status})
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender gave up (or was killed) while we waited

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://{HOST}:{self.port}"

    def fail_next(self, *statuses):
        with self.lock:
            self.statuses.extend(statuses)

    def received(self, path=None):
        with self.lock:
            return [r for r in self.requests if path is None or r["path"] == path]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class SmtpSink:
    """A real SMTP server (Debian's python3-aiosmtpd) on 127.0.0.1 that keeps
    every message it accepts."""

    def __init__(self):
        try:
            from aiosmtpd.controller import Controller
        except ImportError:
            raise AssertionError("python3-aiosmtpd is not installed: run the README's test "
                                 "command, which installs it")
        sink = self
        self.messages = []

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                sink.messages.append({"from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                                      "data": envelope.content.decode("utf-8", "replace")})
                return "250 Message accepted for delivery"

        self.port = free_port()
        self.controller = Controller(Handler(), hostname=HOST, port=self.port)
        self.controller.start()

    def stop(self):
        self.controller.stop()


class IpmiBmc:
    """One BMC simulated by Debian's ipmi_sim (OpenIPMI) on a UDP port of
    127.0.0.1, reached over RMCP+ like a real one. Its chassis control hook
    keeps the power state in DIR/power and appends every change to
    DIR/power.log ("<time> set power 0"), which is how a test sees what was
    done. ipmi_sim's own power cycle turns power off, then on about a second
    later. reply_delay: seconds the hook takes to answer a power change (a
    slow BMC: the command's reply comes after the client's retransmission
    timeout)."""

    HOOK = """#!/bin/sh
dir=$1; shift; op=$1; shift
case $op in
get)
  for p in "$@"; do
    case $p in
      power) echo "power:$(cat "$dir/power" 2>/dev/null || echo 1)" ;;
      boot) echo "boot:default" ;;
      *) echo "Invalid parameter: $p"; exit 1 ;;
    esac
  done ;;
set)
  while [ $# -ge 2 ]; do
    p=$1; v=$2; shift 2
    echo "$(date +%s.%N) set $p $v" >>"$dir/power.log"
    case $p in
      power) echo "$v" >"$dir/power"
             if [ -f "$dir/reply-delay" ]; then sleep "$(cat "$dir/reply-delay")"; fi
             # the node itself goes down and boots (IpmiBmc.boots)
             if [ -x "$dir/on-power" ]; then "$dir/on-power" "$v" >>"$dir/on-power.log" 2>&1; fi ;;
      identify) [ $# -ge 1 ] && shift ;;
    esac
  done ;;
*) exit 1 ;;
esac
exit 0
"""

    def __init__(self, workdir, name, user="admin", password="secret", power=1,
                 reply_delay=None):
        self.binary = require_binary("ipmi_sim")
        self.dir = os.path.join(workdir, "bmc-" + name)
        os.makedirs(os.path.join(self.dir, "state"), exist_ok=True)
        self.name = name
        self.port = free_port(socket.SOCK_DGRAM)
        self.user, self.password = user, password
        hook = os.path.join(self.dir, "chassis-control.sh")
        with open(hook, "w") as f:
            f.write(self.HOOK)
        os.chmod(hook, 0o755)
        with open(os.path.join(self.dir, "power"), "w") as f:
            f.write(f"{power}\n")
        open(os.path.join(self.dir, "power.log"), "w").close()
        if reply_delay:
            with open(os.path.join(self.dir, "reply-delay"), "w") as f:
                f.write(f"{reply_delay}\n")
        auths = "none md2 md5 straight"
        with open(os.path.join(self.dir, "lan.conf"), "w") as f:
            f.write(f'name "{name}"\nset_working_mc 0x20\n  startlan 1\n'
                    f"    addr {HOST} {self.port}\n    priv_limit admin\n"
                    f"    allowed_auths_callback {auths}\n    allowed_auths_user {auths}\n"
                    f"    allowed_auths_operator {auths}\n    allowed_auths_admin {auths}\n"
                    f"    guid a123456789abcdefa123456789abcd{self.port % 256:02x}\n  endlan\n"
                    f'  chassis_control "{hook} {self.dir}"\n'
                    f'  user 1 false ""  "disabled" user 1 none\n'
                    f'  user 2 true "{user}" "{password}" admin 10 {auths}\n')
        with open(os.path.join(self.dir, "node.emu"), "w") as f:
            f.write("mc_setbmc 0x20\n"
                    "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\n"
                    "mc_enable 0x20\n")
        self.process = None

    def boots(self, cluster, node):
        """Makes this BMC's power the node's: powered off, its slurmd in the
        cluster stops; powered on, it starts again (a boot Slurm sees)."""
        script = cluster.node_power()
        with open(os.path.join(self.dir, "on-power"), "w") as f:
            f.write(f"#!/bin/sh\nexec {script} {node} \"$1\"\n")
        os.chmod(os.path.join(self.dir, "on-power"), 0o755)
        return self

    @property
    def address(self):
        return f"{HOST}:{self.port}"

    def start(self):
        self.process = Process("ipmi_sim", [self.binary, "-n", "-c", "lan.conf", "-f", "node.emu",
                                            "-s", "state"], self.dir)
        chassis = require_binary("ipmi-chassis")
        wait_until(f"BMC {self.name} answering", lambda: subprocess.run(
            [chassis, "-h", self.address, "--driver-type=LAN_2_0", "-u", self.user, "-p",
             self.password, "-W", "opensesspriv", "--session-timeout=1500",
             "--retransmission-timeout=500", "--get-status"],
            capture_output=True, timeout=10).returncode == 0, timeout=20)
        return self

    def stop(self):
        return self.process.stop(timeout=10) if self.process else None

    def power(self):
        with open(os.path.join(self.dir, "power")) as f:
            return int(f.read().strip() or "1")

    def log(self):
        with open(os.path.join(self.dir, "power.log")) as f:
            return [line.split()[1:] for line in f if line.strip()]


class SlurmCluster:
    """A real Slurm cluster on 127.0.0.1 (Debian's munge, slurmctld and one
    slurmd per node, each node its own port), in its own folder: its own
    munge key and socket, slurm.conf, state and logs. Clients use
    SLURM_CONF=self.conf."""

    def __init__(self, workdir, nodes, name="slurm", features=None, topology=None,
                 reboots=False):
        """features: {node: "rack=r01,h100"}; topology: topology.conf's text
        (topology/tree), or None for no topology; reboots: Slurm's
        RebootProgram restarts the node's slurmd as after a boot (reboot_program)."""
        for b in ("munged", "slurmctld", "slurmd", "scontrol"):
            require_binary(b)
        self.dir = os.path.join(workdir, name)
        self.nodes = list(nodes)
        # munged wants every folder above its socket executable by all
        # (tempfile.mkdtemp makes the suite's folder 0700)
        os.chmod(workdir, 0o755)
        for sub in ("etc", "state", "spool", "log", "run", "munge"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        os.chmod(os.path.join(self.dir, "munge"), 0o755)  # munged insists
        keydir = os.path.join(self.dir, "munge", "key")
        os.makedirs(keydir, mode=0o700, exist_ok=True)
        os.chmod(keydir, 0o700)
        self.key = os.path.join(keydir, "munge.key")
        with open(self.key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self.key, 0o400)
        self.socket = os.path.join(self.dir, "munge", "munge.socket.2")
        self.conf = os.path.join(self.dir, "etc", "slurm.conf")
        ctld_port = free_port()
        d = self.dir
        lines = [
            "ClusterName=medic", f"SlurmctldHost=localhost({HOST})", f"SlurmctldPort={ctld_port}",
            "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny", "AuthType=auth/munge",
            f"AuthInfo=socket={self.socket}", "CredType=cred/munge", "SlurmUser=root",
            "SlurmdUser=root", f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/run/slurmctld.pid", f"SlurmdPidFile={d}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
            "ProctrackType=proctrack/pgid", "TaskPlugin=task/none", "MpiDefault=none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
            "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5"]
        for n in self.nodes:
            feature = f"Feature={(features or {})[n]} " if n in (features or {}) else ""
            lines.append(f"NodeName={n} NodeHostname=localhost NodeAddr={HOST} {feature}"
                         f"Port={free_port()} CPUs=1 RealMemory=100 State=UNKNOWN")
        if topology:
            lines.append("TopologyPlugin=topology/tree")
            with open(os.path.join(self.dir, "etc", "topology.conf"), "w") as f:
                f.write(topology)
        lines.append(f"PartitionName=gpu Nodes={','.join(self.nodes)} Default=YES "
                     "MaxTime=INFINITE State=UP")
        if reboots:
            lines += [f"RebootProgram={self.reboot_program()}", "ResumeTimeout=120"]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.processes = []

    def scontrol(self, *args):
        return subprocess.run(["scontrol", *args], capture_output=True, text=True,
                              env=self.env, timeout=30)

    def node(self, name):
        """State and Reason of a node, from `scontrol show node -o`."""
        out = self.scontrol("show", "node", "-o", name).stdout
        state = out.split(" State=")[1].split()[0] if " State=" in out else ""
        reason = out.split(" Reason=", 1)[1].strip() if " Reason=" in out else ""
        return state, reason

    def start(self):
        d = self.dir
        munged = Process("munged", ["munged", "-F", f"--socket={self.socket}",
                                    f"--key-file={self.key}", f"--log-file={d}/log/munged.log",
                                    f"--pid-file={d}/munge/munged.pid",
                                    f"--seed-file={d}/munge/munged.seed"], d)
        self.processes.append(munged)
        wait_until("munged", lambda: os.path.exists(self.socket), timeout=15)
        self.processes.append(Process("slurmctld", ["slurmctld", "-D", "-f", self.conf], d,
                                      env=self.env))
        wait_until("slurmctld", lambda: self.scontrol("ping").returncode == 0, timeout=40)
        for n in self.nodes:
            self.processes.append(Process(f"slurmd-{n}", ["slurmd", "-D", "-N", n, "-f", self.conf],
                                          d, env=self.env))
        wait_until("every node idle", lambda: all(
            self.node(n)[0].startswith("IDLE") and "NOT_RESPONDING" not in self.node(n)[0]
            for n in self.nodes), timeout=40)
        return self

    def stop(self):
        for p in reversed(self.processes):
            p.stop(timeout=25)
        self.processes = []
        # the slurmd a simulated boot started (node_power) is no child of ours
        for n in self.nodes:
            try:
                with open(os.path.join(self.dir, "run", f"slurmd-{n}.pid")) as f:
                    os.kill(int(f.read().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def node_power(self):
        """A script `SCRIPT NODE 0|1` that powers a node off (its slurmd
        stops, as the machine would) or on (its slurmd starts again, as at
        a boot: Slurm's SlurmdStartTime moves on). For IpmiBmc.boots."""
        path = os.path.join(self.dir, "node-power.sh")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\nnode=$1; pid={self.dir}/run/slurmd-$node.pid\n"
                    "if [ \"$2\" = 0 ]; then\n"
                    "  p=$(cat \"$pid\" 2>/dev/null) || exit 0\n"
                    "  kill -9 \"$p\" 2>/dev/null; rm -f \"$pid\"; exit 0\nfi\n"
                    "[ -e \"$pid\" ] && kill -0 \"$(cat \"$pid\")\" 2>/dev/null && exit 0\n"
                    f"SLURM_CONF={self.conf} setsid slurmd -N \"$node\" -f {self.conf} "
                    "</dev/null >/dev/null 2>&1 &\nexit 0\n")
        os.chmod(path, 0o755)
        return path

    def reboot_program(self):
        """Slurm's RebootProgram for the lab: slurmd runs it on the node
        (here, every node is this host: it finds its node by the slurmd
        above it, `-N NAME`), and it stands in for a reboot by starting that
        slurmd again with the boot stand-in preloaded (MEDIC_BOOT_STANDIN:
        sysinfo says the host just booted), so that Slurm sees a new
        BootTime and SlurmdStartTime and finishes the reboot. Each reboot
        is logged in log/reboots.log, one `NODE EPOCH` line."""
        standin = os.environ.get("MEDIC_BOOT_STANDIN")
        assert standin and os.path.exists(standin), "MEDIC_BOOT_STANDIN is not set (run by ctest)"
        path = os.path.join(self.dir, "reboot.sh")
        conf = self.conf
        with open(path, "w") as f:
            f.write("#!/bin/sh\n"
                    "p=$PPID; node=\n"
                    "while [ \"$p\" -gt 1 ] && [ -z \"$node\" ]; do\n"
                    "  node=$(tr '\\0' '\\n' < /proc/$p/cmdline | sed -n '/^-N$/{n;p}'); slurmd=$p\n"
                    "  p=$(cut -d' ' -f4 /proc/$p/stat)\n"
                    "done\n"
                    "[ -n \"$node\" ] || exit 1\n"
                    f"echo \"$node $(date +%s)\" >> {self.dir}/log/reboots.log\n"
                    "setsid sh -c \"sleep 1; kill -9 $slurmd; sleep 1; "
                    f"SLURM_CONF={conf} MEDIC_TEST_BOOTED_AT=\\$(date +%s) LD_PRELOAD={standin} "
                    f"exec slurmd -N $node -f {conf}\" </dev/null >/dev/null 2>&1 &\n"
                    "exit 0\n")
        os.chmod(path, 0o755)
        return path

    def reboots(self):
        """The reboots RebootProgram made: [(node, epoch seconds)]."""
        try:
            with open(os.path.join(self.dir, "log", "reboots.log")) as f:
                return [(n, int(t)) for n, t in (line.split() for line in f if line.strip())]
        except FileNotFoundError:
            return []

    def boot_time(self, name):
        """The node's BootTime, as Slurm prints it (local time)."""
        out = self.scontrol("show", "node", "-o", name).stdout
        return out.split(" BootTime=")[1].split()[0] if " BootTime=" in out else ""

    def slurmd_started(self, name):
        """The node's SlurmdStartTime, as Slurm prints it (local time)."""
        out = self.scontrol("show", "node", "-o", name).stdout
        return out.split(" SlurmdStartTime=")[1].split()[0] if " SlurmdStartTime=" in out else ""


class GatedScontrol:
    """A test stand-in around the real scontrol that holds every drain
    (State=DRAIN) until the test opens the gate: `path` goes in medic's
    slurm.scontrol, wait_held() returns once a drain waits, release() lets
    it and every later one through."""

    def __init__(self, workdir):
        self.gate, self.waiting = (os.path.join(workdir, n) for n in ("gate", "waiting"))
        self.path = os.path.join(workdir, "gated-scontrol")
        with open(self.path, "w") as f:
            f.write("#!/bin/sh\nfor a in \"$@\"; do\n"
                    f"  if [ \"$a\" = State=DRAIN ] && [ ! -e {self.gate} ]; then\n"
                    f"    touch {self.waiting}\n"
                    f"    while [ ! -e {self.gate} ]; do sleep 0.05; done\n"
                    "  fi\ndone\nexec scontrol \"$@\"\n")
        os.chmod(self.path, 0o755)

    def wait_held(self, timeout=30):
        wait_until("a drain held at the gate", lambda: os.path.exists(self.waiting),
                   timeout=timeout)

    def release(self):
        open(self.gate, "w").close()


class DcgmExporterStandin:
    """A STAND-IN for NVIDIA's DCGM exporter (no GPU here): serves
    DCGM_FI_DEV_* gauges for some nodes' GPUs in Prometheus' text format on
    /metrics, each series labelled like the real exporter (gpu, UUID,
    Hostname, modelName); a test sets values with set()."""

    METRICS = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS",
               "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")

    def __init__(self, nodes, gpus=4):
        import http.server
        import threading
        self.lock = threading.Lock()
        self.values = {(n, g, m): (45.0 if m.endswith("TEMP") else 200.0 if "POWER" in m else 0.0)
                       for n in nodes for g in range(gpus) for m in self.METRICS}
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                lines = []
                with exporter.lock:
                    for m in exporter.METRICS:
                        lines.append(f"# TYPE {m} gauge")
                        for (n, g, metric), v in sorted(exporter.values.items()):
                            if metric == m:
                                lines.append(
                                    f'{m}{{gpu="{g}",UUID="GPU-standin-{n}-{g}",Hostname="{n}",'
                                    f'modelName="stand-in"}} {v}')
                body = ("\n".join(lines) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def set(self, node, gpu, metric, value):
        with self.lock:
            self.values[(node, gpu, metric)] = float(value)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Prometheus:
    """Debian's prometheus on 127.0.0.1, scraping targets every second and
    evaluating a rule file every second, sending alerts to Alertmanager."""

    def __init__(self, workdir, targets, rules, alertmanager_port):
        self.binary = require_binary("prometheus")
        self.dir = os.path.join(workdir, "prometheus")
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        self.port = free_port()
        with open(os.path.join(self.dir, "rules.yml"), "w") as f:
            f.write(rules)
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            f.write("global: { scrape_interval: 1s, evaluation_interval: 1s }\n"
                    "rule_files: [rules.yml]\n"
                    "alerting:\n  alertmanagers:\n"
                    f"    - static_configs: [ {{ targets: ['{HOST}:{alertmanager_port}'] }} ]\n"
                    "scrape_configs:\n  - job_name: dcgm\n    honor_labels: true\n"
                    f"    static_configs: [ {{ targets: {json.dumps(targets)} }} ]\n")
        self.process = None

    @property
    def url(self):
        return f"http://{HOST}:{self.port}"

    def start(self):
        self.process = Process("prometheus", [
            self.binary, f"--config.file={self.dir}/prometheus.yml",
            f"--storage.tsdb.path={self.dir}/data", f"--web.listen-address={HOST}:{self.port}",
            "--web.enable-lifecycle"], self.dir)
        wait_until("prometheus ready", lambda: request("GET", self.url + "/-/ready")[0] == 200,
                   timeout=30)
        return self

    def stop(self):
        return self.process.stop(timeout=20) if self.process else None
