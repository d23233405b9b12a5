#!/usr/bin/python3
"""A convert against its floor (issue 23 #4): how far `shardmill run` of a convert is from what
its codecs and the disk alone cost on this machine.

    PYTHONPATH=scaling PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/floor/floor.py [--cases w2,vol] [--size 1024]
        [--repeats 3] [--wait-idle 30] [--build-dir build/release]
    PYTHONPATH=scaling PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/floor/floor.py --quick --out DIR   (CI smoke)

Cases (each a fresh `shardmill run` process per repeat, the output rewritten each time):
  w2   W2's job (configs/w2-convert.yaml: the aligned 128³ ROI of data/mri-crop.zarr, uint8 →
       float32 scale/255, shards [8,32,32] of [2,16,16], zstd 3, durable) read from the file
       store instead of nginx
  vol  W8's "auto" case (configs/scaling-convert.yaml with output.shard/chunk auto: uint16 →
       float32 scale/4095, zstd 3, durable) on scaling/make_volume.py's SIZE³ CT-like volume
       (1024³ = 2 GiB, written once under --data-dir, never in git)
The floor is bench_floor's (bench/bench_floor.c): the input's objects decoded and the output's
objects encoded on one thread each, divided by the threads, plus one fsynced write of the
output's bytes. ratio = median process wall / floor (>= 1; 1 would be a convert that does
nothing but its codecs and one write). The report's stage times are kept per run. Results:
OUT/floor-<UTC>.json (bench/results by default) with the commit and the machine's load.
It is a benchmark, never a timed test: only a failed process exits 1.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from shardmill_test import machine
from shardmill_test import results as result_files

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"floor: {' '.join(argv)} failed ({p.returncode}): {p.stderr.strip()[-600:]}")
    return p


def ensure_volume(data_dir, size):
    """W5/W8's generator, which writes the volume unless an identical one is there."""
    path = os.path.join(data_dir, f"vol-{size}-{size}-{size}.zarr")
    run([sys.executable, os.path.join(REPO, "scaling", "make_volume.py"), path, "--shape",
         f"{size},{size},{size}", "--jobs", "2"])
    return path


def one_case(a, name, config, sets, input_dir, work):
    out = os.path.join(work, f"{name}.zarr")
    report = os.path.join(work, f"{name}-report.json")
    argv = [a.shardmill, "run", config, "--set", f"output.path={out}", "--set",
            "output.exists=overwrite", "--set", f"report={report}"]
    for s in sets:
        argv += ["--set", s]
    runs = []
    for r in range(a.repeats):
        busy = machine.wait_idle(a.wait_idle)[-1]
        os.sync()
        t0 = time.monotonic()
        run(argv)
        wall = time.monotonic() - t0
        with open(report) as f:
            rep = json.load(f)
        runs.append({"wall_s": round(wall, 4), "timing_ms": rep.get("timing_ms", {}).get("max"),
                     "threads": rep.get("threads"), "busy_cores_before": busy})
        print(f"floor: {name} #{r}: {wall:.3f} s", file=sys.stderr)
    threads = runs[-1]["threads"] or 1
    machine.wait_idle(a.wait_idle)
    fl = json.loads(run([a.floor, input_dir, out, "--threads", str(threads),
                         "--reps", str(a.floor_reps)]).stdout)
    med = statistics.median(r["wall_s"] for r in runs)
    shutil.rmtree(out, ignore_errors=True)
    return {"case": name, "config": config, "sets": sets, "input": input_dir, "runs": runs,
            "median_wall_s": med, "floor": fl, "ratio": round(med / fl["floor_s"], 3)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"))
    p.add_argument("--shardmill")
    p.add_argument("--floor", help="bench_floor binary (default BUILD_DIR/bench/bench_floor)")
    p.add_argument("--cases", default="w2,vol")
    p.add_argument("--size", type=int, default=1024, help="edge of the vol case's volume")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--floor-reps", type=int, default=3)
    p.add_argument("--wait-idle", type=float, default=0.0,
                   help="seconds to wait at most for other work below 0.5 cores before each run")
    p.add_argument("--data-dir", default=os.path.join(REPO, "build", "bench-data", "floor"))
    p.add_argument("--work", default=None, help="outputs go here (default: a new temp dir)")
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    p.add_argument("--quick", action="store_true", help="vol at 96³, one repeat (CI smoke)")
    a = p.parse_args(argv)
    a.shardmill = a.shardmill or os.path.join(a.build_dir, "jobs", "shardmill")
    a.floor = a.floor or os.path.join(a.build_dir, "bench", "bench_floor")
    if a.quick:
        a.cases, a.size, a.repeats, a.floor_reps = "vol", 96, 1, 1
    work = a.work or os.path.join(a.data_dir, "work")
    os.makedirs(work, exist_ok=True)
    results = []
    for name in a.cases.split(","):
        if name == "w2":
            src = os.path.join(REPO, "data", "mri-crop.zarr")
            if not os.path.isdir(src):
                sys.exit("floor: data/mri-crop.zarr is missing (scripts/make-w1-input.sh)")
            results.append(one_case(a, "w2", os.path.join(REPO, "configs", "w2-convert.yaml"),
                                    [f"input.store={src}"], src, work))
        elif name == "vol":
            src = ensure_volume(a.data_dir, a.size)
            results.append(one_case(a, f"vol{a.size}", os.path.join(REPO, "configs",
                                                                    "scaling-convert.yaml"),
                                    [f"input.store={src}", "output.shard=auto",
                                     "output.chunk=auto"], src, work))
        else:
            sys.exit(f"floor: unknown case {name!r} (w2, vol)")
    commit = machine.git_commit()
    stamp = result_files.utc_stamp()
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"floor-{stamp}.json")
    with open(path, "w") as f:
        json.dump({"workload": "convert-floor", "created_utc": stamp, "commit": commit,
                   "command": sys.argv, "shardmill": run([a.shardmill, "--version"]).stdout.strip(),
                   "results": results}, f, indent=1)
    print("| case | convert s (median) | decode s | encode s | write s | threads | floor s | "
          "convert / floor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        fl = r["floor"]
        print(f"| {r['case']} | {r['median_wall_s']:.3f} | {fl['decode_s']:.3f} | "
              f"{fl['encode_s']:.3f} | {fl['write_s']:.3f} | {fl['threads']} | "
              f"{fl['floor_s']:.3f} | {r['ratio']:.2f}× |")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
