#!/usr/bin/python3
"""Citations of docs/SPEC.md and docs/STYLE.md against their headings (issue 24 item 1).

Code, tests and docs cite the project's rules as `SPEC §N` / `SPEC §N.M` and `STYLE Bn`. Every
citation must name a heading of the repository's own documents: `## §5. Definitions` or
`### §5.3 Histogram` in docs/SPEC.md, `### B6. Memory ownership` in docs/STYLE.md. Lists and
ranges are read too: `SPEC §4, §6`, `SPEC §2/§5`, `SPEC §2-§4`, `STYLE B4, B8, B11`,
`STYLE B7/B8`, `STYLE B1–B4`; a `§` not led by `SPEC` (an RFC's, the Zarr spec's) is not ours.
No file may point at a copy of the rules outside the repository (a `shared/` SPEC.md or
STYLE.md beside it): the repository's own documents replace it.

Scanned: engine/ jobs/ tests/ bench/ scaling/ scripts/ slurm/ configs/ docs/ examples/ and
README.md, CONTRIBUTING.md, CHANGELOG.md; text files only (UTF-8, no NUL byte), not build/,
data/, node_modules/, .git/, __pycache__/, the fuzz corpora (mutated bytes, not prose) or this
file (its self-test strings are wrong on purpose). JSON results spell § as \\u00a7; that form
counts too. docs/SPEC.md must have §1 … §9 as `## §N. Title` headings, in order, and no heading
twice. The rules run on synthetic trees first, so the checker itself is tested, and at least
300 SPEC and 30 STYLE citations must be found (a broken pattern fails loudly instead of passing
with nothing checked).

Usage: /usr/bin/python3 test_spec_citations.py [--root REPO]
"""

import argparse
import os
import re
import sys
import tempfile

SCAN_DIRS = ["engine", "jobs", "tests", "bench", "scaling", "scripts", "slurm", "configs", "docs",
             "examples"]
SCAN_FILES = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"]
SKIP_DIRS = {"build", "data", "node_modules", ".git", "__pycache__"}
SKIP_PATHS = {os.path.join("tests", "fuzz", "corpus"), os.path.join("tests", "fuzz", "crashes")}
SELF = os.path.join("tests", "docs", os.path.basename(__file__))

SECT = r"(?:§|\\u00a7)(\d+(?:\.\d+)*)"   # §5.3, or \u00a75.3 in JSON text
SEP = r"\s*(?:,|/|-|–|\band\b|\bor\b)\s*"
SPEC_CITE = re.compile(r"\bSPEC\s+" + SECT + r"((?:" + SEP + SECT + r")*)")
SPEC_MORE = re.compile(r"(" + SEP + r")" + SECT)
RULE = r"(B\d+[a-z]?)"
STYLE_CITE = re.compile(r"\bSTYLE\s+" + RULE + r"((?:" + SEP + RULE + r"\b)*)")
STYLE_MORE = re.compile(r"(" + SEP + r")" + RULE)
SPEC_HEAD = re.compile(r"^#{2,6}\s+§(\d+(?:\.\d+)*)\.?\s+\S")
SPEC_TOP = re.compile(r"^## §(\d+)\. \S")
STYLE_HEAD = re.compile(r"^#{2,6}\s+(B\d+[a-z]?)\.\s+\S")
# a copy of the rules outside the repository, written so that this file does not match itself
SHARED = re.compile(r"(?:\.\./)?" + "shared" + r"/(?:SPEC|STYLE)\.md")
TOP_SECTIONS = [str(n) for n in range(1, 10)]


def headings(text, pattern):
    """(ids in order, duplicated ids) of the headings a pattern finds."""
    ids, dups = [], []
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else pattern.match(line)
        if m:
            (dups if m.group(1) in ids else ids).append(m.group(1))
    return ids, dups


