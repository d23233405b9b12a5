#!/usr/bin/python3
"""W7 OME: the user's job "TIFF/HDF5 -> windowed OME-Zarr pyramid" (issue 20), three ways.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/ingest/w7_ome.py [--quick] [--repeats 3] [--warmup 1] [--shardmill BIN]
                                        [--work DIR] [--out DIR] [--levels 2] [--lo 1] [--hi 99]

Sources: bench/ingest/w7.py's (ct_sources): the head CT (data/ct/matrix.dat, SPEC §9) as 108
tifffile slices and as an h5py dataset /exchange/data (chunks [8,64,64], gzip 4); voxel spacing
from data/ct/main.plist (x y z -> z y x), unit millimeter. Per source (tiff, hdf5), contenders:
  one     shardmill, one job: `job: convert` of the source, `normalize: {mode: percentile, lo, hi}`,
          `output.ome: {levels}`, input.spacing/unit, default layout, 1 rank x 2 threads
  two     shardmill, two jobs: `job: ingest` of the source (with spacing/unit) to a full-size Zarr
          v3 intermediate, then `job: convert` of the intermediate with the same window and
          levels (spacing from its provenance); wall = the two process walls added; the
          intermediate's bytes (file sizes, and blocks allocated) are recorded, then it is removed
  python  bench/ingest/peer_ome_zarr2.py: tifffile/h5py read -> SPEC §5 percentile window with the
          test tier's NumPy oracle -> float32 -> SPEC §2 2x2x2 mean level(s) -> zarr-python 2.13
          writes every level (chunks = shardmill's shard shape of that level, zstd 3, fsync) and
          a minimal OME multiscales .zattrs
Each run is a fresh process (bench/region_read/w3_spawn.c: wall and peak RSS); per repeat the contenders
run in a rotated order (one two python, two python one, ...) after --warmup rounds that are not
recorded (with --wait-idle S, each round first waits up to S s for fewer than 0.5 busy cores).
Machine load per run as w7.py records it (busy cores in the 0.3 s before the launch,
cores of other processes during the run) and the load average before and after.
Checks (outside the timings), so the timings compare equal work: NumPy (the same oracle as the
tests: tests/lib/shardmill_test/spec_oracle.py and scripts/ct_tools.py over the source read back with
tifffile and checked against w7's source checksums) gives the window, level 0 and level 1; every
contender's every level must equal it bit for bit (the tests' tolerance: SPEC §5 and §2 are exact
in float32), shardmill's levels decoded by shardmill_test.zarr_decode, the tests' independent Zarr v3 decoder; every
shardmill report's input checksums, window and output checksums equal NumPy's; the level-0 OME
scale equals the spacing. Outputs are removed after each run.
--quick: w7's CT-like 24 x 64 x 64 phantom instead of the CT, no warm-up, one repeat: the smoke
profile ctest runs (bench.w7.ome.quick, label bench-quick); it fails on wrong values only.
Results: OUT/w7-ome-<stamp>.json (bench/results by default) with the machine, toolchain, commit.
"""

import argparse
import json
import os
import plistlib
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

from shardmill_test import report_json
from shardmill_test import launcher as sm_launch
from shardmill_test import machine
from shardmill_test import ome_ngff_check
from shardmill_test import spec_oracle
from shardmill_test import results
from shardmill_test import runner as cc
from shardmill_test import zarr_decode

import w7  # noqa: E402  (the W7 drivers' shared pieces)
from peer_ingest_zarr2 import read_volume  # noqa: E402

CONTENDERS = ("one", "two", "python")
QUICK_SPACING = [1.5, 0.75, 0.75]


def ct_spacing(quick):
    """z, y, x spacing of the CT from main.plist (its x y z reversed), as ct_tools checks it."""
    if quick:
        return QUICK_SPACING
    with open(os.path.join(REPO, "data", "ct", "main.plist"), "rb") as f:
        return [float(v) for v in plistlib.load(f)["spacing"]][::-1]


