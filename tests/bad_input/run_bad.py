"""Run shardmill's golden error corpus (tests/bad_input) and check each failure's contract.

Usage: /usr/bin/python3 run_bad.py --shardmill BIN --dir OUTDIR [--case NAME]...
For each case of OUTDIR/cases.json (bad_cases.CASES; stores built by `bad_cases.py OUTDIR`): the
exit code is the expected one (SPEC §4); stderr is exactly one line starting "shardmill: error:
" that contains every `must` substring, no `must_not` one and one of each `any` group
(case-insensitive); stdout is empty when the output goes to a file; `-o FILE` leaves no file (nor
temporary file) behind, and an existing FILE is left untouched; a case's control command (same
store, within the limit) succeeds. Prints every problem; the last line is "bad_input: N passed, N failed".
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

OLD = b"existing output, must survive a failed read\n"


def check_case(sm, outdir, case):
    """Run one case; return a list of problems (empty = pass)."""
    d = os.path.join(outdir, case["name"])
    try:
        with open(os.path.join(d, "store.txt")) as f:
            store = os.path.join(d, f.read().strip())
    except OSError:
        return [f"store not built (run bad_cases.py {outdir})"]
    out_dir = os.path.join(d, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "region.bin")
    keep = case["keep_existing"]
    if keep:
        with open(out, "wb") as f:
            f.write(OLD)
    args = [a.replace("{store}", store).replace("{out}", out) for a in case["args"]]
    cmd = [sm] + args
    shown = " ".join(cmd)
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return [f"timed out ({shown})"]
    problems = []
    codes = case["exit"] if isinstance(case["exit"], list) else [case["exit"]]
    if p.returncode not in codes:
        problems.append(f"exit {p.returncode}, expected {' or '.join(map(str, codes))}")
    err = p.stderr.decode(errors="replace")
    lines = err.split("\n")
    if not (len(lines) == 2 and lines[1] == "" and lines[0].startswith("shardmill: error: ")):
        problems.append(f"stderr is not one 'shardmill: error: ' line: {err!r}")
    low = err.lower()
    for s in case.get("must", []):
        if s.lower() not in low:
            problems.append(f"message lacks {s!r}")
    for s in case.get("must_not", []):
        if s.lower() in low:
            problems.append(f"message contains {s!r}")
    for group in case.get("any", []):
        if not any(s.lower() in low for s in group):
            problems.append(f"message has none of {group!r}")
    if "{out}" in case["args"] and p.stdout:
        problems.append(f"stdout not empty: {p.stdout[:80]!r}")
    left = sorted(os.listdir(out_dir))
    if keep:
        with open(out, "rb") as f:
            if f.read() != OLD:
                problems.append("existing output file was modified")
        left.remove("region.bin")
    if left:
        problems.append(f"left files behind in the output directory: {left}")
    if case.get("control"):
        ctl = [sm] + [a.replace("{store}", store).replace("{out}", out + ".control")
                      for a in case["control"]]
        c = subprocess.run(ctl, capture_output=True, timeout=60)
        if c.returncode != 0:
            problems.append(f"control command failed with exit {c.returncode}: "
                            f"{c.stderr.decode(errors='replace').strip()!r} ({' '.join(ctl)})")
        if os.path.exists(out + ".control"):
            os.remove(out + ".control")
    if problems:
        problems.append(f"stderr was {err.strip()!r}")
    return [f"{pr} ({shown})" for pr in problems]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--case", action="append", help="only this case (repeatable)")
    a = ap.parse_args(argv)
    with open(os.path.join(a.dir, "cases.json")) as f:
        table = json.load(f)
    cases = [c for c in table if not a.case or c["name"] in a.case]
    if not cases:
        print(f"no such case: {a.case}")
        return 1
    passed = failed = 0
    for c in cases:
        problems = check_case(a.shardmill, a.dir, c)
        if problems:
            failed += 1
            for pr in problems:
                print(f"FAIL {c['name']}: {pr}")
        else:
            passed += 1
            print(f"ok   {c['name']}")
    print(f"bad_input: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
