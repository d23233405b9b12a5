#!/usr/bin/python3
"""`shardmill --version` names the commit of the source tree it was built from (SPEC §6, §7:
provenance). The commit is read at build time (cmake/sm_version.cmake), so a binary built after a
new commit must not report the commit of the first configure. Skipped (77) outside a git checkout.

    test_version_commit.py --shardmill BIN --source DIR
"""

import argparse
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    git = subprocess.run(["git", "-C", a.source, "rev-parse", "--short=12", "HEAD"],
                         capture_output=True, text=True)
    if git.returncode != 0:
        print("not a git checkout: skipped")
        return 77
    head = git.stdout.strip()
    out = subprocess.run([a.shardmill, "--version"], capture_output=True, text=True, check=True)
    m = re.search(r"\(commit ([0-9a-f]+|unknown)\)", out.stdout)
    if m is None:
        print(f"FAIL: no commit in `shardmill --version`: {out.stdout!r}")
        return 1
    if m.group(1) != head:
        print(f"FAIL: the binary says commit {m.group(1)}, the tree is at {head} "
              "(rebuild: the commit is taken at build time)")
        return 1
    print(f"ok: commit {head}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
