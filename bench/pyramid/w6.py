#!/usr/bin/python3
"""SPEC §8 W6 (issue 13): a CT-like uint16 volume (scaling/make_volume.py) converted to an OME-Zarr
float32 image with `output.ome.levels: auto` and the default layout, against the same convert
writing level 0 only (no output.ome), for 1 rank x 2 threads and 2 ranks x 1 thread. Runs
alternate (plain, ome, plain, ome, ...) and the medians are compared, so the machine's noise
hits both alike. Per run: time to marker (report timing total), the pyramid phase (report
output.pyramid_ms), peak RSS per rank (report memory.peak_rss_bytes, the max over ranks). Per
OME output: bytes and files per level. Target (issue 23): ome total <= 1.15 x plain total (the
extra levels hold 1/7 of the voxels; the aligned ones are made from level 0 in memory) and peak
RSS within limits.memory_bytes.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/pyramid/w6.py --shardmill build/release/jobs/shardmill [--size 1024]
        [--shape Z,Y,X] [--noise SIGMA] [--layouts 1x2,2x1] [--repeats 3] [--mpiexec mpirun]
        [--chunk Z,Y,X] [--quick] [--out bench/results]

--shape replaces the cube of --size (issue 23's second case: 256,512,512 with --noise 200, CT-like
noise that keeps zstd busy).

--floor: after the runs, bench_floor (bench/bench_floor.c) on the last outputs gives the pyramid's
floor: level 0's (the input's chunks decoded and level 0's encoded, over the run's 2 cores, plus
one fsynced write) and each level's extra (its chunks encoded over 2 cores plus their write).
floor ratio = (level 0 + levels) / level 0: what ome/plain would be if both ran at their codecs'
speed; the levels' means compress slower per byte than level 0, so it is above the voxel share.
Each part is bench_floor's minimum of --floor-reps runs (3): a single fsynced write varies.

--quick: a 128^3 volume, one repeat, 1x2 only, no result file unless --out is given (a smoke
test).
Data under build/bench-data/w6 (never in git). Results: bench/results/w6-<UTC>.json.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from shardmill_test import launcher
from shardmill_test import ome_ngff_check
from shardmill_test.ranks import mpi_env, plain_env

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def run(cmd, env=None, cwd=None):
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"w6: `{' '.join(cmd)}` failed ({r.returncode}): {r.stderr[-2000:]}")
    return time.monotonic() - t0


def level_stats(out):
    levels = []
    k = 0
    while os.path.isdir(os.path.join(out, str(k))):
        nbytes = nfiles = 0
        for d, _s, files in os.walk(os.path.join(out, str(k))):
            for f in files:
                nfiles += 1
                nbytes += os.path.getsize(os.path.join(d, f))
        meta = json.load(open(os.path.join(out, str(k), "zarr.json")))
        levels.append({"level": k, "shape": meta["shape"], "bytes": nbytes, "files": nfiles,
                       "shard": meta["chunk_grid"]["configuration"]["chunk_shape"]})
        k += 1
    return levels


def bench_floor(bin_, inp, out, cores, reps):
    r = subprocess.run([bin_, inp, out, "--threads", str(cores), "--reps", str(reps)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"w6: bench_floor {inp} {out} failed: {r.stderr[-600:]}")
    return json.loads(r.stdout)


def pyramid_floor(bin_, vol, plain, ome, cores, reps):
    """Level 0's floor (the plain output from the input) and each level's extra: its encode over
    the cores plus its fsynced write (bench_floor's decode of the level is not part of it)."""
    level0 = bench_floor(bin_, vol, plain, cores, reps)
    levels = []
    k = 1
    while os.path.isdir(os.path.join(ome, str(k))):
        lv = os.path.join(ome, str(k))
        f = bench_floor(bin_, lv, lv, cores, reps)
        levels.append({"level": k, "encode_s": f["encode_s"], "write_s": f["write_s"],
                       "bytes": f["output_bytes"], "extra_s": f["encode_s"] / cores + f["write_s"]})
        k += 1
    extra = sum(x["extra_s"] for x in levels)
    return {"level0": level0, "levels": levels, "level0_s": level0["floor_s"], "levels_s": extra,
            "floor_ratio": (level0["floor_s"] + extra) / level0["floor_s"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--shape", default=None, help="Z,Y,X instead of a cube of --size")
    ap.add_argument("--noise", type=float, default=20.0, help="make_volume.py's noise sigma")
    ap.add_argument("--layouts", default="1x2,2x1", help="ranks x threads, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mpiexec", default=shutil.which("mpirun") or "")
    launcher.add_mpirun_args(ap)
    ap.add_argument("--memory", default="2GiB")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--floor", action="store_true",
                    help="measure the pyramid's codec floor on the last outputs (bench_floor)")
    ap.add_argument("--floor-reps", type=int, default=3,
                    help="bench_floor --reps: each part's minimum of N (its write's fsync varies)")
    ap.add_argument("--floor-bin", default=None,
                    help="bench_floor (default: bench/bench_floor beside --shardmill's jobs/)")
    ap.add_argument("--chunk", default=None,
                    help="Z,Y,X: output.chunk for both runs (a before/after pair on one inner "
                    "chunk: binaries before issue 35 used the input's chunk, 64,64,64 here)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--work", default=os.path.join(REPO, "build", "bench-data", "w6"))
    ap.add_argument("--no-ngff-check", action="store_true",
                    help="skip the OME-NGFF 0.5 checker (for binaries before 37d4aa9, whose "
                    "metadata.method is free text: a before/after comparison)")
    args = ap.parse_args()
    extra = launcher.mpirun_args(args.mpirun_args)
    if args.quick:
        args.size, args.repeats = 128, 1
    shardmill = os.path.abspath(args.shardmill)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    shape = args.shape or f"{args.size},{args.size},{args.size}"
    tag = shape.replace(",", "x") + ("" if args.noise == 20.0 else f"-n{args.noise:g}")
    vol = os.path.join(work, f"vol-{tag}.zarr")
    if not os.path.exists(vol + ".manifest.json"):
        run(["/usr/bin/python3", os.path.join(REPO, "scaling", "make_volume.py"), vol, "--shape",
             shape, "--noise", str(args.noise), "--jobs", "2"])
    layouts = []
    for name in args.layouts.split(","):
        ranks, threads = (int(x) for x in name.split("x"))
        if ranks == 1 or (args.mpiexec and not args.quick):
            layouts.append((name, ranks, threads))
    results = {}
    for li, (name, ranks, threads) in enumerate(layouts):
        runs = {"plain": [], "ome": []}
        levels = None
        for rep in range(args.repeats):
            for kind in ("plain", "ome"):
                out = os.path.join(work, f"out-{kind}.zarr")
                shutil.rmtree(out, ignore_errors=True)
                cfg = os.path.join(work, f"{kind}.yaml")
                ome = "  ome: {levels: auto, method: mean}\n" if kind == "ome" else ""
                if args.chunk:
                    ome += f"  chunk: [{args.chunk}]\n"
                with open(cfg, "w") as f:
                    f.write(f"job: convert\ninput: {{store: {vol}}}\n"
                            "normalize: {mode: scale, divisor: 4095}\n"
                            f"output:\n  path: {out}\n  exists: overwrite\n{ome}"
                            f"parallel: {{threads: {threads}}}\n"
                            f"limits: {{memory_bytes: {args.memory}}}\nprogress: false\n")
                rep_path = os.path.join(work, f"{kind}-report.json")
                cmd = [shardmill, "run", cfg, "--report", rep_path]
                env = plain_env()
                if ranks > 1:
                    cmd = [args.mpiexec, "--oversubscribe"] + extra + ["-np", str(ranks)] + cmd
                    env = mpi_env()
                wall = run(cmd, env=env)
                r = json.load(open(rep_path))
                runs[kind].append({
                    "wall_s": wall,
                    "total_ms": r["timing_ms"]["total"] if "timing_ms" in r else None,
                    "pyramid_ms": r["output"].get("pyramid_ms"),
                    "peak_rss_bytes": r.get("memory", {}).get("peak_rss_bytes"),
                    "shards": r["output"]["shards"], "bytes": r["output"]["bytes"]})
                if kind == "ome":
                    levels = level_stats(out)
                    bad = [] if args.no_ngff_check else ome_ngff_check.check_image(out)
                    if bad:
                        sys.exit(f"w6: the image breaks OME-NGFF 0.5 rules: {bad[:4]}")
                if not (args.floor and li == len(layouts) - 1 and rep == args.repeats - 1):
                    shutil.rmtree(out, ignore_errors=True)
                print(f"w6 {name} {kind} run {rep + 1}: {runs[kind][-1]}", flush=True)

        def med(kind, key):
            v = [x[key] for x in runs[kind] if isinstance(x.get(key), (int, float))]
            return statistics.median(v) if v else None
        plain_t, ome_t = med("plain", "total_ms"), med("ome", "total_ms")
        results[name] = {
            "ranks": ranks, "threads": threads, "runs": runs, "levels": levels,
            "median_total_ms": {"plain": plain_t, "ome": ome_t},
            "median_pyramid_ms": med("ome", "pyramid_ms"),
            "pyramid_share": (med("ome", "pyramid_ms") / ome_t) if ome_t else None,
            "ratio_ome_over_plain": (ome_t / plain_t) if plain_t else None,
            "target_ratio": 1.15,
            "peak_rss_bytes_max": max(x["peak_rss_bytes"] or 0 for x in runs["ome"]),
        }
        print(f"w6 {name}: ome/plain = {results[name]['ratio_ome_over_plain']:.3f} "
              f"(pyramid share {results[name]['pyramid_share']:.3f}), peak RSS "
              f"{results[name]['peak_rss_bytes_max'] / 2**20:.0f} MiB", flush=True)
    floor = None
    if args.floor:
        bin_ = args.floor_bin or os.path.join(os.path.dirname(os.path.dirname(shardmill)), "bench",
                                              "bench_floor")
        _name, ranks, threads = layouts[-1]  # the outputs kept are the last layout's
        floor = pyramid_floor(bin_, vol, os.path.join(work, "out-plain.zarr"),
                              os.path.join(work, "out-ome.zarr"), ranks * threads, args.floor_reps)
        for name in results:
            r = results[name]
            r["floor"] = floor
            r["ratio_over_floor_ratio"] = r["ratio_ome_over_plain"] / floor["floor_ratio"]
            print(f"w6 {name}: ome/plain {r['ratio_ome_over_plain']:.3f}, floor ratio "
                  f"{floor['floor_ratio']:.3f} (level 0 {floor['level0_s']:.2f} s, levels + "
                  f"{floor['levels_s']:.2f} s); measured extra "
                  f"{(r['median_total_ms']['ome'] - r['median_total_ms']['plain']) / 1000:.2f} s",
                  flush=True)
        for kind in ("plain", "ome"):
            shutil.rmtree(os.path.join(work, f"out-{kind}.zarr"), ignore_errors=True)
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    # the binary's own stamp: it may be built from another tree than this driver's (a before run)
    binary = subprocess.run([shardmill, "--version"], capture_output=True,
                            text=True).stdout.strip()
    doc = {"workload": "W6", "size": args.size, "shape": shape, "noise": args.noise,
           "repeats": args.repeats,
           "memory_bytes": args.memory, "commit": commit, "binary": binary,
           "ngff_checked": not args.no_ngff_check,
           "utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"),
           "command": " ".join(sys.argv), "mpirun_args": ["--oversubscribe"] + extra,
           "floor": floor, "results": results}
    out_dir = args.out if args.out else (None if args.quick else
                                         os.path.join(REPO, "bench", "results"))
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, f"w6-{doc['utc']}.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"w6: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