def oracle(src, levels, p_lo, p_hi):
    """NumPy's window and levels over the source read back with tifffile (checked against w7's
    checksums of the source)."""
    vol = read_volume("tiff", src["tiff"], None)
    sums = w7.Sums(vol.shape)
    sums.add(vol, 0)
    if sums.result() != src["oracle"]:
        raise SystemExit("w7_ome: the TIFF stack read back differs from the source volume")
    bins, h_lo, h_hi = spec_oracle.default_hist(vol.dtype)
    counts, under, over, _ = spec_oracle.histogram(vol, bins, h_lo, h_hi)
    lo = spec_oracle.percentile(counts, under, over, h_lo, h_hi, p_lo)
    hi = spec_oracle.percentile(counts, under, over, h_lo, h_hi, p_hi)
    lv = [spec_oracle.normalize(vol, "window", lo=lo, hi=hi)]
    while len(lv) < levels:
        lv.append(spec_oracle.block_mean(lv[-1], (2, 2, 2)))  # downsample: all
    out_sum, out_w = spec_oracle.checksums(lv[0], lv[0].shape, [0] * lv[0].ndim)
    return {"lo": float(lo), "hi": float(hi), "levels": lv,
            "output_checksum": out_sum, "output_weighted_checksum": out_w}


# ---- configurations ----

def source_input(src, kind, spacing, unit):
    inp = {"store": src[kind], "format": kind}
    if kind == "hdf5":
        inp["hdf5"] = {"dataset": src["dataset"]}
    inp["spacing"] = spacing
    inp["unit"] = unit
    return inp


def convert_config(path, inp, out, a, threads):
    return cc.write_config(path, {
        "job": "convert", "input": inp,
        "normalize": {"mode": "percentile", "lo": a.lo, "hi": a.hi},
        # downsample all: every axis halved, the same work as the Python peer's pyramid
        "output": {"path": out, "exists": "error",
                   "ome": {"levels": a.levels, "downsample": "all"}},
        "parallel": {"threads": threads}, "progress": False})


def ingest_config(path, inp, out, threads):
    return cc.write_config(path, {
        "job": "ingest", "input": inp, "output": {"path": out, "exists": "error"},
        "parallel": {"threads": threads}, "progress": False})


def tree_bytes(root):
    """(sum of file sizes, bytes of blocks allocated) under root."""
    size = alloc = 0
    for d, _, names in os.walk(root):
        for n in names:
            st = os.lstat(os.path.join(d, n))
            size += st.st_size
            alloc += st.st_blocks * 512
    return size, alloc


# ---- checks ----

def check_levels(rec, label, got_levels, want):
    for k, (got, w) in enumerate(zip(got_levels, want["levels"])):
        if not spec_oracle.same_bits(np.asarray(got, dtype=np.float32), w):
            rec["problems"].append(f"{label} level {k} != NumPy: {spec_oracle.first_diff(got, w)}")
    if len(got_levels) != len(want["levels"]):
        rec["problems"].append(f"{label}: {len(got_levels)} levels, want {len(want['levels'])}")


def check_shardmill_image(rec, out, want, spacing, unit):
    """Every level decoded by shardmill_test.zarr_decode; the OME scale and unit."""
    try:
        g = json.load(open(os.path.join(out, "zarr.json")))
        ms = g["attributes"]["ome"]["multiscales"][0]
        paths = [d["path"] for d in ms["datasets"]]
        got = [zarr_decode.spec_decode(os.path.join(out, p)) for p in paths]
        rec["shards"] = [json.load(open(os.path.join(out, p, "zarr.json")))["chunk_grid"]
                         ["configuration"]["chunk_shape"] for p in paths]
        scale0 = ms["datasets"][0]["coordinateTransformations"][0]["scale"]
        if scale0 != spacing or ms["axes"][0].get("unit") != unit:
            rec["problems"].append(f"OME scale {scale0} {ms['axes'][0].get('unit')} != "
                                   f"{spacing} {unit}")
    except (OSError, ValueError, KeyError, IndexError) as e:
        rec["problems"].append(f"output {out}: {e!r}")
        return
    check_levels(rec, "shardmill", got, want)
    rec["problems"] += [f"OME-NGFF 0.5: {b}" for b in ome_ngff_check.check_image(out)]
    rec["output_bytes"] = tree_bytes(out)[0]


