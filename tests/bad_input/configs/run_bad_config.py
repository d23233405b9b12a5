"""Run one case of the golden bad-config corpus (tests/bad_input/configs/*.yaml).

Usage: /usr/bin/python3 run_bad_config.py --shardmill BIN CASE.yaml

Each case file starts with comment lines that state its contract:
    # bad config: what is wrong
    # exit: 2                         expected exit status
    # args: --set key=value ...       optional extra arguments of `shardmill validate`
    # expect: substring               one or more; each must appear in the error line
The case runs as `shardmill validate CASE.yaml ARGS` from this directory (so `where` reads
"CASE.yaml:LINE:COL"). It passes when the exit status matches, stdout is empty and stderr is
exactly one line "shardmill: error: ..." containing every expected substring.

Then the same file runs as `shardmill run CASE.yaml ARGS` (issue 10: `validate` rejects what
`run` rejects, and `run` rejects it before it opens any store): the exit status and the error line
must be the same as validate's, and nothing in this directory may appear or change (the cases'
stores, e.g. x.zarr, do not exist: a run that opened its input would fail on the missing store
with another line, one that opened its output would create out/).
"""

import argparse
import hashlib
import os
import shlex
import subprocess
import sys


def contract(path):
    exit_code, args, expects = None, [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#"):
                break
            body = line[1:].strip()
            key, _, value = body.partition(":")
            value = value.strip()
            if key == "exit":
                exit_code = int(value)
            elif key == "args":
                args = shlex.split(value)
            elif key == "expect":
                expects.append(value)
    return exit_code, args, expects


def snapshot(root):
    """Every path under root with a digest of its bytes (directories as None)."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for x in dirs:
            out[os.path.relpath(os.path.join(d, x), root)] = None
        for x in files:
            p = os.path.join(d, x)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("case")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    name = os.path.basename(a.case)
    exit_code, args, expects = contract(os.path.join(here, name))
    problems = []
    if exit_code is None or not expects:
        problems.append("the case states no '# exit:' or no '# expect:' line")
    cmd = [a.shardmill, "validate", name] + args
    p = subprocess.run(cmd, cwd=here, capture_output=True, timeout=30)
    err = p.stderr.decode("utf-8", errors="replace")
    if p.returncode != exit_code:
        problems.append(f"exit {p.returncode}, expected {exit_code}")
    if p.stdout:
        problems.append(f"stdout not empty: {p.stdout[:200]!r}")
    lines = err.split("\n")
    if len(lines) != 2 or lines[1] != "" or not lines[0].startswith("shardmill: error: "):
        problems.append(f"stderr is not one 'shardmill: error: ' line: {err!r}")
    for e in expects:
        if e not in err:
            problems.append(f"error line lacks {e!r}")
    print(" ".join(shlex.quote(c) for c in cmd))
    print(err, end="")
    # the same file through `run`: same status, same line, nothing touched
    before = snapshot(here)
    rcmd = [a.shardmill, "run", name] + args
    r = subprocess.run(rcmd, cwd=here, capture_output=True, timeout=30,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    after = snapshot(here)
    rerr = r.stderr.decode("utf-8", errors="replace")
    print(" ".join(shlex.quote(c) for c in rcmd))
    print(rerr, end="")
    if r.returncode != p.returncode:
        problems.append(f"run exits {r.returncode}, validate {p.returncode}")
    if rerr != err:
        problems.append(f"run's error line differs from validate's: {rerr!r}")
    if r.stdout:
        problems.append(f"run's stdout not empty: {r.stdout[:200]!r}")
    if before != after:
        changed = sorted(set(before) ^ set(after) |
                         {k for k in before if k in after and before[k] != after[k]})
        problems.append(f"run changed the case directory: {changed[:5]}")
    for pr in problems:
        print(f"FAIL {name}: {pr}")
    if not problems:
        print(f"ok {name}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
