#!/usr/bin/python3
"""docs/ARCHITECTURE.md's table "jobs/, file by file" against jobs/ (issue 24 #4).

Every `.c` and `.h` file of jobs/ must have a row `| \\`name\\` | what |` in that section, and
every row must name a file that exists, once. The rule runs on a made-up section first, so the
checker itself is tested.

Usage: /usr/bin/python3 test_jobs_files.py [--root REPO]
"""

import argparse
import os
import re
import sys

SECTION = "## jobs/, file by file"
ROW = re.compile(r"^\|\s*`([^`|]+)`\s*\|")


def listed(text):
    """The file names of the section's table, in order (None: no such section)."""
    start = text.find("\n" + SECTION + "\n")
    if start < 0:
        return None
    body = text[start + len(SECTION) + 2:]
    end = body.find("\n## ")
    body = body if end < 0 else body[:end]
    return [m.group(1).strip() for m in map(ROW.match, body.splitlines()) if m]


def problems(names, files):
    if names is None:
        return [f"docs/ARCHITECTURE.md has no section '{SECTION}'"]
    out = [f"jobs/{f} is not in the table" for f in sorted(set(files) - set(names))]
    out += [f"the table names jobs/{n}, which does not exist" for n in
            sorted(set(names) - set(files))]
    out += [f"the table names jobs/{n} twice" for n in sorted({n for n in names
                                                               if names.count(n) > 1})]
    return out


def self_test():
    made_up = ("# A\n\n" + SECTION + "\n\n| file | what |\n| --- | --- |\n| `a.c` | a |\n"
               "| `b.h` | b |\n| `b.h` | again |\n| `gone.c` | old |\n\n## Next\n\n| `c.c` | x |\n")
    got = problems(listed(made_up), ["a.c", "b.h", "c.c"])
    want = ["jobs/c.c is not in the table", "the table names jobs/gone.c, which does not exist",
            "the table names jobs/b.h twice"]
    if got != want or problems(listed("# A\n"), []) == []:
        sys.exit(f"test_jobs_files: the self-test found {got}, expected {want}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", ".."))
    a = ap.parse_args()
    self_test()
    with open(os.path.join(a.root, "docs", "ARCHITECTURE.md"), encoding="utf-8") as f:
        names = listed(f.read())
    files = [n for n in os.listdir(os.path.join(a.root, "jobs")) if n.endswith((".c", ".h"))]
    found = problems(names, files)
    for p in found:
        print("FAIL " + p)
    if found:
        sys.exit(f"test_jobs_files: {len(found)} problem(s) (docs/ARCHITECTURE.md '{SECTION}')")
    print(f"ok   docs/ARCHITECTURE.md names the {len(files)} files of jobs/")


if __name__ == "__main__":
    main()
