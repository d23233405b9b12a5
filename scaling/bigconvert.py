#!/usr/bin/python3
"""Issue 5 conversion benchmarks: bounded memory and parallel speedup of `convert`.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/bigconvert.py memory  [--shardmill BIN] [--repeats 2]
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/bigconvert.py speedup [--shardmill BIN] [--pairs 5]
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/bigconvert.py --quick all --out DIR        (CI smoke, < 30 s)
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/bigconvert.py table bench/results/convert-speedup-<UTC>.json

Input: scaling/make_volume.py volumes (uint16 Zarr v3, chunks 64³, zstd 3, CT-like content),
generated once under data/scaling/ (idempotent). Job: configs/scaling-convert.yaml (scale
normalization float32(v)/float32(4095), output shards [64,256,256] of inner chunks [64,64,64],
zstd 3, durable: output.fsync with the default output.sync=syncfs).

memory   1024³ (2 GiB of uint16) with `limits.memory_bytes: 256MiB`, under 1 rank × 2 threads
         (plain process) and 2 ranks × 1 thread (mpirun). Target: peak RSS of every rank
         ≤ 320 MiB. Cache variants (`--cache`): the configuration as written (encoded-object
         cache on, max_bytes 256MiB, the default), the cache off, and the cache at 32MiB. Every
         rank's VmRSS is sampled every 100 ms, so the phase of the peak (scan or write) is
         recorded with the RSS at the end of the scan.
speedup  512³ (256 MiB of uint16), time from launch to the completion marker's mtime for
         1×1 (plain), 2×1 (mpirun -np 2, 1 thread) and 1×2 (plain, 2 threads): one warm-up
         round, then `--pairs` rounds in ABAB order (A B C A B C ...), medians. Target: 1×1 /
         X ≥ 1.8 for both. Diagnostic variants in the same rounds (not part of the target,
         `--no-diagnostics` to skip): the same three with output.fsync=false (the sync share),
         and 1×1 with limits.memory_bytes=64MiB (1×1 re-reading its input like every multi-rank
         run does).

Every run is a fresh process (per rank: bench/region_read/w3_spawn.c, wait4 peak RSS and exit status);
its report is checked against the generator's NumPy oracle (input checksum, weighted checksum,
exact 65536-bin histogram, output checksums of the float32 formula, shard count), the output
against `shardmill verify`, and every output value is decoded independently (NumPy + zstandard,
no shardmill code) and its SPEC §5 sums compared with the oracle; then the output is deleted.
Results: bench/results/convert-<case>-<UTC>.json (never overwritten; --out for the quick
profile). Targets print PASS/FAIL and never change the exit status; a wrong value or a failed
run exits 1.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

from shardmill_test import REPO
from shardmill_test import launcher as sm_launch
from shardmill_test import machine
from shardmill_test import results
from shardmill_test import volumes

MIB = sm_launch.MIB
RSS_TARGET = 320 * MIB
SPEEDUP_TARGET = 1.8
SHARD = [64, 256, 256]
QUICK = {"shape": [72, 96, 80], "chunk": [32, 32, 32], "shard": [32, 64, 64],
         "memory_bytes": "1MiB"}
CACHE_VARIANTS = {"default": [], "off": ["input.cache.enabled=false"],
                  "32MiB": ["input.cache.max_bytes=32MiB"]}


def peak_phase(rec):
    """From the VmRSS samples and the report: the phase of each rank's peak and the RSS at the
    end of the scan. The engine's clock starts after MPI_Init; its end is taken as the last
    sample, so engine start ≈ last sample - timing_ms.total (max over ranks)."""
    s = rec.get("rss_samples")
    t = ((rec.get("report") or {}).get("timing_ms") or {}).get("max") or {}
    if not s or not s["series_kib"] or "total" not in t:
        return None
    series = s["series_kib"]
    t_end = series[-1][0]
    t_start = t_end - t["total"] / 1e3
    t_scan = t_start + t["scan_wall"] / 1e3
    out = []
    for col, pid in enumerate(s["pids"], start=1):
        vals = [(row[0], row[col]) for row in series if row[col] > 0]
        if not vals:
            continue
        tp, peak = max(vals, key=lambda x: x[1])
        at_scan = min(vals, key=lambda x: abs(x[0] - t_scan))[1]
        out.append({"pid": pid, "peak_mib": round(peak / 1024, 1), "t_peak_s": tp,
                    "phase": "scan" if tp <= t_scan else "write",
                    "rss_at_scan_end_mib": round(at_scan / 1024, 1)})
    return {"engine_start_s": round(t_start, 2), "scan_end_s": round(t_scan, 2),
            "end_s": t_end, "ranks": out}


def memory_case(a, env):
    shape = QUICK["shape"] if a.quick else [1024, 1024, 1024]
    shard = QUICK["shard"] if a.quick else SHARD
    chunk = QUICK["chunk"] if a.quick else [64, 64, 64]
    man = volumes.ensure_volume(os.path.join(a.data_dir, "vol-%d-%d-%d.zarr" % tuple(shape)),
                                    shape, chunk, jobs=a.gen_jobs)
    limit = QUICK["memory_bytes"] if a.quick else a.memory_bytes
    variants = ["default"] if a.quick else a.cache
    configs = [(1, 2), (2, 1)]
    # quick: 1 MiB is a knob that makes every rank re-read, below any process (not a ceiling)
    sets_base = [f"limits.memory_bytes={limit}"] + (
        ["limits.memory_ceiling=false"] if a.quick else [])
    if a.quick:
        sets_base += [f"output.shard=[{', '.join(map(str, shard))}]",
                      f"output.chunk=[{', '.join(map(str, chunk))}]"]
    runs = []
    order = [(v, r, t) for v in variants for (r, t) in configs]
    for rep in range(a.repeats):
        for v, r, t in (order if rep % 2 == 0 else order[::-1]):
            if a.wait_idle:
                machine.wait_idle(a.wait_idle)
            tag = f"mem-{v}-{r}x{t}-{rep}"
            launcher = env["plain"] if r == 1 else env["mpirun"]
            rec = sm_launch.run_convert(launcher, a.shardmill, a.config, man, r, t, env["work"], tag,
                                 shard, sets_base + CACHE_VARIANTS[v], sample_rss=True,
                                 check_values=not a.no_value_check)
            rec["variant"] = v
            rec["round"] = rep
            rec["phase"] = peak_phase(rec)
            runs.append(rec)
            per = [x.get("maxrss_bytes") for x in rec["per_rank"]]
            results.log(f"memory {v:8s} {r}x{t}: ok={rec['ok']} wall {rec['wall_s']:.1f} s, peak RSS "
                   f"per rank {[round((x or 0) / MIB, 1) for x in per]} MiB, report "
                   f"{round(((rec.get('report') or {}).get('memory') or {}).get('peak_rss_bytes', 0) / MIB, 1)}"
                   f" MiB, phase {[(x['phase'], x['rss_at_scan_end_mib']) for x in (rec['phase'] or {}).get('ranks', [])]}"
                   f", other load {rec['other_busy_cores']} cores"
                   + ("" if rec["ok"] else f" PROBLEMS {rec['problems']}"))
    summary = []
    for v in variants:
        for r, t in configs:
            rs = [x for x in runs if x["variant"] == v and x["ranks"] == r and x["threads"] == t]
            peaks = [max((y.get("maxrss_bytes") or 0) for y in x["per_rank"]) for x in rs]
            rep_peaks = [((x.get("report") or {}).get("memory") or {}).get("peak_rss_bytes")
                         for x in rs]
            cache_peak = [(((x.get("report") or {}).get("io") or {}).get("cache") or {}).get(
                "peak_bytes") for x in rs]
            phases = [p for x in rs for p in ((x.get("phase") or {}).get("ranks") or [])]
            peak = max(peaks) if peaks else None
            summary.append({
                "variant": v, "ranks": r, "threads": t, "runs": len(rs),
                "all_ok": all(x["ok"] for x in rs),
                "peak_rss_per_rank_max_bytes": peak,
                "report_peak_rss_bytes": max([p for p in rep_peaks if p] or [0]),
                "cache_peak_bytes": max([c for c in cache_peak if c] or [0]),
                "rss_at_scan_end_mib": max([p["rss_at_scan_end_mib"] for p in phases] or [0]),
                "peak_phase": sorted({p["phase"] for p in phases}),
                "wall_s": results.summarize([x["wall_s"] for x in rs]),
                "timing_ms_max": {k: results.med([results.timing(x, k) for x in rs]) for k in (
                    "total", "open", "hydrate", "decode", "process", "allreduce", "write",
                    "scan_wall")},
                "target": f"<= {RSS_TARGET // MIB} MiB per rank",
                "pass": peak is not None and peak <= RSS_TARGET})
    return {"case": "memory", "volume": {k: man[k] for k in ("path", "params", "voxels",
                                                             "stored_bytes", "compression_ratio",
                                                             "oracle")},
            "memory_bytes": limit, "variants": {v: CACHE_VARIANTS[v] for v in variants},
            "summary": summary, "runs": runs}


def speedup_case(a, env):
    shape = QUICK["shape"] if a.quick else [512, 512, 512]
    shard = QUICK["shard"] if a.quick else SHARD
    chunk = QUICK["chunk"] if a.quick else [64, 64, 64]
    man = volumes.ensure_volume(os.path.join(a.data_dir, "vol-%d-%d-%d.zarr" % tuple(shape)),
                                    shape, chunk, jobs=a.gen_jobs)
    layout = [] if not a.quick else [f"output.shard=[{', '.join(map(str, shard))}]",
                                     f"output.chunk=[{', '.join(map(str, chunk))}]"]
    kinds = [("1x1", 1, 1, []), ("2x1", 2, 1, []), ("1x2", 1, 2, [])]
    if not a.no_diagnostics and not a.quick:
        kinds += [("1x1-nosync", 1, 1, ["output.fsync=false"]),
                  ("2x1-nosync", 2, 1, ["output.fsync=false"]),
                  ("1x2-nosync", 1, 2, ["output.fsync=false"]),
                  ("1x1-reread", 1, 1, ["limits.memory_bytes=64MiB"])]
    pairs = 1 if a.quick else a.pairs
    runs = []
    for rnd in range(pairs + 1):     # round 0 is the warm-up
        for name, r, t, sets in kinds:
            if a.wait_idle:
                machine.wait_idle(a.wait_idle)
            launcher = env["plain"] if r == 1 else env["mpirun"]
            rec = sm_launch.run_convert(launcher, a.shardmill, a.config, man, r, t, env["work"],
                                 f"sp-{name}-{rnd}", shard, layout + sets,
                                 check_values=not a.no_value_check)
            rec["kind"] = name
            rec["round"] = rnd
            rec["warmup"] = rnd == 0
            runs.append(rec)
            results.log(f"speedup {'warm-up' if rnd == 0 else f'round {rnd}'} {name:10s}: ok={rec['ok']}"
                   f" marker {rec['marker_s']} s, wall {rec['wall_s']:.2f} s, engine total "
                   f"{results.timing(rec, 'total')} ms, other load {rec['other_busy_cores']} cores"
                   + ("" if rec["ok"] else f" PROBLEMS {rec['problems']}"))
    stages = ("total", "open", "hydrate", "decode", "process", "allreduce", "write", "scan_wall")
    summary = {}
    for name, r, t, sets in kinds:
        rs = [x for x in runs if x["kind"] == name and not x["warmup"]]
        summary[name] = {
            "ranks": r, "threads": t, "sets": sets, "runs": len(rs),
            "all_ok": all(x["ok"] for x in rs),
            "marker_s": results.summarize([x["marker_s"] for x in rs]),
            "wall_s": results.summarize([x["wall_s"] for x in rs]),
            "timing_ms_max": {k: results.med([results.timing(x, k) for x in rs]) for k in stages},
            "timing_ms_mean": {k: results.med([results.timing(x, k, "mean") for x in rs]) for k in stages},
            "cpu_s": results.med([x["cpu_s"] for x in rs]),
            "peak_rss_bytes": max([max((y.get("maxrss_bytes") or 0) for y in x["per_rank"])
                                   for x in rs] or [0]),
            "other_busy_cores": results.summarize([x["other_busy_cores"] for x in rs]),
            "output_checksum": sorted({x.get("output_checksum") for x in rs}, key=str)}
    base = (summary["1x1"]["marker_s"] or {}).get("median")
    targets = []
    for name in ("2x1", "1x2"):
        m = (summary[name]["marker_s"] or {}).get("median")
        s = round(base / m, 3) if base and m else None
        summary[name]["speedup_vs_1x1"] = s
        targets.append({"what": f"{name} speedup vs 1x1 (time to completion marker, median)",
                        "value": s, "target": f">= {SPEEDUP_TARGET}",
                        "pass": s is not None and s >= SPEEDUP_TARGET})
    for name in ("2x1-nosync", "1x2-nosync"):
        if name in summary:
            b = (summary["1x1-nosync"]["marker_s"] or {}).get("median")
            m = (summary[name]["marker_s"] or {}).get("median")
            summary[name]["speedup_vs_1x1-nosync"] = round(b / m, 3) if b and m else None
    checks = {x.get("output_checksum") for x in runs}
    return {"case": "speedup", "volume": {k: man[k] for k in ("path", "params", "voxels",
                                                              "stored_bytes", "compression_ratio",
                                                              "oracle")},
            "order": [k[0] for k in kinds], "pairs": pairs, "summary": summary,
            "targets": targets, "output_checksums_equal": len(checks) == 1, "runs": runs}


def table(res):
    lines = []
    if res["case"] == "memory":
        lines.append("| variant | ranks × threads | peak RSS per rank (max) MiB | report VmHWM MiB "
                     "| cache peak MiB | RSS at end of scan MiB | peak in | wall s (median) | "
                     "≤ 320 MiB |")
        lines.append("|---|---|---:|---:|---:|---:|---|---:|---|")
        for s in res["summary"]:
            lines.append(
                f"| {s['variant']} | {s['ranks']}×{s['threads']} | "
                f"{(s['peak_rss_per_rank_max_bytes'] or 0) / MIB:.1f} | "
                f"{s['report_peak_rss_bytes'] / MIB:.1f} | {s['cache_peak_bytes'] / MIB:.1f} | "
                f"{s['rss_at_scan_end_mib']:.1f} | {', '.join(s['peak_phase'])} | "
                f"{(s['wall_s'] or {}).get('median', 0):.1f} | "
                f"{'PASS' if s['pass'] else 'FAIL'} |")
    else:
        lines.append("| run | marker s median (min–max) | speedup | total | open | hydrate | "
                     "decode | process | allreduce | write | scan wall | peak RSS MiB | "
                     "other load (cores) |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, s in res["summary"].items():
            m = s["marker_s"] or {}
            t = s["timing_ms_max"]
            sp = s.get("speedup_vs_1x1") or s.get("speedup_vs_1x1-nosync")
            lines.append(
                f"| {name} | {m.get('median', 0):.2f} ({m.get('min', 0):.2f}–{m.get('max', 0):.2f})"
                f" | {'' if sp is None else f'{sp:.2f}×'} | "
                + " | ".join(f"{(t[k] or 0):.0f}" for k in ("total", "open", "hydrate", "decode",
                                                           "process", "allreduce", "write",
                                                           "scan_wall"))
                + f" | {s['peak_rss_bytes'] / MIB:.0f} | "
                  f"{(s['other_busy_cores'] or {}).get('median', 0):.2f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("case", choices=["memory", "speedup", "all", "table"])
    ap.add_argument("result", nargs="?", help="table: a result JSON")
    ap.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                         "shardmill"))
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "scaling-convert.yaml"))
    ap.add_argument("--mpirun", default="mpirun")
    sm_launch.add_mpirun_args(ap)
    ap.add_argument("--data-dir", default=os.path.join(REPO, "data", "scaling"))
    ap.add_argument("--work", default=None,
                    help="directory for outputs while they are checked (default: data-dir/work)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"),
                    help="result directory (default bench/results)")
    ap.add_argument("--quick", action="store_true", help="CI smoke profile (tiny volume)")
    ap.add_argument("--repeats", type=int, default=2, help="memory: rounds (default 2)")
    ap.add_argument("--pairs", type=int, default=5, help="speedup: measured rounds (default 5)")
    ap.add_argument("--memory-bytes", default="256MiB")
    ap.add_argument("--cache", default="default,off,32MiB",
                    help="memory: cache variants (default,off,32MiB)")
    ap.add_argument("--no-diagnostics", action="store_true")
    ap.add_argument("--no-value-check", action="store_true",
                    help="skip the independent decode of every output (not for recorded runs)")
    ap.add_argument("--wait-idle", type=float, default=0,
                    help="before each run wait up to this many s for other load < 0.5 cores")
    ap.add_argument("--gen-jobs", type=int, default=2)
    ap.add_argument("--omp-wait-policy", default=None)
    a = ap.parse_args()
    if a.case == "table":
        import json
        with open(a.result) as f:
            print(table(json.load(f)))
        return 0
    a.cache = [c for c in a.cache.split(",") if c]
    a.shardmill = os.path.abspath(a.shardmill)
    a.config = os.path.abspath(a.config)
    if a.quick:
        a.repeats = 1
    tmp = None
    if a.quick and a.work is None:
        tmp = a.work = tempfile.mkdtemp(prefix="bigconvert-quick-")
    work = a.work or os.path.join(a.data_dir, "work")
    os.makedirs(work, exist_ok=True)
    tc = machine.toolchain(a.shardmill, a.mpirun)
    machine.check_release(tc)
    spawn = sm_launch.build_spawn(work)
    extra = sm_launch.mpirun_args(a.mpirun_args)
    env = {"work": work, "plain": sm_launch.Launcher("plain", spawn, a.mpirun, extra,
                                              omp_wait_policy=a.omp_wait_policy),
           "mpirun": sm_launch.Launcher("mpirun", spawn, a.mpirun, extra,
                                 omp_wait_policy=a.omp_wait_policy)}
    cases = ["memory", "speedup"] if a.case == "all" else [a.case]
    bad = 0
    for case in cases:
        t0 = time.monotonic()
        stamp = results.utc_stamp()
        meta = {"benchmark": f"issue 5 {case}", "driver": "scaling/bigconvert.py",
                "argv": sys.argv, "quick": a.quick, "started_utc": stamp,
                "machine": machine.machine(), "toolchain": tc, "launchers": {
                    k: env[k].describe() for k in ("plain", "mpirun")},
                "config": os.path.relpath(a.config, REPO), "work_fs": machine.fs_type(work),
                "noise_note": "shared 2-core VM: other developers' builds and tests ran at the "
                              "same time; every run records other_busy_cores (CPU time of other "
                              "processes during the run / wall) and busy_cores_before"}
        res = memory_case(a, env) if case == "memory" else speedup_case(a, env)
        res = {**meta, **res, "elapsed_s": round(time.monotonic() - t0, 1),
               "machine_end": machine.machine()}
        failed = [r for r in res["runs"] if not r["ok"]]
        bad += len(failed)
        res["failed_runs"] = len(failed)
        path = results.unique_path(a.out, f"convert-{case}-{stamp}" + ("-quick" if a.quick else ""),
                              ".json")
        results.write_json(path, res)
        print(table(res))
        for t in res.get("targets", []):
            print(f"{'PASS' if t['pass'] else 'FAIL'} {t['what']}: {t['value']} ({t['target']})")
        for s in res["summary"] if case == "memory" else []:
            print(f"{'PASS' if s['pass'] else 'FAIL'} memory {s['variant']} {s['ranks']}x"
                  f"{s['threads']}: {(s['peak_rss_per_rank_max_bytes'] or 0) / MIB:.1f} MiB "
                  f"({s['target']})")
        print(f"{case}: {len(res['runs'])} runs, {len(failed)} failed; result {path}")
        for r in failed:
            print(f"FAILED {r['tag']}: {r['problems']}")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