def expand(first, rest, more, is_range):
    """Every section a citation names: the first, the listed ones, and the ids inside ranges of
    whole numbers (§2-§4 is 2, 3, 4; B1–B4 is B1 … B4)."""
    out = [first]
    for m in more.finditer(rest):
        sep, sid = m.group(1).strip(), m.group(2)
        prev = out[-1]
        if sep in ("-", "–") and is_range(prev, sid):
            out += is_range(prev, sid)
        out.append(sid)
    return out


def spec_range(a, b):
    if a.isdigit() and b.isdigit() and int(a) < int(b):
        return [str(n) for n in range(int(a) + 1, int(b))]
    return []


def style_range(a, b):
    ma, mb = re.fullmatch(r"B(\d+)", a), re.fullmatch(r"B(\d+)", b)
    if ma and mb and int(ma.group(1)) < int(mb.group(1)):
        return ["B%d" % n for n in range(int(ma.group(1)) + 1, int(mb.group(1)))]
    return []


def citations(text):
    """(line, kind, id) of every SPEC and STYLE citation, and lines naming a shared copy."""
    cites, shared = [], []
    for n, line in enumerate(text.splitlines(), 1):
        for m in SPEC_CITE.finditer(line):
            for sid in expand(m.group(1), m.group(2), SPEC_MORE, spec_range):
                cites.append((n, "SPEC", sid))
        for m in STYLE_CITE.finditer(line):
            for sid in expand(m.group(1), m.group(2), STYLE_MORE, style_range):
                cites.append((n, "STYLE", sid))
        if SHARED.search(line):
            shared.append(n)
    return cites, shared


def text_files(root):
    """Relative paths of the text files to scan, sorted."""
    out = []
    for top in SCAN_DIRS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(d, root)
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS
                             and os.path.join(rel, x) not in SKIP_PATHS)
            out += [os.path.join(rel, f) for f in files]
    out += [f for f in SCAN_FILES if os.path.isfile(os.path.join(root, f))]
    return sorted(p for p in out if p != SELF)