def check_report(rec, rep_path, src, want, label, normalized=True):
    try:
        with open(rep_path) as f:
            rep = report_json.with_int_checksums(json.load(f))
        os.unlink(rep_path)
    except (OSError, ValueError) as e:
        rec["problems"].append(f"{label} report: {e}")
        return None
    res = rep.get("result") or {}
    got = {"checksum": res.get("checksum"), "weighted_checksum": res.get("weighted_checksum")}
    if got != src["oracle"]:
        rec["problems"].append(f"{label} input checksums {got} != NumPy {src['oracle']}")
    if normalized:
        n = res.get("normalization") or {}
        if [n.get("lo"), n.get("hi")] != [want["lo"], want["hi"]]:
            rec["problems"].append(f"{label} window {[n.get('lo'), n.get('hi')]} != NumPy "
                                   f"{[want['lo'], want['hi']]}")
        og = [res.get("output_checksum"), res.get("output_weighted_checksum")]
        if og != [want["output_checksum"], want["output_weighted_checksum"]]:
            rec["problems"].append(f"{label} output checksums {og} != NumPy")
    t = (rep.get("timing_ms") or {}).get("max") or {}
    return {"timing_ms_total": (rep.get("timing_ms") or {}).get("total"),
            "timing_ms": {k: t.get(k) for k in ("open", "scan_wall", "process", "write",
                                                 "finish")},
            "peak_rss_bytes": (rep.get("memory") or {}).get("peak_rss_bytes"),
            "output": rep.get("output")}


# ---- runs ----

def run_job(launcher, shardmill, cfg, base, threads):
    """One shardmill process: (measures, per-rank spawn results, stderr tail)."""
    argv, env = launcher.command(1, threads, [shardmill, "run", cfg, "--report",
                                              base + ".report.json"], base + ".spawn")
    p, m = w7.timed(argv, env)
    m.pop("t_launch_ns")
    m["per_rank"] = sm_launch.spawn_results(base + ".spawn", 1)
    m["maxrss_bytes"] = m["per_rank"][0].get("maxrss_bytes")
    if p.returncode != 0:
        m["error"] = p.stderr.strip()[-400:]
    return m


def run_one(ctx, kind, tag):
    base = os.path.join(ctx["work"], tag)
    out = base + ".zarr"
    shutil.rmtree(out, ignore_errors=True)
    cfg = convert_config(base + ".yaml", ctx["inputs"][kind], out, ctx["a"], ctx["threads"])
    m = run_job(ctx["launcher"], ctx["shardmill"], cfg, base, ctx["threads"])
    rec = {"tag": tag, "contender": "one", **m, "problems": []}
    if "error" in m:
        rec["problems"].append(f"exit {m['rc']}: {m['error']}")
    else:
        rec["report"] = check_report(rec, base + ".report.json", ctx["src"], ctx["want"], "convert")
        check_shardmill_image(rec, out, ctx["want"], ctx["spacing"], ctx["unit"])
    shutil.rmtree(out, ignore_errors=True)
    rec["ok"] = not rec["problems"]
    return rec


def run_two(ctx, kind, tag):
    base = os.path.join(ctx["work"], tag)
    inter, out = base + ".intermediate.zarr", base + ".zarr"
    for d in (inter, out):
        shutil.rmtree(d, ignore_errors=True)
    cfg1 = ingest_config(base + ".ingest.yaml", ctx["inputs"][kind], inter, ctx["threads"])
    cfg2 = convert_config(base + ".convert.yaml", {"store": inter}, out, ctx["a"], ctx["threads"])
    rec = {"tag": tag, "contender": "two", "problems": []}
    m1 = run_job(ctx["launcher"], ctx["shardmill"], cfg1, base + ".ingest", ctx["threads"])
    rec["ingest"] = m1
    if "error" in m1:
        rec["problems"].append(f"ingest exit {m1['rc']}: {m1['error']}")
    else:
        rec["ingest"]["report"] = check_report(rec, base + ".ingest.report.json", ctx["src"],
                                               ctx["want"], "ingest", normalized=False)
        rec["intermediate_bytes"], rec["intermediate_alloc_bytes"] = tree_bytes(inter)
        m2 = run_job(ctx["launcher"], ctx["shardmill"], cfg2, base + ".convert", ctx["threads"])
        rec["convert"] = m2
        if "error" in m2:
            rec["problems"].append(f"convert exit {m2['rc']}: {m2['error']}")
        else:
            rec["convert"]["report"] = check_report(rec, base + ".convert.report.json",
                                                    ctx["src"], ctx["want"], "convert")
            check_shardmill_image(rec, out, ctx["want"], ctx["spacing"], ctx["unit"])
            rec["wall_s"] = round(m1["wall_s"] + m2["wall_s"], 4)
            rec["cpu_s"] = round(m1["cpu_s"] + m2["cpu_s"], 3)
            rec["maxrss_bytes"] = max(m1["maxrss_bytes"] or 0, m2["maxrss_bytes"] or 0)
            rec["busy_cores_before"] = m1["busy_cores_before"]
            rec["other_busy_cores"] = round((m1["other_busy_cores"] * m1["wall_s"] +
                                             m2["other_busy_cores"] * m2["wall_s"]) /
                                            (m1["wall_s"] + m2["wall_s"]), 2)
    for d in (inter, out):
        shutil.rmtree(d, ignore_errors=True)
    rec["ok"] = not rec["problems"]
    return rec


