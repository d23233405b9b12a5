#!/usr/bin/python3
"""W7 ingest benchmark (SPEC §8 W7, issue 14): TIFF stacks and HDF5 datasets -> Zarr v3.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/ingest/w7.py [--quick] [--repeats N] [--shardmill BIN] [--work DIR]
                                    [--out DIR] [--slices 1024] [--size 1024] [--skip-synthetic]

Cases (each a fresh process per run, alternating between the contenders of a case):
  ct_tiff     the head CT (data/ct/matrix.dat, SPEC §9) written by python3-tifffile as one file
              per slice -> shardmill ingest (default layout) vs the Python pipeline
              (bench/ingest/peer_ingest_zarr2.py: tifffile + zarr-python 2.13 writing Zarr v2 with
              chunks = shardmill's shard shape, zstd 3, every file fsynced)
  ct_hdf5     the CT written by h5py as a chunked gzip dataset -> the same (shardmill: when this
              build reads input.format hdf5; else recorded as unsupported)
  synthetic   a SLICES-slice uint16 TIFF stack of SIZE x SIZE slices (1024 x 1024 x 1024: 2 GiB;
              scaling/make_volume.py's CT-like phantom, one tifffile file per slice, written once
              into --work and kept) -> shardmill ingest plain 1x1, 1x2 (threads) and under
              mpirun 2x1 (when MPI is built in)
Every shardmill run's report checksums (SPEC §5) are checked against NumPy's over the source,
and the output is removed after the run. Per run: process wall, time from launch to the
completion marker, MB/s of source values, peak RSS of every rank (wait4, bench/region_read/w3_spawn.c),
busy cores in the 0.3 s before the launch and cores used by other processes during the run
(/proc/stat, as tests/lib/shardmill_test/machine.py), the rank count the report gives (checked), and
limits.memory_bytes of the effective configuration (`shardmill validate`: the report has none).
Targets (issue 14): ct_* shardmill >= 5x the Python pipeline (process wall, medians);
synthetic 2x1 >= 1.7x 1x1 (time to marker); every rank's peak RSS <= limits.memory_bytes.
--quick: a 16-slice 96 x 80 synthetic stack and a CT-like 24 x 64 x 64 volume instead of the real
CT, one repeat: the smoke profile ctest runs (bench.w7.quick, label bench-quick).
Results: OUT/w7-<stamp>.json (bench/results by default) with the machine, toolchain and commit.
"""

import argparse
import json
import os
import re
import shutil
import resource
import subprocess
import sys
import time

import numpy as np

from shardmill_test import report_json
from shardmill_test import launcher as sm_launch
from shardmill_test import machine
from shardmill_test import results
from shardmill_test import volumes

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

U64 = np.uint64
PY = "/usr/bin/python3"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the oracle: SPEC §5 checksums of the source values, slab by slab ----

class Sums:
    def __init__(self, shape):
        self.shape = shape
        self.s = 0
        self.w = 0

    def add(self, vals, z0):
        Y, X = self.shape[1], self.shape[2]
        v = vals.astype(np.int64).view(U64) if vals.dtype.kind != "f" else \
            vals.view(np.uint32).astype(U64)
        idx = (np.arange(z0, z0 + vals.shape[0], dtype=U64) * U64(Y * X))[:, None, None] + \
            (np.arange(Y, dtype=U64) * U64(X))[None, :, None] + np.arange(X, dtype=U64)[None, None]
        with np.errstate(over="ignore"):
            self.s = (self.s + int(np.sum(v, dtype=U64))) % (1 << 64)
            self.w = (self.w + int(np.sum(v * (idx + U64(1)), dtype=U64))) % (1 << 64)

    def result(self):
        s = self.s - (1 << 64) if self.s >= (1 << 63) else self.s
        return {"checksum": s, "weighted_checksum": self.w}


# ---- sources ----

