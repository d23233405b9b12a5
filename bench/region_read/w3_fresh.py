#!/usr/bin/python3
"""A fresh `shardmill read` process against a warm one (issue 23 #1), on one W3 array.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/region_read/w3_fresh.py [--shardmill BIN] [--array DIR] [--rounds 15]
                                          [--extent 2048] [--out DIR]

Per round, alternated: a fresh process with OMP_NUM_THREADS=1, one with 2 (each one read of the
EXTENT² region at [7, 11] written to a file on tmpfs, timed with posix_spawn + wait4, `--stats`
for its page faults), and a `--repeat 11` process per thread count: its first read_ns is the
first read of a fresh process, the last ten the steady in-process reads. Medians over the rounds:
  - process wall, 2 threads vs 1 (the issue's target: >= 1.5x);
  - the first read of a fresh process against the steady read of the same thread count
    (target <= 1.3x);
  - minor page faults per fresh process.
Every output file is compared with the first one (the bytes do not depend on the threads).
The array defaults to W3's v2 gzip 4096² array (bench/region_read/w3.py writes it under
BUILD/bench-data/w3). A benchmark, never a timed test: only a failed process exits 1.
"""

import argparse
import datetime
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def one(a, threads, out, stats, repeat=1):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    argv = [a.shardmill, "read", a.array, "--offset", "7,11", "--shape",
            f"{a.extent},{a.extent}", "-o", out, "--stats", stats]
    if repeat > 1:
        argv += ["--repeat", str(repeat)]
    # posix_spawn + wait4: no pipes or helper threads of subprocess inside the timed interval
    t0 = time.perf_counter()
    pid = os.posix_spawn(a.shardmill, argv, env)
    _, status, _ = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"w3_fresh: {' '.join(argv)}: exit {os.waitstatus_to_exitcode(status)}")
    with open(stats) as f:
        st = json.load(f)
    return wall, st


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                       "shardmill"))
    p.add_argument("--array", default=os.path.join(REPO, "build", "release", "bench-data", "w3",
                                                   "n4096", "v2_gzip"))
    p.add_argument("--extent", type=int, default=2048)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="w3-fresh-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                            else None)
    first = os.path.join(work, "first.bin")
    rows = {1: {"wall": [], "first_ns": [], "faults": [], "steady_ns": []},
            2: {"wall": [], "first_ns": [], "faults": [], "steady_ns": []}}
    one(a, 2, first, os.path.join(work, "s.json"))  # warm-up: page cache, the reference bytes
    for r in range(a.rounds):
        for t in ((1, 2) if r % 2 == 0 else (2, 1)):
            out = os.path.join(work, f"r{t}.bin")
            wall, st = one(a, t, out, os.path.join(work, "s.json"))
            if not filecmp.cmp(out, first, shallow=False):
                sys.exit(f"w3_fresh: the {t}-thread output differs from the first")
            rows[t]["wall"].append(wall)
            rows[t]["faults"].append(st.get("page_faults", {}).get("minor"))
            # a single read writes its bands while it decodes: the first read of a process is
            # timed without them, in a --repeat process (which writes after its reads)
            _, st = one(a, t, out, os.path.join(work, "s.json"), repeat=11)
            rows[t]["first_ns"].append(st["read_ns"][0])
            rows[t]["steady_ns"].extend(st["read_ns"][1:])
    med = {t: {k: statistics.median(v) for k, v in rows[t].items() if v and v[0] is not None}
           for t in rows}
    res = {
        "wall_ms": {t: round(med[t]["wall"] * 1e3, 2) for t in rows},
        "first_read_ms": {t: round(med[t]["first_ns"] / 1e6, 2) for t in rows},
        "steady_read_ms": {t: round(med[t]["steady_ns"] / 1e6, 2) for t in rows},
        "minor_faults": {t: med[t].get("faults") for t in rows},
    }
    res["wall_2_vs_1"] = round(med[1]["wall"] / med[2]["wall"], 3)
    res["first_vs_steady"] = {t: round(med[t]["first_ns"] / med[t]["steady_ns"], 3) for t in rows}
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    version = subprocess.run([a.shardmill, "--version"], capture_output=True,
                             text=True).stdout.strip()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"w3-fresh-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"workload": "w3-fresh", "created_utc": stamp, "commit": commit,
                   "shardmill": version, "array": a.array, "extent": a.extent,
                   "rounds": a.rounds, "raw": rows, "result": res}, f, indent=1)
    for f in os.listdir(work):
        os.unlink(os.path.join(work, f))
    os.rmdir(work)
    print(f"{version}: {a.extent}² read, medians of {a.rounds} alternated rounds")
    for t in (1, 2):
        print(f"  {t} thread(s): process wall {res['wall_ms'][t]} ms, first read "
              f"{res['first_read_ms'][t]} ms, steady read {res['steady_read_ms'][t]} ms "
              f"(first/steady {res['first_vs_steady'][t]}x), {res['minor_faults'][t]} minor faults")
    print(f"  fresh process, 2 threads vs 1: {res['wall_2_vs_1']}x")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