def read_text(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check(root):
    """(problems, number of SPEC citations, number of STYLE citations, files scanned)."""
    probs = []
    spec = read_text(os.path.join(root, "docs", "SPEC.md"))
    style = read_text(os.path.join(root, "docs", "STYLE.md"))
    if spec is None or style is None:
        return ["docs/SPEC.md and docs/STYLE.md must exist"], 0, 0, 0
    sections, dups = headings(spec, SPEC_HEAD)
    rules, rdups = headings(style, STYLE_HEAD)
    tops, _ = headings(spec, SPEC_TOP)
    if tops != TOP_SECTIONS:
        probs.append("docs/SPEC.md: top-level headings `## §N. Title` are %s, want §1 … §9 in "
                     "order" % (["§" + t for t in tops],))
    probs += ["docs/SPEC.md: heading §%s appears twice" % d for d in dups]
    probs += ["docs/STYLE.md: heading %s appears twice" % d for d in rdups]
    if not rules:
        probs.append("docs/STYLE.md: no `### Bn. Title` heading found")
    known = {"SPEC": set(sections), "STYLE": set(rules)}
    doc = {"SPEC": "docs/SPEC.md", "STYLE": "docs/STYLE.md"}
    nspec = nstyle = nfiles = 0
    for rel in text_files(root):
        text = read_text(os.path.join(root, rel))
        if text is None:
            continue
        nfiles += 1
        cites, shared = citations(text)
        for n, kind, sid in cites:
            nspec += kind == "SPEC"
            nstyle += kind == "STYLE"
            if sid not in known[kind]:
                shown = "SPEC §" + sid if kind == "SPEC" else "STYLE " + sid
                probs.append(f"{rel}:{n}: {shown} is not a heading of {doc[kind]}")
        for n in shared:
            probs.append(f"{rel}:{n}: names a copy of the rules outside the repository; cite "
                         "docs/SPEC.md or docs/STYLE.md")
    return probs, nspec, nstyle, nfiles


SPEC_FIXTURE = """# spec
## §1. One
### §1.1 Sub
## §2. Two
## §3. Three
## §4. Four
## §5. Five
### §5.3 Histogram
```
## §7. Not a heading: inside a fence
```
## §6. Six
## §7. Seven
## §8. Eight
## §9. Nine
"""
STYLE_FIXTURE = "# style\n### B1. One\n### B2. Two\n### B3. Three\n### B4. Four\n### B10a. Ten\n"


# A section no fixture has, spelled in two pieces so that no scan of this file (ours skips it,
# other tools do not) reads a citation of it here.
NO_SECTION = "§1" + "2"


def selftest():
    """The checker flags what it must and passes what it must (synthetic trees)."""
    bad = []
    cases = [
        ("/* SPEC §5.3: bin */", 0),
        ("see SPEC §1.1 and SPEC §9.", 0),
        (f"(SPEC {NO_SECTION})", 1),                   # no such section
        ("SPEC §5.99 of the histogram", 1),           # no such subsection
        (f"SPEC §4, {NO_SECTION}", 1),                # the second of a list
        ("SPEC §2/§5 and SPEC §2-§4", 0),
        ("SPEC §1, §2, §5, §6 and §7", 0),
        ('"W1 (SPEC \\u00a78)"', 0),                  # JSON's escape of §
        ('"W9 (SPEC \\u00a712)"', 1),
        (f"RFC 8878 §3.1.1.2, zarr {NO_SECTION}", 0),  # not SPEC's
        ("STYLE B4, B2 and STYLE B10a", 0),
        ("STYLE B1–B4", 0),
        ("STYLE B1–B5", 1),                            # B5 (the range's end) is missing
        ("STYLE B2/B9", 1),
        ("STYLE B99", 1),
        ("read ../" + "shared/SPEC.md first", 1),     # a copy outside the repository
        ("the rules: " + "shared/STYLE.md", 1),
    ]
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "docs"))
        open(os.path.join(t, "docs", "SPEC.md"), "w").write(SPEC_FIXTURE)
        open(os.path.join(t, "docs", "STYLE.md"), "w").write(STYLE_FIXTURE)
        os.makedirs(os.path.join(t, "engine"))
        os.makedirs(os.path.join(t, "build"))
        open(os.path.join(t, "build", "x.c"), "w").write(f"/* SPEC {NO_SECTION} */\n")  # skipped
        open(os.path.join(t, "engine", "bin.dat"), "wb").write(b"SPEC \xc2\xa712\0")  # binary
        base, _, _, _ = check(t)
        if base:
            bad.append(f"selftest: the clean tree has problems: {base}")
        for text, want in cases:
            open(os.path.join(t, "engine", "a.c"), "w").write(text + "\n")
            probs, _, _, _ = check(t)
            if len(probs) != want:
                bad.append(f"selftest: {text!r} gives {len(probs)} problem(s), want {want}: "
                           f"{probs}")
        os.remove(os.path.join(t, "engine", "a.c"))
        with open(os.path.join(t, "docs", "SPEC.md"), "w") as f:
            f.write(SPEC_FIXTURE.replace("## §4. Four", "## §4 Four"))
        if not any("top-level" in p for p in check(t)[0]):
            bad.append("selftest: a top-level heading without its `§N.` form passes")
        with open(os.path.join(t, "docs", "SPEC.md"), "w") as f:
            f.write(SPEC_FIXTURE + "### §5.3 Again\n")
        if not any("twice" in p for p in check(t)[0]):
            bad.append("selftest: a duplicated heading passes")
    return bad


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    a = ap.parse_args()
    fails = selftest()
    probs, nspec, nstyle, nfiles = check(a.root)
    fails += probs
    if nspec < 300 or nstyle < 30:
        fails.append(f"only {nspec} SPEC and {nstyle} STYLE citations found in {nfiles} files "
                     "(expected hundreds: is the pattern broken?)")
    for f in fails:
        print("FAIL", f)
    if not fails:
        print(f"ok: {nspec} SPEC and {nstyle} STYLE citations in {nfiles} files name headings of "
              "docs/SPEC.md and docs/STYLE.md; no file points outside the repository")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
