#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The manual pages packaging/man.py writes from medic's --help: one per
command `medic --help` lists, plus medic(1) and medic.yaml(5); groff renders
each without a warning; every option a command's --help names is on its
page, and every key of `medic check config --reference` on medic.yaml(5).
Every --help (of medic, each command and each subcommand its usage names)
fits an 80-column terminal, and every option its usage lines name has its
row among the options the table writes.

usage: check_man.py MEDIC"""

import os
import re
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def render(path):
    out = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-rLL=100n", path],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stderr == "", f"{path}: {out.stderr}"
    # groff's bold and underline by overstrike, and its hyphen, read back as text
    return re.sub(r".\x08", "", out.stdout).replace("\u2010", "-").replace("\u2212", "-")


def synopsis_named(what, shown):
    """Every option the usage lines name has its row in the options the
    table writes (a line "  --name ..."), so that an option added to the
    synopsis only, or to a table without its help, is caught."""
    usage = shown.split("\n\n")[0]
    named = set()
    for line in usage.split("\n"):
        if "see --help there" not in line:
            named |= set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line))
    rows = set(re.findall(r"^  (--[a-z][a-z-]*)", shown, re.M))
    missing = sorted(named - rows - {"--help"})
    assert not missing, f"{what} --help: the usage names {missing} but no option row does"


def main():
    medic = sys.argv[1]
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, os.path.join(TOP, "packaging", "man.py"), medic, out],
                       check=True, timeout=120)
        top = subprocess.run([medic, "--help"], capture_output=True, text=True).stdout
        commands = re.findall(r"^  (\S+)\s{2,}", top.split("Commands:")[1], re.M)
        pages = sorted(os.listdir(os.path.join(out, "man1")))
        assert pages == sorted(["medic.1"] + [f"medic-{c}.1" for c in commands]), pages
        widths = 0
        for cmd in [""] + commands:
            name = f"medic-{cmd}.1" if cmd else "medic.1"
            text = " ".join(render(os.path.join(out, "man1", name)).split())
            helped = subprocess.run([medic, *([cmd] if cmd else []), "--help"],
                                    capture_output=True, text=True).stdout
            subs = set(re.findall(rf"^(?:usage:)? +medic {cmd} ([a-z][a-z-]*)", helped, re.M)) \
                if cmd else set()
            for sub in [None, *sorted(subs)]:
                shown = helped if sub is None else subprocess.run(
                    [medic, cmd, sub, "--help"], capture_output=True, text=True).stdout
                wide = [line for line in shown.split("\n") if len(line) > 80]
                assert not wide, f"medic {cmd} {sub or ''} --help is wider than 80 columns: {wide}"
                widths += 1
                synopsis_named(f"medic {cmd} {sub or ''}", shown)
            for option in set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", helped)):
                assert option in text, f"{name}: {option} from --help is not on the page"
            if cmd:
                assert f"medic-{cmd} - " in text and "SEE ALSO medic(1)" in text, text[:300]
        yaml = " ".join(render(os.path.join(out, "man5", "medic.yaml.5")).split())
        ref = subprocess.run([medic, "check", "config", "--reference"], capture_output=True,
                             text=True, check=True).stdout
        keys = re.findall(r"^\| `([^`]+)` \|", ref, re.M)
        assert len(keys) > 30, keys
        for key in keys:
            assert key in yaml, f"medic.yaml(5) lacks {key}"
        print(f"{len(pages)} pages of section 1 and medic.yaml(5) ({len(keys)} keys) render "
              f"without a warning and name every option of --help; {widths} --help texts fit "
              "80 columns")


if __name__ == "__main__":
    main()
