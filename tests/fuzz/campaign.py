#!/usr/bin/env python3
"""campaign.py: long libFuzzer runs of the tests/fuzz targets, a few at a time, with their final
statistics collected in one JSON file (docs/internals/fuzzing.md, "Results").

Usage: PYTHONPATH=$PWD/tests/lib /usr/bin/python3 tests/fuzz/campaign.py --build build/fuzz --seconds 720 [--jobs 2]
           [--nice 19] [--out bench/results/fuzz-campaign-<time>.json] [TARGET...]
Each target fuzzes a work copy of its committed corpus (build/fuzz/tests/fuzz/campaign/<name>)
with its dictionary, the ctest limits (-rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=25) and
crashes kept under build/fuzz/tests/fuzz/campaign/artifacts/. New coverage is not merged back
into tests/fuzz/corpus/ by this script: do that by hand with -merge=1 (small files only).
Exit 1 when any target reported a crash, leak, timeout or out-of-memory."""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STAT = re.compile(r"^stat::(\w+):\s+(\d+)")
PULSE = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)")


def start(args, name, root):
    exe = os.path.join(args.build, "tests", "fuzz", f"fuzz_{name}")
    work = os.path.join(root, name)
    if not os.path.isdir(work):
        shutil.copytree(os.path.join(HERE, "corpus", name), work)
    arts = os.path.join(root, "artifacts")
    os.makedirs(arts, exist_ok=True)
    cmd = ["nice", "-n", str(args.nice), exe, f"-max_total_time={args.seconds}",
           "-rss_limit_mb=2048", "-malloc_limit_mb=512", "-timeout=25", "-print_final_stats=1",
           f"-artifact_prefix={arts}/{name}-", work]
    d = os.path.join(HERE, f"{name}.dict")
    if os.path.exists(d):
        cmd.insert(-1, f"-dict={d}")
    log = open(os.path.join(root, f"{name}.log"), "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log, time.monotonic()


def summary(root, name, rc, secs):
    text = open(os.path.join(root, f"{name}.log"), errors="replace").read()
    stats = {m.group(1): int(m.group(2)) for m in map(STAT.match, text.splitlines()) if m}
    cov = ft = 0
    for m in PULSE.finditer(text):
        cov, ft = int(m.group(2)), int(m.group(3))
    bad = [k for k in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer",
                       "out-of-memory", "ALARM: working on the last Unit") if k in text]
    return {"target": name, "seconds": round(secs, 1), "exit": rc,
            "execs": stats.get("number_of_executed_units"),
            "execs_per_s": stats.get("average_exec_per_sec"), "cov": cov, "ft": ft,
            "corpus_files": len(os.listdir(os.path.join(root, name))),
            "peak_rss_mb": stats.get("peak_rss_mb"), "findings": bad}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/fuzz")
    ap.add_argument("--seconds", type=int, default=1200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nice", type=int, default=19)
    ap.add_argument("--out")
    ap.add_argument("targets", nargs="*")
    args = ap.parse_args()
    names = args.targets or sorted(n for n in os.listdir(os.path.join(HERE, "corpus")))
    root = os.path.join(args.build, "tests", "fuzz", "campaign")
    os.makedirs(root, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or os.path.join(HERE, "..", "..", "bench", "results",
                                   f"fuzz-campaign-{stamp}-{os.getpid()}.json")
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    results, running, queue = [], [], list(names)
    while queue or running:
        while queue and len(running) < args.jobs:
            name = queue.pop(0)
            running.append((name, *start(args, name, root)))
        time.sleep(2)
        for item in list(running):
            name, proc, log, t0 = item
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                results.append(summary(root, name, proc.returncode, time.monotonic() - t0))
                print(json.dumps(results[-1]), flush=True)
                with open(out, "w") as f:  # after every target: a stopped campaign keeps its part
                    json.dump({"commit": commit, "seconds_each": args.seconds, "jobs": args.jobs,
                               "nice": args.nice, "started": stamp, "results": results}, f,
                              indent=1)
    return 1 if any(r["findings"] or r["exit"] not in (0,) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
