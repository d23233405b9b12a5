#!/usr/bin/python3
"""README.md's layout table against the tree (issue 10: the README called scaling/ "planned").

Every row of a Markdown table whose first cell is one backticked path, `| \`path\` | what |`, is
checked: the path must exist (`<placeholder>` parts match any name, e.g. tests/unit/<module>/),
and a row whose description says "planned" must not name a path that exists with content (a
directory holding more than a README or .gitkeep, or a non-empty file): once the folder exists,
the row must say what it holds. The rules run on a few synthetic tables first, so the checker
itself is tested, and at least 10 rows must be found in README.md (a reshaped table fails
loudly instead of passing with nothing checked).

Usage: /usr/bin/python3 test_readme_layout.py [--root REPO]
"""

import argparse
import glob
import os
import re
import sys
import tempfile

ROW = re.compile(r"^\|\s*`([^`|]+)`\s*\|(.*)\|\s*$")
PLANNED = re.compile(r"\bplanned\b", re.IGNORECASE)
FILLER = {"README.md", "README", ".gitkeep", ".keep"}


def rows(text):
    for n, line in enumerate(text.splitlines(), 1):
        m = ROW.match(line)
        if m and "/" in m.group(1) or (m and os.path.splitext(m.group(1))[1]):
            yield n, m.group(1).strip(), m.group(2)


def matches(root, path):
    pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
    return [p for p in glob.glob(os.path.join(root, pattern))]


def has_content(p):
    if os.path.isdir(p):
        for d, dirs, files in os.walk(p):
            if any(f not in FILLER for f in files):
                return True
        return False
    return os.path.getsize(p) > 0


def problems(root, text):
    out = []
    for n, path, what in rows(text):
        found = matches(root, path)
        if not found:
            out.append(f"README.md:{n}: `{path}` does not exist")
        elif PLANNED.search(what) and any(has_content(p) for p in found):
            out.append(f"README.md:{n}: `{path}` exists with content but is called planned: "
                       f"{what.strip()}")
    return out


def selftest():
    """The checker flags what it must and passes what it must (synthetic trees)."""
    bad = []
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "done"))
        open(os.path.join(t, "done", "run.py"), "w").write("x = 1\n")
        os.makedirs(os.path.join(t, "empty"))
        open(os.path.join(t, "empty", "README.md"), "w").write("soon\n")
        os.makedirs(os.path.join(t, "tests", "unit", "core"))
        open(os.path.join(t, "tests", "unit", "core", "t.c"), "w").write("int x;\n")
        cases = [
            ("| `done/` | *planned:* runs |", 1),      # exists with content, called planned
            ("| `done/` | the runs |", 0),
            ("| `empty/` | *planned:* runs |", 0),     # only a README: planned is true
            ("| `missing/` | things |", 1),            # does not exist
            ("| `tests/unit/<module>/` | unit tests |", 0),
            ("| `tests/nope/<x>/` | nothing |", 1),
            ("| key | type |", 0),                      # not a path row
        ]
        for text, want in cases:
            got = len(problems(t, text))
            if got != want:
                bad.append(f"selftest: {text!r} gives {got} problem(s), want {want}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    a = ap.parse_args()
    fails = selftest()
    text = open(os.path.join(a.root, "README.md"), encoding="utf-8").read()
    n = len(list(rows(text)))
    if n < 10:
        fails.append(f"README.md: only {n} layout rows found (expected the layout table)")
    fails += problems(a.root, text)
    for f in fails:
        print("FAIL", f)
    if not fails:
        print(f"ok: {n} README layout rows name existing paths, none existing called planned")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