def write_stack(dirpath, slices):
    """slices: an iterable of 2-D arrays -> s1.tif ... sN.tif (tifffile)."""
    import tifffile
    tmp = dirpath + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for z, plane in enumerate(slices):
        tifffile.imwrite(os.path.join(tmp, f"s{z + 1}.tif"), plane)
    os.replace(tmp, dirpath)


def ct_sources(work, quick):
    """The CT (or, quick, a CT-like phantom) as a TIFF stack and an HDF5 dataset."""
    import h5py
    if quick:
        shape = (24, 64, 64)
        vol = volumes.phantom(shape, (0, 0, 0), shape, 7, 20.0, 0).astype(np.int16) - 1024
        name = "ctlike"
    else:
        path = os.path.join(REPO, "data", "ct", "matrix.dat")
        if not os.path.isfile(path):
            raise SystemExit(f"w7: {path} is missing: run scripts/fetch-data.sh")
        vol = np.fromfile(path, dtype="<i2").reshape(108, 256, 256).astype(np.int16)
        name = "ct"
    stack = os.path.join(work, f"{name}-slices")
    if not os.path.isdir(stack):
        write_stack(stack, vol)
    h5 = os.path.join(work, f"{name}.h5")
    if not os.path.isfile(h5):
        with h5py.File(h5 + ".tmp", "w") as f:
            f.create_dataset("/exchange/data", data=vol, chunks=(8, 64, 64), compression="gzip",
                             compression_opts=4)
        os.replace(h5 + ".tmp", h5)
    sums = Sums(vol.shape)
    sums.add(vol, 0)
    return {"name": name, "shape": list(vol.shape), "dtype": "int16", "bytes": int(vol.nbytes),
            "tiff": stack, "hdf5": h5, "dataset": "/exchange/data", "oracle": sums.result()}


def synthetic_source(work, slices, size):
    """A uint16 TIFF stack of the make_volume phantom, written once (manifest last)."""
    stack = os.path.join(work, f"synthetic-{slices}x{size}")
    man_path = stack + ".manifest.json"
    if os.path.isfile(man_path):
        with open(man_path) as f:
            return json.load(f)
    shape = (slices, size, size)
    sums = Sums(shape)

    def planes():
        for z in range(slices):
            p = volumes.phantom(shape, (z, 0, 0), (1, size, size), 20261203, 20.0, z)
            sums.add(p, z)
            yield p[0]
    log(f"w7: writing the {slices}-slice {size}x{size} uint16 TIFF stack {stack}")
    write_stack(stack, planes())
    man = {"name": f"synthetic-{slices}x{size}", "shape": list(shape), "dtype": "uint16",
           "bytes": int(np.prod(shape)) * 2, "tiff": stack, "oracle": sums.result()}
    results.write_json(man_path, man)
    return man


# ---- runs ----

