#!/usr/bin/python3
"""`shardmill plan`'s estimate against measured runs of the W5 and W8 jobs on this machine
(issue 22; docs/SLURM.md "Sizing a large run" states the error this prints).

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/plan_vs_run.py --shardmill build/release/jobs/shardmill \\
        [--size 512] [--points w5,w8] [--out results.json]

W5: configs/scaling-convert.yaml (scale /4095 → float32, shards [64,256,256] of 64³, zstd 3,
fsync) on a CT-like size³ uint16 volume (scaling/make_volume.py), strong points 1×1, 1×2, 2×1,
2×2, 4×1, 4×2 (one plain process for one rank, else mpirun --oversubscribe --bind-to none
--mca pml ob1). W8: the same job with the auto layout and with W2's [8,32,32] shards of
[2,16,16], 1×2 and 2×1. Each point: plan --json (estimate), then one run; time = launch → exit.
Every output is kept until the end (ext4 without a journal slows creates after a many-file
deletion: docs/BENCHMARKS.md W8), then deleted.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from shardmill_test import REPO
from shardmill_test import machine
from shardmill_test import results
from shardmill_test import volumes as mv
from shardmill_test.ranks import session_env

W5 = [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2)]
W8 = [(1, 2), (2, 1)]


def point(a, work, vol, tag, ranks, threads, sets):
    out = os.path.join(work, f"{tag}.zarr")
    rep = os.path.join(work, f"{tag}.report.json")
    cfg = os.path.join(REPO, "configs", "scaling-convert.yaml")
    argv = ["--set", f"input.store={vol}", "--set", f"output.path={out}", "--set",
            f"parallel.threads={threads}", "--set", "output.exists=overwrite"] + \
        [x for s in sets for x in ("--set", s)]
    p = subprocess.run([a.shardmill, "plan", cfg, "--ranks", str(ranks), "--json"] + argv +
                       (["--rates", a.rates] if a.rates else []), capture_output=True, text=True,
                       check=True)
    est = json.loads(p.stdout)["estimate"]
    env = session_env(dict(os.environ, OMP_NUM_THREADS=str(threads), OMPI_ALLOW_RUN_AS_ROOT="1",
                           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))  # a session dir of its own
    launcher = [] if ranks == 1 else ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca",
                                      "pml", "ob1", "-np", str(ranks)]
    t0 = time.monotonic()
    subprocess.run(launcher + [a.shardmill, "run", cfg, "-q", "--report", rep] + argv, check=True,
                   env=env)
    wall = time.monotonic() - t0
    with open(rep) as f:
        r = json.load(f)
    row = {"tag": tag, "ranks": ranks, "threads": threads, "estimated_s": round(est["seconds"], 2),
           "measured_s": round(wall, 2), "error_pct": round((est["seconds"] - wall) / wall * 100),
           "peak_rss_est_MiB": round(est["peak_rss_bytes_per_rank"] / 2**20),
           "peak_rss_MiB": round(r["memory"]["peak_rss_bytes"] / 2**20),
           "output_est_MB": round(est["output_bytes"] / 1e6, 1),
           "output_MB": round(r["output"]["bytes"] / 1e6, 1), "files": est["files"],
           "shards": r["output"]["shards"]}
    print(json.dumps(row), flush=True)
    return row, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--points", default="w5,w8")
    ap.add_argument("--rates", default=None)
    ap.add_argument("--work", default=os.path.join(REPO, "data", "plan_vs_run"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.shardmill = os.path.abspath(a.shardmill)
    os.makedirs(a.work, exist_ok=True)
    vol = os.path.join(a.work, f"vol-{a.size}.zarr")
    mv.ensure_volume(vol, (a.size,) * 3, jobs=2)
    rows, outs = [], []
    todo = []
    if "w5" in a.points:
        todo += [(f"w5-{r}x{t}", r, t, []) for r, t in W5]
    if "w8" in a.points:
        todo += [(f"w8-auto-{r}x{t}", r, t, ["output.shard=auto", "output.chunk=auto"])
                 for r, t in W8]
        todo += [(f"w8-small-{r}x{t}", r, t, ["output.shard=[8,32,32]",
                                               "output.chunk=[2,16,16]"]) for r, t in W8]
    try:
        for tag, r, t, sets in todo:
            row, out = point(a, a.work, vol, tag, r, t, sets)
            rows.append(row)
            outs.append(out)
    finally:
        for o in outs:
            shutil.rmtree(o, ignore_errors=True)
    print("| point | ranks × threads | estimated s | measured s | error | peak RSS est / measured MiB"
          " | output est / measured MB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for x in rows:
        print(f"| {x['tag']} | {x['ranks']}×{x['threads']} | {x['estimated_s']:.2f} | "
              f"{x['measured_s']:.2f} | {x['error_pct']:+d}% | {x['peak_rss_est_MiB']} / "
              f"{x['peak_rss_MiB']} | {x['output_est_MB']} / {x['output_MB']} |")
    if rows:
        print(f"median |error| {statistics.median(abs(x['error_pct']) for x in rows)}%")
    if a.out:
        results.write_json(a.out, {"size": a.size, "rows": rows, "machine": machine.machine()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
