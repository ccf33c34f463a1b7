#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The audit's SQL layer on a real PostgreSQL 15 (tests/pg_db_probe, a TEST
PROBE over audit/db.h): statements of rows, pipelined statements, a
session lock released by the rollback of a failed batch, and the word that
an engine took people's requests, heard by a listener at the commit."""

import os
import subprocess

from lab import Suite
from postgres_lab import PostgreSQL


def test_sql_layer_on_postgresql(suite):
    probe = os.environ.get("MEDIC_PG_DB_PROBE")
    assert probe and os.path.exists(probe), "MEDIC_PG_DB_PROBE names tests/pg_db_probe"
    pg = PostgreSQL(suite.subdir("pg-db")).start()
    suite.on_exit(pg.stop)
    url = pg.database("probe")
    out = subprocess.run([probe, url], capture_output=True, text=True, timeout=60)
    got = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert got == {case: "ok" for case in ("rows", "mistyped", "pipelined",
                                           "failed-releases-lock", "aborted", "heard")}, \
        out.stdout + out.stderr
    assert out.returncode == 0, out.stderr
    # what the probe left: its four rows and the committed one, no lock held
    assert pg.sql("SELECT count(*) FROM probe_rows", "probe") == [["5"]]
    assert pg.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'", "probe") == [["0"]]


if __name__ == "__main__":
    Suite(__doc__).run([test_sql_layer_on_postgresql])
