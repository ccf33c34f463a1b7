#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""medic is Apache-2.0: the LICENSE file holds the license's text, every
source file git tracks names it (SPDX-License-Identifier: Apache-2.0, in
its first lines), and the package's copyright file says so. Data that
came with its own license (tests/data/infinitehbd-trace) keeps it beside it.

usage: check_licenses.py"""

import os
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = (".c", ".h", ".py", ".sh", ".lua", ".cmake")
SCRIPTS = {"CMakeLists.txt", "postinst", "prerm", "postrm", "run"}


def main():
    with open(os.path.join(TOP, "LICENSE")) as f:
        text = f.read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text, "LICENSE"
    files = subprocess.run(["git", "ls-files"], cwd=TOP, capture_output=True, text=True,
                           check=True).stdout.split()
    checked, missing = 0, []
    for path in files:
        name = os.path.basename(path)
        if path.startswith("tests/data/") or not (name.endswith(SOURCE) or name in SCRIPTS):
            continue
        full = os.path.join(TOP, path)
        if not os.path.exists(full):
            continue  # deleted in the working tree
        with open(full, errors="replace") as f:
            head = f.read(400)
        checked += 1
        if "SPDX-License-Identifier: Apache-2.0" not in head:
            missing.append(path)
    assert not missing, f"no SPDX-License-Identifier: Apache-2.0 in {missing[:10]}"
    trace = os.path.join(TOP, "tests", "data", "infinitehbd-trace")
    assert os.path.exists(os.path.join(trace, "LICENSE")), "the trace's own LICENSE"
    with open(os.path.join(TOP, "packaging", "copyright")) as f:
        assert "License: Apache-2.0" in f.read(), "packaging/copyright"
    print(f"{checked} source files name Apache-2.0")


if __name__ == "__main__":
    sys.exit(main())
