#!/usr/bin/python3
"""W2's conversion (configs/w2-convert.yaml: the 128³ ROI of data/mri-crop.zarr, 256 shards,
durable) with two or more binaries interleaved run by run, for before/after comparisons on a
machine whose file system drifts: bench/convert_ct/w2.py runs one binary per invocation, and
back-to-back invocations of the same binary moved by 40-100 % here (its 256 file creations and
syncfs after the runs before), more than any difference between binaries. Each round runs every
binary once, in an order that alternates (a, b, c, then c, b, a), from a fresh output, after a
sync(2); the medians and ranges of the process wall, the report's engine total and its write
stage are printed per binary.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/convert_ct/w2_pairs.py \\
        --bin before=/path/to/old/shardmill --bin after=build/release/jobs/shardmill \\
        [--bin after-noceiling=build/release/jobs/shardmill:limits.memory_ceiling=false] \\
        [--rounds 21] [--http] [--work DIR]

--http serves data/ by a real nginx on 127.0.0.1 (tests/lib/shardmill_test/nginx_server.py), as
W2 does; without it the input is the local file store. A binary given as PATH:KEY=VALUE gets
`--set KEY=VALUE`. Needs data/mri-crop.zarr (scripts/make-w1-input.sh).
"""
import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from shardmill_test import REPO
from shardmill_test.nginx_server import NginxServer


def parse_bin(text):
    name, _, rest = text.partition("=")
    path, _, setting = rest.partition(":")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"--bin {text}: want NAME=PATH[:KEY=VALUE]")
    return name, os.path.abspath(path), (["--set", setting] if setting else [])


def one(binary, extra, store, out, rep):
    shutil.rmtree(out, ignore_errors=True)
    os.sync()
    t0 = time.perf_counter()
    subprocess.run([binary, "run", os.path.join(REPO, "configs", "w2-convert.yaml"), "--set",
                    f"input.store={store}", "--set", f"output.path={out}", "--report", rep] + extra,
                   check=True, stdout=subprocess.DEVNULL)
    wall = (time.perf_counter() - t0) * 1e3
    with open(rep) as f:
        t = json.load(f)["timing_ms"]["max"]
    return wall, t["total"], t["write"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append", type=parse_bin, required=True,
                    help="NAME=PATH[:KEY=VALUE], at least two")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--http", action="store_true")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    if len(a.bin) < 2:
        ap.error("give at least two --bin")
    data = os.path.join(REPO, "data")
    if not os.path.isdir(os.path.join(data, "mri-crop.zarr")):
        sys.exit("w2_pairs: data/mri-crop.zarr is missing (scripts/make-w1-input.sh)")
    work = a.work or tempfile.mkdtemp(prefix="w2-pairs-")
    os.makedirs(work, exist_ok=True)
    res = {name: [] for name, _, _ in a.bin}
    with contextlib.ExitStack() as stack:
        store = os.path.join(data, "mri-crop.zarr")
        if a.http:
            store = stack.enter_context(NginxServer(data)).url + "/mri-crop.zarr"
        for r in range(a.rounds):
            for name, path, extra in (a.bin if r % 2 == 0 else list(reversed(a.bin))):
                res[name].append(one(path, extra, store, os.path.join(work, f"{name}.zarr"),
                                     os.path.join(work, f"{name}.report.json")))
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    print(f"W2 ({'http' if a.http else 'file'}), {a.rounds} rounds; median (min-max) ms")
    print("| binary | process wall | engine total | write stage |")
    print("|---|---:|---:|---:|")
    for name, rows in res.items():
        cols = []
        for i in range(3):
            v = [x[i] for x in rows]
            cols.append(f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})")
        print(f"| {name} | " + " | ".join(cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
