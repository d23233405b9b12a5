#!/usr/bin/python3
"""`shardmill plan --json`'s estimate against the real run (issue 22 item 4; SPEC §4). Label `mpi`.

Three configurations, each planned and then run as planned:
  percentile  a CT-like uint16 Zarr v3 (scaling/make_volume.py) -> uint8, percentile window, the
              auto layout; one plain process, 2 threads (two passes, the input kept)
  ome         the same input -> float32 OME-Zarr of 3 levels, scale; mpirun -np 2, 1 thread each
  raw         a raw int16 file (engine source) -> int16, normalize none, zstd, shards
              [32, 64, 64] of inner chunks [16, 32, 32]; one plain process, 1 thread (one pass)
For each: the estimate's files equal the files of the finished output directory; its output bytes
are within 0.5-2x of the directory's bytes; its peak RSS per rank is >= the report's
memory.peak_rss_bytes (the maximum over ranks) and <= 4x it; the sample read at most 4 output
chunks. Estimated and measured seconds (launch to exit) are printed, never checked (machines are
noisy). Exit 0 when every check holds, 1 otherwise.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

import numpy as np  # noqa: E402

from shardmill_test import volumes as mv
from shardmill_test.checks import check, summary
from shardmill_test.ranks import mpi_env, plain_env


def tree(path):
    files, size = 0, 0
    for root, _, names in os.walk(path):
        for n in names:
            files += 1
            size += os.path.getsize(os.path.join(root, n))
    return files, size


CASES = {
    "percentile": dict(ranks=1, threads=2, input="zarr", body=(
        "normalize: {mode: percentile, lo: 0.5, hi: 99.5}\n"
        "output: {path: OUT, dtype: uint8}\n")),
    "ome": dict(ranks=2, threads=1, input="zarr", body=(
        "normalize: {mode: scale, divisor: 4095}\n"
        "output: {path: OUT, ome: {levels: 3, method: mean, downsample: all}}\n")),
    "raw": dict(ranks=1, threads=1, input="raw", body=(
        "normalize: {mode: none}\n"
        "output: {path: OUT, shard: [32, 64, 64], chunk: [16, 32, 32],"
        " codec: {name: zstd, level: 3}}\n")),
}


def inputs(work):
    zarr = os.path.join(work, "ct.zarr")
    mv.ensure_volume(zarr, (96, 160, 192))
    raw = os.path.join(work, "ct.raw")
    if not os.path.exists(raw):
        rng = np.random.default_rng(22)
        z, y, x = np.mgrid[0:80, 0:128, 0:160]
        body = ((z - 40) / 36.0) ** 2 + ((y - 64) / 56.0) ** 2 + ((x - 80) / 70.0) ** 2 < 1
        v = np.where(body, 1000, -1000) + rng.normal(0, 20, body.shape)
        v.astype("<i2").tofile(raw + ".tmp")
        os.replace(raw + ".tmp", raw)
    return {"zarr": f"input: {{store: {zarr}}}\n",
            "raw": f"input: {{store: {raw}, format: raw, raw: {{dtype: int16, "
                   f"shape: [80, 128, 160]}}}}\n"}


def run_case(name, spec, work, ins, a):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    out = os.path.join(d, "out.zarr")
    rep = os.path.join(d, "report.json")
    cfg = os.path.join(d, "job.yaml")
    with open(cfg, "w") as f:
        f.write("job: convert\n" + ins[spec["input"]] + spec["body"].replace("OUT", out) +
                f"parallel: {{threads: {spec['threads']}}}\nprogress: false\nreport: {rep}\n")
    ranks, threads = spec["ranks"], spec["threads"]
    p = subprocess.run([a.shardmill, "plan", cfg, "--ranks", str(ranks), "--threads",
                        str(threads), "--json"], capture_output=True, text=True, env=plain_env())
    check(p.returncode == 0, f"{name}: plan exits 0 ({p.stderr.strip()[-300:]})")
    if p.returncode != 0:
        return None
    est = json.loads(p.stdout)["estimate"]
    txt = subprocess.run([a.shardmill, "plan", cfg, "--ranks", str(ranks)], capture_output=True,
                         text=True, env=plain_env())
    check(txt.returncode == 0 and "estimate" in txt.stdout and "peak RSS per rank" in txt.stdout,
          f"{name}: the text plan prints the estimate")
    argv = [a.shardmill, "run", cfg, "-q"]
    env = plain_env()
    if ranks > 1:
        argv = [a.mpiexec, "--oversubscribe", "-np", str(ranks)] + argv
        env = mpi_env()
        env["OMP_NUM_THREADS"] = str(threads)
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    wall = time.monotonic() - t0
    check(r.returncode == 0, f"{name}: the run exits 0 ({r.stderr.strip()[-300:]})")
    if r.returncode != 0:
        return None
    with open(rep) as f:
        report = json.load(f)
    files, size = tree(out)
    peak = report["memory"]["peak_rss_bytes"]
    check(est["files"] == files, f"{name}: files {est['files']} estimated == {files} written")
    ratio = est["output_bytes"] / size
    check(0.5 <= ratio <= 2.0, f"{name}: output bytes {est['output_bytes']} estimated, {size} "
          f"written: {ratio:.2f}x in [0.5, 2]")
    rss = est["peak_rss_bytes_per_rank"]
    check(peak <= rss <= 4 * peak, f"{name}: peak RSS per rank {rss} estimated, {peak} measured "
          f"(max over ranks): {rss / peak:.2f}x in [1, 4]")
    s = est["sample"]
    check(s["output_chunks"] <= 4 and (s["output_chunks"] > 0) == (s["ratio_from"] == "sample"),
          f"{name}: the sample encoded {s['output_chunks']} output chunks (<= 4), read "
          f"{s['input_chunks_read']} input chunks, ratio {s['ratio']:.3f}")
    print(f"     {name}: seconds estimated {est['seconds']:.2f}, measured {wall:.2f} (launch to "
          f"exit; report total {report['timing_ms']['total'] / 1e3:.2f}); terms "
          + ", ".join(f"{k} {v:.3f}" for k, v in est["terms_s"].items()), flush=True)
    return {"case": name, "estimated_s": est["seconds"], "measured_s": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", default="mpirun")
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", choices=sorted(CASES) + ["all"], default="all")
    a = ap.parse_args()
    a.shardmill = os.path.abspath(a.shardmill)
    os.makedirs(a.work, exist_ok=True)
    ins = inputs(a.work)
    for name in sorted(CASES) if a.case == "all" else [a.case]:
        run_case(name, CASES[name], a.work, ins, a)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
