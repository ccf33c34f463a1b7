#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A reference table in the docs is the output of a medic command, made from
the same table the code runs on: fails when the two differ, printing the
command's output so that it can be pasted in.

usage: check_reference.py MEDIC DOC.md ARG..."""

import subprocess
import sys


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    medic, doc, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    out = subprocess.run([medic, *args], capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or not out.stdout.strip():
        print(f"medic {' '.join(args)} failed: {out.stderr}", file=sys.stderr)
        return 1
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    if out.stdout not in text:
        print(f"{doc} does not hold the output of `medic {' '.join(args)}`; "
              f"replace its table with:\n\n{out.stdout}", file=sys.stderr)
        return 1
    print(f"{doc}: the reference of `medic {' '.join(args)}` is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