def run_python(ctx, kind, tag):
    base = os.path.join(ctx["work"], tag)
    out = base + ".v2.zarr"
    shutil.rmtree(out, ignore_errors=True)
    src = ctx["src"]
    argv = [ctx["spawn"], base + ".spawn.0", w7.PY, os.path.join(HERE, "peer_ome_zarr2.py"),
            src[kind], out, "--kind", kind, "--lo", str(ctx["a"].lo), "--hi", str(ctx["a"].hi),
            "--spacing", ",".join(repr(s) for s in ctx["spacing"]), "--unit", ctx["unit"]]
    for ch in ctx["shards"]:
        argv += ["--chunks", ",".join(str(c) for c in ch)]
    if kind == "hdf5":
        argv += ["--dataset", src["dataset"]]
    p, m = w7.timed(argv)
    m.pop("t_launch_ns")
    rec = {"tag": tag, "contender": "python", **m, "problems": []}
    rec["per_rank"] = sm_launch.spawn_results(base + ".spawn", 1)
    rec["maxrss_bytes"] = rec["per_rank"][0].get("maxrss_bytes")
    if p.returncode != 0:
        rec["problems"].append(f"exit {p.returncode}: {p.stderr.strip()[-400:]}")
    else:
        rec["peer"] = json.loads(p.stdout.strip().splitlines()[-1])
        import zarr
        g = zarr.open_group(out, mode="r")
        check_levels(rec, "python", [g[str(k)][...] for k in range(len(ctx["shards"]))],
                     ctx["want"])
        scale0 = g.attrs["multiscales"][0]["datasets"][0]["coordinateTransformations"][0]["scale"]
        if scale0 != ctx["spacing"]:
            rec["problems"].append(f"python OME scale {scale0} != {ctx['spacing']}")
        rec["output_bytes"] = tree_bytes(out)[0]
    shutil.rmtree(out, ignore_errors=True)
    rec["ok"] = not rec["problems"]
    return rec


RUNNERS = {"one": run_one, "two": run_two, "python": run_python}


