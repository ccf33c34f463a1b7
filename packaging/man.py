#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes medic's manual pages from its own --help texts, so that the two
never disagree: medic(1) from `medic --help`, medic-CMD(1) from `medic CMD
--help` for every command it lists, and medic.yaml(5) from `medic check
config --reference`.

usage: packaging/man.py MEDIC OUTDIR [--gzip]
  writes OUTDIR/man1/*.1 and OUTDIR/man5/medic.yaml.5; with --gzip compressed
  as Debian installs manual pages (gzip -9n: no name or time stored)

A --help text is read as: the usage block (SYNOPSIS), then paragraphs. A
paragraph of plain lines is filled text; a line ending in ':' alone heads a
subsection; an indented or column-aligned paragraph (options, tables) is
kept as it is laid out."""

import gzip
import os
import re
import subprocess
import sys

SECTION_DATE = os.environ.get("MEDIC_MAN_DATE", "2026-11-24")
SEE_ALSO_EXTRA = {
    "serve": ["medic.yaml(5)"],
    "check": ["medic.yaml(5)"],
}
FILES = {
    "serve": [("/etc/medic/medic.yaml", "the configuration medic.service starts medic with"),
              ("/var/lib/medic/medic.db", "the audit log (SQLite) of the packaged service")],
    "audit": [("/var/lib/medic/medic.db", "the audit log of the packaged service")],
}


def esc(text):
    """Roff-escaped text: backslashes, dashes, and a leading dot or quote."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text)


def help_text(medic, *args):
    out = subprocess.run([medic, *args, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise SystemExit(f"man.py: {' '.join(args)} --help exited {out.returncode}")
    return out.stdout


def paragraphs(text):
    paras, cur = [], []
    for line in text.rstrip("\n").split("\n"):
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            paras.append(cur)
            cur = []
    if cur:
        paras.append(cur)
    return paras


def synopsis(block):
    """The usage block as one line per form: a form starts with 'medic'."""
    forms = []
    for i, line in enumerate(block):
        text = line.strip()
        if i == 0:
            text = re.sub(r"^usage:\s*", "", text, flags=re.I)
        if text.startswith("medic") or not forms:
            forms.append(text)
        else:
            forms[-1] += " " + text
    out = [".SH SYNOPSIS"]
    for f in forms:
        words = f.split(" ")
        command = [w for w in words[:2] if not w.startswith(("-", "[", "("))]
        if len(command) == 2 and command[1].isupper():
            command = command[:1]
        rest = " ".join(words[len(command):])
        out += [f'.B "{esc(" ".join(command))}"', esc(rest) if rest else "", ".br"]
    return [line for line in out if line != ""]


def is_plain(para):
    return all(not line.startswith(" ") and "  " not in line.strip() for line in para)


def body(paras):
    out = [".SH DESCRIPTION"]
    for para in paras:
        first = para[0]
        if re.fullmatch(r"[A-Z][A-Za-z ,/()'-]*:", first.strip()) and not first.startswith(" "):
            out.append(f'.SS "{esc(first.strip()[:-1])}"')
            para = para[1:]
            if not para:
                continue
        if is_plain(para):
            out += [".PP"] + [esc(line) for line in para]
        else:
            out += [".PP", ".nf", ".RS 2"] + [esc(line) for line in para] + [".RE", ".fi"]
    return out


def page(name, section, summary, text, see_also, files=()):
    paras = paragraphs(text)
    lines = [f'.TH {esc(name.upper())} {section} "{SECTION_DATE}" "medic" '
             f'"{"User Commands" if section == 1 else "File Formats"}"',
             ".SH NAME", f"{esc(name)} \\- {esc(summary)}"]
    lines += synopsis(paras[0]) + body(paras[1:])
    if files:
        lines.append(".SH FILES")
        for path, what in files:
            lines += [".TP", f"\\fI{esc(path)}\\fR", esc(what)]
    if see_also:
        lines += [".SH SEE ALSO",
                  ",\n".join(f"\\fB{esc(p.split('(')[0])}\\fR({p.split('(')[1]}"
                             for p in see_also)]
    return "\n".join(lines) + "\n"


def commands(top_help):
    """(name, summary) of each command `medic --help` lists."""
    found, inside = [], False
    for line in top_help.split("\n"):
        if line.startswith("Commands:"):
            inside = True
            continue
        if inside:
            m = re.match(r"  (\S+)\s{2,}(.*)", line)
            if m:
                found.append([m.group(1), m.group(2)])
            elif line.startswith("   ") and found:
                found[-1][1] += " " + line.strip()
            elif not line.strip():
                break
    return found


def inline(md):
    """Markdown code spans as bold, escaped for roff."""
    parts = md.split("`")
    return "".join(f"\\fB{esc(p)}\\fR" if i % 2 else esc(p) for i, p in enumerate(parts))


def config_page(medic):
    ref = subprocess.run([medic, "check", "config", "--reference"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    lines = [f'.TH MEDIC.YAML 5 "{SECTION_DATE}" "medic" "File Formats"',
             ".SH NAME", "medic.yaml \\- the configuration of medic serve",
             ".SH SYNOPSIS", "/etc/medic/medic.yaml",
             ".SH DESCRIPTION",
             ".PP", "A YAML document read by \\fBmedic serve \\-\\-config\\fR FILE, by "
             "\\fBmedic check config\\fR FILE and on SIGHUP. Unknown keys are errors "
             "(\\fIFILE\\fR:\\fILINE\\fR:\\fICOL\\fR: message); a reload that does not "
             "validate keeps the running configuration. Durations are written 500ms, 10s, "
             "5m, 1h; sizes 64KiB, 1MiB. Secrets are read from files of mode 0600 or 0400.",
             ".SH KEYS"]
    for row in ref.split("\n"):
        cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
        if len(cells) != 4 or cells[0] in ("key", "---") or set(cells[0]) <= set("-"):
            continue
        key, default, applies, meaning = cells
        lines += [".TP", inline(key) + (f" (default: {inline(default)}; a change applies "
                                        f"{applies})" if default else f" (a change applies "
                                        f"{applies})"),
                  inline(meaning)]
    lines += [".SH SEE ALSO", "\\fBmedic\\fR(1),", "\\fBmedic\\-serve\\fR(1),",
              "\\fBmedic\\-check\\fR(1)"]
    return "\n".join(lines) + "\n"


def write(path, text, compress):
    if compress:
        with open(path + ".gz", "wb") as raw:
            # no file name and a zero time in the header: the same bytes every build
            with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw,
                               mtime=0) as f:
                f.write(text.encode())
    else:
        with open(path, "w") as f:
            f.write(text)


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--gzip"):
        raise SystemExit(__doc__)
    medic, outdir, compress = sys.argv[1], sys.argv[2], len(sys.argv) == 4
    os.makedirs(os.path.join(outdir, "man1"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "man5"), exist_ok=True)
    top = help_text(medic)
    cmds = commands(top)
    pages = [f"medic-{c}(1)" for c, _ in cmds]
    text = top.rstrip("\n") + "\n\nEach command has its own manual page: medic-COMMAND(1).\n"
    write(os.path.join(outdir, "man1", "medic.1"),
          page("medic", 1, "act on Alertmanager's GPU alerts under safety guards", text,
               pages + ["medic.yaml(5)"]), compress)
    for cmd, summary in cmds:
        see = ["medic(1)"] + SEE_ALSO_EXTRA.get(cmd, [])
        write(os.path.join(outdir, "man1", f"medic-{cmd}.1"),
              page(f"medic-{cmd}", 1, summary, help_text(medic, cmd), see, FILES.get(cmd, ())),
              compress)
    write(os.path.join(outdir, "man5", "medic.yaml.5"), config_page(medic), compress)


if __name__ == "__main__":
    main()
