#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Each audit backend keeps its database library to itself: nothing in
medic's sources outside audit/sqlite/ names SQLite's C API (sqlite3.h,
sqlite3_*), and nothing outside audit/pg/ names libpq's (libpq-fe.h,
PGconn, PQ*()). A new backend is a folder and a row in the table of
backends (audit/backend.c), not a branch in the code that calls it.

usage: check_backend_walls.py SOURCE_DIR"""

import os
import re
import sys

ROOTS = ["agent", "actions", "audit", "cli", "common", "engine", "model", "policies",
         "receiver", "bench"]
WALLS = [
    ("audit/sqlite/", "SQLite", re.compile(r"sqlite3\.h|\bsqlite3_[a-z_]+\s*\(|\bsqlite3\s*\*")),
    ("audit/pg/", "libpq",
     re.compile(r"libpq-fe\.h|\bPGconn\b|\bPGresult\b|\bPQ[a-z][A-Za-z]*\s*\(")),
]


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    top = sys.argv[1]
    found, checked = [], 0
    for root in ROOTS:
        for folder, _, files in os.walk(os.path.join(top, root)):
            for name in files:
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, top)
                text = strip_comments(open(path, encoding="utf-8").read())
                checked += 1
                for home, lib, pattern in WALLS:
                    if rel.startswith(home):
                        continue
                    m = pattern.search(text)
                    if m:
                        found.append(f"{rel}: names {lib} ({m.group(0).strip()}) outside {home}")
    # the walls must hold something: each backend's folder names its library
    for home, lib, pattern in WALLS:
        if not os.path.isdir(os.path.join(top, home)):
            found.append(f"{home}: missing: the {lib} backend has no folder of its own")
            continue
        inside = [f for f in os.listdir(os.path.join(top, home)) if f.endswith((".c", ".h"))]
        if not any(pattern.search(strip_comments(open(os.path.join(top, home, f),
                                                      encoding="utf-8").read()))
                   for f in inside):
            found.append(f"{home}: no file names {lib}: is this check still looking right?")
    for line in found:
        print(line, file=sys.stderr)
    print(f"{checked} source files checked, {len(found)} outside their backend's folder")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
