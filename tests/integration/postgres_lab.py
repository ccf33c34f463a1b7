# SPDX-License-Identifier: Apache-2.0
"""Debian's PostgreSQL 15 for the tests, started by the test itself: a
cluster of its own in the suite's work directory, owned by the `postgres`
system user (the server refuses to run as root), listening on 127.0.0.1 at
a free port with its socket in the same directory, a `medic` role with a
password (scram-sha-256 over TCP, so authentication is real) and a
database per name asked for. Stopped by its PID through pg_ctl."""

import os
import pwd
import secrets
import shutil
import subprocess

from lab import HOST, free_port

BIN = "/usr/lib/postgresql/15/bin"


def require_postgres():
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not os.access(os.path.join(BIN, tool), os.X_OK):
            raise AssertionError(f"{BIN}/{tool} is missing: run the README's test command, "
                                 "which installs postgresql-15")
    if not shutil.which("psql"):
        raise AssertionError("psql is missing: install postgresql-client-15")


class PostgreSQL:
    def __init__(self, workdir):
        require_postgres()
        self.dir = os.path.join(workdir, "postgres")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.password = secrets.token_hex(12)
        self.running = False

    def _as_postgres(self, argv, **kw):
        cmd = argv if os.getuid() != 0 else ["runuser", "-u", "postgres", "--"] + argv
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        if os.getuid() == 0:  # the postgres user must reach its directory
            d = os.path.dirname(self.dir)
            while d != "/":
                if not os.stat(d).st_mode & 0o001:
                    os.chmod(d, os.stat(d).st_mode | 0o011)
                d = os.path.dirname(d)
        pwfile = os.path.join(self.dir, "superuser.pw")
        with open(pwfile, "w") as f:
            f.write(secrets.token_hex(12) + "\n")
        if os.getuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        r = self._as_postgres([f"{BIN}/initdb", "-D", self.data, "-U", "postgres",
                               f"--pwfile={pwfile}", "--auth-local=trust",
                               "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"])
        assert r.returncode == 0, r.stderr
        self.restart()
        self.sql(f"CREATE ROLE medic LOGIN PASSWORD '{self.password}'")
        return self

    def restart(self):
        """Starts the server on its data directory (again, after stop())."""
        r = self._as_postgres([f"{BIN}/pg_ctl", "-D", self.data, "-l",
                               os.path.join(self.dir, "postgres.log"), "-w", "-t", "30", "-o",
                               f"-c listen_addresses={HOST} -p {self.port} -k {self.dir}",
                               "start"])
        assert r.returncode == 0, r.stdout + r.stderr
        self.running = True

    def sql(self, statement, db="postgres"):
        """Runs one statement as the superuser over the socket; its rows as
        lists of strings."""
        r = self._as_postgres(["psql", "-h", self.dir, "-p", str(self.port), "-U", "postgres",
                               "-d", db, "-v", "ON_ERROR_STOP=1", "-At", "-F", "\t", "-c",
                               statement])
        assert r.returncode == 0, f"{statement}: {r.stderr}"
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    def database(self, name):
        """A new database owned by medic; its URL."""
        self.sql(f"CREATE DATABASE {name} OWNER medic")
        return self.url(name)

    def url(self, name, password=None):
        return (f"postgresql://medic:{password or self.password}@{HOST}:{self.port}/{name}")

    @property
    def pid(self):
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            return int(f.readline())

    def stop(self, mode="fast"):
        if not self.running:
            return
        self._as_postgres([f"{BIN}/pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "20",
                           "stop"])
        self.running = False
