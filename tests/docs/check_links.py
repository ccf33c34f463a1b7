#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Every relative link in the docs leads somewhere: the file exists, and a
#section names a heading of it (GitHub's anchors: the heading lowercased,
punctuation other than '-' and '_' dropped, spaces made '-'). Fails
listing each broken link with where it is.

usage: check_links.py [ROOT]"""

import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def anchors(path):
    out, fenced = set(), False
    seen = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
                continue
            m = None if fenced else HEADING.match(line)
            if not m:
                continue
            text = re.sub(r"`|\*\*|\*|_(?=\w)|(?<=\w)_", lambda x: x.group(0)
                          if x.group(0) == "_" else "", m.group(1))
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    root = os.path.abspath(root)
    files = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True,
                           text=True, check=True).stdout.split()
    broken, checked = [], 0
    for rel in files:
        path = os.path.join(root, rel)
        fenced = False
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        for no, line in enumerate(lines, 1):
            if line.startswith("```"):
                fenced = not fenced
            if fenced:
                continue
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto: ...
                    continue
                file, _, section = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file \
                    else path
                checked += 1
                if not os.path.exists(dest):
                    broken.append(f"{rel}:{no}: {target}: no such file")
                elif section and dest.endswith(".md") and section not in anchors(dest):
                    broken.append(f"{rel}:{no}: {target}: {os.path.relpath(dest, root)} has no "
                                  f"section '{section}'")
    if broken:
        print("broken links:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1
    print(f"{checked} relative links in {len(files)} files lead somewhere")
    return 0


if __name__ == "__main__":
    sys.exit(main())
