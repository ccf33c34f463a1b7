#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One agent port everywhere: the port `medic agent` listens on by default
(its --help), its systemd unit's --listen, and every agent URL in the docs,
the examples and `medic inventory import`'s help are the same. Following an
example with another port quarantines every repaired node (its verify
cannot reach the agent).

usage: check_agent_port.py MEDIC SOURCE_DIR"""

import os
import re
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    medic, top = sys.argv[1], sys.argv[2]
    agent_help = subprocess.run([medic, "agent", "--help"], capture_output=True, text=True,
                                timeout=30)
    m = re.search(r"--listen ADDR:PORT\s+default [0-9.]+:(\d+)", agent_help.stdout +
                  agent_help.stderr)
    if not m:
        print("medic agent --help names no default port", file=sys.stderr)
        return 1
    port = m.group(1)
    unit = open(os.path.join(top, "packaging", "medic-agent.service"), encoding="utf-8").read()
    found = {"packaging/medic-agent.service": re.findall(r"--listen [0-9.]+:(\d+)", unit)}
    inventory_help = subprocess.run([medic, "inventory", "--help"], capture_output=True,
                                    text=True, timeout=30)
    found["medic inventory --help"] = re.findall(r"http://\{\{ node \}\}:(\d+)",
                                                 inventory_help.stdout + inventory_help.stderr)
    # agent URLs written for real nodes ({{ node }} templates and fleet
    # names): the lab's agents listen on ports the tests pick
    url = re.compile(r"agent: \{ url: '?https?://(?:\{\{ node \}\}|gpu-[\w-]+|n\d+):(\d+)")
    for sub in ("docs", "examples"):
        for root, _, files in os.walk(os.path.join(top, sub)):
            for name in files:
                if name.endswith((".md", ".yaml", ".yml")):
                    path = os.path.join(root, name)
                    ports = url.findall(open(path, encoding="utf-8").read())
                    if ports:
                        found[os.path.relpath(path, top)] = ports
    bad = {where: ports for where, ports in found.items() if not ports or set(ports) != {port}}
    if bad or len(found) < 4:
        print(f"medic agent listens on {port} by default; these say otherwise (or nothing): "
              f"{bad}", file=sys.stderr)
        return 1
    print(f"the agent's port {port} is the same in {len(found)} places: {sorted(found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