def summarize(runs, problems):
    recs = {c: [r for r in runs if r["contender"] == c] for c in CONTENDERS}
    med = {c: w7.med(rs) for c, rs in recs.items()}
    s = {"median_wall_s": med,
         "walls_s": {c: [r.get("wall_s") for r in rs] for c, rs in recs.items()},
         "peak_rss_bytes_max": {c: max((r.get("maxrss_bytes") or 0 for r in rs), default=None)
                                for c, rs in recs.items()},
         "median_busy_cores_before": {c: results.med([r.get("busy_cores_before") for r in rs])
                                      for c, rs in recs.items()},
         "median_other_busy_cores": {c: results.med([r.get("other_busy_cores") for r in rs])
                                     for c, rs in recs.items()},
         "output_bytes": {c: next((r.get("output_bytes") for r in rs if r.get("output_bytes")),
                                  None) for c, rs in recs.items()},
         "intermediate_bytes": next((r["intermediate_bytes"] for r in recs["two"]
                                     if "intermediate_bytes" in r), None),
         "intermediate_alloc_bytes": next((r["intermediate_alloc_bytes"] for r in recs["two"]
                                           if "intermediate_alloc_bytes" in r), None),
         "two_job_split_median_s": {
             "ingest": results.med([r["ingest"]["wall_s"] for r in recs["two"] if r["ok"]]),
             "convert": results.med([r["convert"]["wall_s"] for r in recs["two"] if r["ok"]])}}

    def ratio(a, b):
        return round(med[a] / med[b], 2) if med[a] and med[b] else None
    s["ratio_python_over_one"] = ratio("python", "one")
    s["ratio_python_over_two"] = ratio("python", "two")
    s["ratio_two_over_one"] = ratio("two", "one")
    problems += [p for r in runs for p in r["problems"]]
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                        "shardmill"))
    ap.add_argument("--work", default=os.path.join(REPO, "build", "bench-w7"))
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--levels", type=int, default=2)
    ap.add_argument("--lo", type=float, default=1)
    ap.add_argument("--hi", type=float, default=99)
    ap.add_argument("--wait-idle", type=float, default=0,
                    help="before each round, wait up to this many seconds until other work uses "
                         "fewer than 0.5 cores (machine.wait_idle; the samples are recorded)")
    a = ap.parse_args()
    if a.quick:
        a.repeats, a.warmup = 1, 0
    for k in ("lo", "hi"):  # 1.0 -> 1: the YAML and the peer get the decimal as written
        v = getattr(a, k)
        setattr(a, k, int(v) if v == int(v) else v)
    shardmill = os.path.abspath(a.shardmill)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    spawn = sm_launch.build_spawn(work)
    tc = machine.toolchain(shardmill)
    src = w7.ct_sources(work, a.quick)
    spacing, unit = ct_spacing(a.quick), "millimeter"
    want = oracle(src, a.levels, a.lo, a.hi)
    ctx = {"a": a, "work": work, "spawn": spawn, "shardmill": shardmill, "threads": a.threads,
           "launcher": sm_launch.Launcher("plain", spawn), "src": src, "want": want,
           "spacing": spacing, "unit": unit,
           "inputs": {k: source_input(src, k, spacing, unit) for k in ("tiff", "hdf5")}}
    doc = {"benchmark": "W7-ome", "quick": a.quick, "repeats": a.repeats, "warmup": a.warmup,
           "wait_idle_s": a.wait_idle,
           "threads": a.threads, "levels": a.levels, "percentiles": [a.lo, a.hi],
           "machine": machine.machine(), "toolchain": tc,
           "source": {k: src[k] for k in ("name", "shape", "dtype", "bytes")},
           "spacing": spacing, "unit": unit, "numpy_window": [want["lo"], want["hi"]],
           "cases": {}}
    problems = []
    for kind in ("tiff", "hdf5"):
        name = f"{src['name']}_{kind}"
        probe = convert_config(os.path.join(work, f"ome-probe-{kind}.yaml"), ctx["inputs"][kind],
                               os.path.join(work, "ome-probe.zarr"), a, a.threads)
        ok, why = w7.supports(shardmill, probe)
        if not ok:
            doc["cases"][name] = {"unsupported": why}
            w7.log(f"w7_ome: {name}: this shardmill does not read it: {why}")
            continue
        # the shard shape of every level, for the Python pipeline's chunks: a one-job run
        first = run_one({**ctx, "shards": None}, kind, f"{name}-layout")
        if not first["ok"]:
            problems += first["problems"]
            doc["cases"][name] = {"layout_run": first}
            continue
        ctx["shards"] = first["shards"]
        runs, order, idle = [], [], []
        for i in range(a.warmup + a.repeats):
            if a.wait_idle > 0:
                smp = machine.wait_idle(a.wait_idle)
                idle.append({"samples": len(smp), "max": max(smp), "last": smp[-1]})
            rot = [CONTENDERS[(j + i) % len(CONTENDERS)] for j in range(len(CONTENDERS))]
            for c in rot:
                tag = f"{name}-{c}-{'w' if i < a.warmup else ''}{i}"
                r = RUNNERS[c](ctx, kind, tag)
                w7.log(f"w7_ome: {tag}: {r.get('wall_s')} s, rss {r.get('maxrss_bytes')}"
                       f"{'' if r['ok'] else ' PROBLEMS ' + '; '.join(r['problems'])}")
                if i >= a.warmup:
                    runs.append(r)
                elif not r["ok"]:
                    problems += r["problems"]
            if i >= a.warmup:
                order.append(rot)
        case = {"shards": ctx["shards"], "order": order, "wait_idle_samples": idle,
                "runs": runs}
        case.update(summarize(runs, problems))
        doc["cases"][name] = case
    doc["loadavg_end"] = list(os.getloadavg())
    doc["problems"] = problems
    path = results.unique_path(a.out, f"w7-ome{'-quick' if a.quick else ''}-"
                               f"{results.utc_stamp()}", ".json")
    results.write_json(path, doc)
    for name, c in doc["cases"].items():
        if "unsupported" in c or "median_wall_s" not in c:
            print(f"{name}: not measured")
            continue
        m = c["median_wall_s"]
        print(f"{name}: one job {m['one']} s, two jobs {m['two']} s, Python {m['python']} s; "
              f"Python/one {c['ratio_python_over_one']}x, Python/two {c['ratio_python_over_two']}x"
              f", two/one {c['ratio_two_over_one']}x; peak RSS {c['peak_rss_bytes_max']}; "
              f"intermediate {c['intermediate_bytes']} B")
    print(f"results: {path}")
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