def ingest_config(path, src, kind, out, dataset=None):
    lines = ["job: ingest", "input:", f"  store: {src}", f"  format: {kind}"]
    if dataset:
        lines += ["  hdf5:", f"    dataset: {dataset}"]
    lines += ["output:", f"  path: {out}", "  exists: error", "progress: false"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def effective_memory_limit(shardmill, cfg, sets=()):
    """limits.memory_bytes of the effective configuration (`shardmill validate` prints every key
    with its default; the run report has no config section), in bytes, or None."""
    argv = [shardmill, "validate", cfg]
    for kv in sets:
        argv += ["--set", kv]
    r = subprocess.run(argv, capture_output=True, text=True)
    in_limits = False
    for line in r.stdout.splitlines():
        if not line.startswith(" "):
            in_limits = line.strip() == "limits:"
            continue
        key, _, val = line.strip().partition(":")
        if in_limits and key == "memory_bytes":
            m = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", val.strip().strip('"'))
            if m and m.group(2) in _UNITS:
                return int(m.group(1)) * _UNITS[m.group(2)]
    return None


def supports(shardmill, cfg):
    r = subprocess.run([shardmill, "validate", cfg], capture_output=True, text=True)
    return r.returncode == 0, (r.stderr or r.stdout).strip()[-300:]


def timed(argv, env=None, timeout=3600):
    """Runs argv once, after os.sync(): (CompletedProcess, measures). measures: process wall,
    CPU seconds of the children, busy cores in the 0.3 s before the launch, cores used by other
    processes during the run (/proc/stat jiffies minus ours, per wall second), the exit status and
    the launch time (time_ns, for the completion marker's mtime)."""
    os.sync()
    busy_before = machine.busy_cores(0.3)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    j0, i0 = machine.cpu_jiffies()
    t_launch = time.time_ns()
    m0 = time.monotonic_ns()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    wall = (time.monotonic_ns() - m0) / 1e9
    j1, i1 = machine.cpu_jiffies()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    machine_busy = ((j1 - j0) - (i1 - i0)) / machine.HZ
    return p, {"wall_s": round(wall, 4), "cpu_s": round(ours, 3),
               "busy_cores_before": busy_before,
               "other_busy_cores": round(max(0.0, machine_busy - ours) / wall, 2),
               "rc": p.returncode, "t_launch_ns": t_launch}


def run_shardmill(launcher, shardmill, src, kind, ranks, threads, work, tag, dataset=None):
    base = os.path.join(work, tag)
    out, rep_path = base + ".zarr", base + ".report.json"
    shutil.rmtree(out, ignore_errors=True)
    cfg = ingest_config(base + ".yaml", src[kind], kind, out, dataset)
    argv_sm = [shardmill, "run", cfg, "--set", f"parallel.threads={threads}",
               "--report", rep_path]
    argv, env = launcher.command(ranks, threads, argv_sm, base + ".spawn")
    limit = effective_memory_limit(shardmill, cfg, [f"parallel.threads={threads}"])
    p, m = timed(argv, env)
    t_launch = m.pop("t_launch_ns")
    rec = {"tag": tag, "ranks": ranks, "threads": threads, "launcher": launcher.kind, **m,
           "limits_memory_bytes": limit, "problems": []}
    wall = rec["wall_s"]
    per_rank = sm_launch.spawn_results(base + ".spawn", ranks)
    rec["per_rank"] = per_rank
    if p.returncode != 0:
        rec["problems"].append(f"exit {p.returncode}: {p.stderr.strip()[-400:]}")
    try:
        rec["marker_s"] = round((os.stat(os.path.join(out, sm_launch.MARKER)).st_mtime_ns -
                                 t_launch) / 1e9, 4)
    except OSError:
        rec["marker_s"] = None
        rec["problems"].append("no completion marker")
    try:
        with open(rep_path) as f:
            rep = report_json.with_int_checksums(json.load(f))
        os.unlink(rep_path)
        res = rep.get("result") or {}
        got = {"checksum": res.get("checksum"), "weighted_checksum": res.get("weighted_checksum")}
        if got != src["oracle"]:
            rec["problems"].append(f"checksums {got} != NumPy {src['oracle']}")
        rec["timing_ms"] = rep.get("timing_ms")
        rec["memory"] = rep.get("memory")
        rec["output"] = rep.get("output")
        rec["report_ranks"] = rep.get("ranks")
        rec["report_threads"] = rep.get("threads")
        if rep.get("ranks") != ranks:
            rec["problems"].append(f"the report says {rep.get('ranks')} ranks, not {ranks}")
    except (OSError, ValueError) as e:
        rec["problems"].append(f"report: {e}")
    meta_path = os.path.join(out, "zarr.json")
    if os.path.isfile(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        rec["shard"] = meta["chunk_grid"]["configuration"]["chunk_shape"]
    rec["mb_s"] = round(src["bytes"] / 1e6 / wall, 1)
    if rec.get("marker_s"):
        rec["mb_s_marker"] = round(src["bytes"] / 1e6 / rec["marker_s"], 1)
    rss = [x.get("maxrss_bytes") for x in per_rank]
    rec["rss_within_limit"] = None if limit is None or None in rss else max(rss) <= limit
    rec["ok"] = not rec["problems"]
    shutil.rmtree(out, ignore_errors=True)
    return rec


def run_peer(spawn, src, kind, chunks, work, tag):
    base = os.path.join(work, tag)
    out = base + ".v2.zarr"
    shutil.rmtree(out, ignore_errors=True)
    argv = [spawn, base + ".spawn", PY, os.path.join(HERE, "peer_ingest_zarr2.py"), src[kind], out,
            "--kind", kind, "--chunks", ",".join(str(c) for c in chunks)]
    if kind == "hdf5":
        argv += ["--dataset", src["dataset"]]
    p, m = timed(argv)
    m.pop("t_launch_ns")
    rec = {"tag": tag, **m, "problems": []}
    wall = rec["wall_s"]
    try:
        with open(base + ".spawn") as f:
            rec["maxrss_bytes"] = json.load(f)["maxrss_kib"] * 1024
        os.unlink(base + ".spawn")
    except (OSError, ValueError, KeyError):
        pass
    if p.returncode != 0:
        rec["problems"].append(f"exit {p.returncode}: {p.stderr.strip()[-400:]}")
    else:
        rec["peer"] = json.loads(p.stdout.strip().splitlines()[-1])
        import zarr
        z = zarr.open_array(out, mode="r")
        sums = Sums(z.shape)
        step = max(1, (1 << 24) // (z.shape[1] * z.shape[2]))
        for z0 in range(0, z.shape[0], step):
            sums.add(z[z0:z0 + step], z0)
        if sums.result() != src["oracle"]:
            rec["problems"].append("the peer's output differs from the source")
    rec["mb_s"] = round(src["bytes"] / 1e6 / wall, 1)
    rec["ok"] = not rec["problems"]
    shutil.rmtree(out, ignore_errors=True)
    return rec


def med(recs, key="wall_s"):
    return results.med([r.get(key) for r in recs if r.get("ok")])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                        "shardmill"))
    ap.add_argument("--work", default=os.path.join(REPO, "build", "bench-w7"))
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--slices", type=int, default=1024)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--skip-synthetic", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.repeats, a.slices, a.size = 1, 16, 96
    shardmill = os.path.abspath(a.shardmill)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    spawn = sm_launch.build_spawn(work)
    plain = sm_launch.Launcher("plain", spawn)
    mpi = sm_launch.Launcher("mpirun", spawn)
    tc = machine.toolchain(shardmill)
    doc = {"benchmark": "W7", "quick": a.quick, "repeats": a.repeats,
           "machine": machine.machine(), "toolchain": tc, "cases": {}}
    problems = []

    ct = ct_sources(work, a.quick)
    for kind in ("tiff", "hdf5"):
        case = {"source": {k: ct[k] for k in ("name", "shape", "dtype", "bytes")}, "kind": kind}
        cfg = ingest_config(os.path.join(work, f"probe-{kind}.yaml"), ct[kind], kind,
                            os.path.join(work, "probe.zarr"), ct["dataset"] if kind == "hdf5"
                            else None)
        ok, why = supports(shardmill, cfg)
        if not ok:
            case["unsupported"] = why
            doc["cases"][f"ct_{kind}"] = case
            log(f"w7: ct_{kind}: this shardmill does not read it: {why}")
            continue
        sm_runs, peer_runs = [], []
        for i in range(a.repeats):
            r = run_shardmill(plain, shardmill, ct, kind, 1, 2, work, f"ct_{kind}-sm-{i}",
                              ct["dataset"] if kind == "hdf5" else None)
            sm_runs.append(r)
            chunks = r.get("shard") or ct["shape"]
            peer_runs.append(run_peer(spawn, ct, kind, chunks, work, f"ct_{kind}-peer-{i}"))
            log(f"w7: ct_{kind} #{i}: shardmill {r['wall_s']} s, peer {peer_runs[-1]['wall_s']} s")
        case.update({"shardmill": sm_runs, "peer": peer_runs,
                     "median_wall_s": {"shardmill": med(sm_runs), "peer": med(peer_runs)}})
        m = case["median_wall_s"]
        case["ratio_peer_over_shardmill"] = round(m["peer"] / m["shardmill"], 2) \
            if m["peer"] and m["shardmill"] else None
        case["target_5x"] = case["ratio_peer_over_shardmill"] is not None and \
            case["ratio_peer_over_shardmill"] >= 5
        problems += [p for r in sm_runs + peer_runs for p in r["problems"]]
        doc["cases"][f"ct_{kind}"] = case

    if not a.skip_synthetic:
        syn = synthetic_source(work, a.slices, a.size)
        configs = [("1x1", plain, 1, 1), ("1x2", plain, 1, 2)]
        if tc.get("mpi") or shutil.which("mpirun"):
            configs.append(("2x1", mpi, 2, 1))
        runs = {name: [] for name, *_ in configs}
        for i in range(a.repeats):
            for name, launcher, ranks, threads in configs:
                r = run_shardmill(launcher, shardmill, syn, "tiff", ranks, threads, work,
                                  f"synthetic-{name}-{i}")
                runs[name].append(r)
                log(f"w7: synthetic {name} #{i}: wall {r['wall_s']} s, marker {r['marker_s']} s, "
                    f"{r['mb_s']} MB/s, rss {[x.get('maxrss_bytes') for x in r['per_rank']]}")
                problems += r["problems"]
        case = {"source": {k: syn[k] for k in ("name", "shape", "dtype", "bytes")},
                "runs": runs,
                "median_marker_s": {n: med(rs, "marker_s") for n, rs in runs.items()},
                "median_mb_s": {n: med(rs, "mb_s") for n, rs in runs.items()},
                "median_mb_s_marker": {n: med(rs, "mb_s_marker") for n, rs in runs.items()},
                "median_busy_cores_before": {n: results.med([r["busy_cores_before"] for r in rs])
                                             for n, rs in runs.items()},
                "median_other_busy_cores": {n: results.med([r["other_busy_cores"] for r in rs])
                                            for n, rs in runs.items()},
                "limits_memory_bytes": {n: max((r.get("limits_memory_bytes") or 0 for r in rs),
                                               default=None) for n, rs in runs.items()},
                "peak_rss_bytes_max": {n: max((x.get("maxrss_bytes") or 0 for r in rs
                                               for x in r["per_rank"]), default=None)
                                       for n, rs in runs.items()}}
        mm = case["median_marker_s"]
        for n in ("1x2", "2x1"):
            if mm.get(n) and mm.get("1x1"):
                case[f"speedup_{n}"] = round(mm["1x1"] / mm[n], 2)
        case["target_2x1_1.7x"] = (case.get("speedup_2x1") or 0) >= 1.7
        case["target_rss_within_limit"] = all(r.get("rss_within_limit") for rs in runs.values()
                                              for r in rs)
        doc["cases"]["synthetic"] = case

    doc["problems"] = problems
    os.makedirs(a.out, exist_ok=True)
    path = results.unique_path(a.out, f"w7{'-quick' if a.quick else ''}-{results.utc_stamp()}",
                               ".json")
    results.write_json(path, doc)
    for name, c in doc["cases"].items():
        if "unsupported" in c:
            print(f"{name}: unsupported by this build")
        elif name.startswith("ct_"):
            print(f"{name}: shardmill {c['median_wall_s']['shardmill']} s, Python "
                  f"{c['median_wall_s']['peer']} s: {c['ratio_peer_over_shardmill']}x")
        else:
            print(f"{name}: marker {c['median_marker_s']}, MB/s {c['median_mb_s']}, "
                  f"speedups 1x2 {c.get('speedup_1x2')} 2x1 {c.get('speedup_2x1')}, "
                  f"peak RSS {c['peak_rss_bytes_max']}")
    print(f"results: {path}")
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
