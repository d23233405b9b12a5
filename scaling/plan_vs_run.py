#!/usr/bin/python3
"""`shardmill plan`'s estimate against measured runs on this machine (issue 34 item 5;
docs/BENCHMARKS.md "Plan against run", docs/SLURM.md "Sizing a large run" quote its table).

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/plan_vs_run.py \\
        --shardmill build/release/jobs/shardmill [--quick] [--only TAG,...] [--rates FILE] \\
        [--work DIR] [--out DIR] [--strict] [--prepare]

Configurations (the full profile, 15; --quick, 6 at small sizes):
  w5-RxT        configs/scaling-convert.yaml (scale /4095 -> float32, shards [64,256,256] of 64³,
                zstd 3, fsync) on a CT-like 512³ uint16 Zarr v3 volume (scaling/make_volume.py),
                strong points 1×1, 1×2, 2×1, 2×2, 4×1, 4×2
  w8-auto-RxT   the same job, output.shard/chunk auto, 1×2 and 2×1
  w8-small-RxT  the same job, W2's [8,32,32] shards of [2,16,16], 1×2 and 2×1
  w7-tiff-ome   W7: the head CT (data/ct/matrix.dat) as a TIFF stack -> percentile [1,99]
                float32 OME-Zarr, 2 levels, 1×2 (bench/ingest/w7.py's sources)
  w7-hdf5-ome   the same from the CT as an HDF5 dataset (chunks [8,64,64], gzip 4)
  pct-reread    percentile [1,99] -> float32 of the 512³ volume with limits.memory_bytes 192MiB:
                the input (256 MiB) does not fit the kept-input share, so it is read again
  ome-u8-1024   a uint8 OME pyramid (scale /4095, levels auto) of a 1024³ volume, 2×1
                (--ome-size N: of N³); the volumes are written once into --work and kept
  scan-http     a scan (64³ tiles, 65,536 bins) of the 512³ volume served by a real nginx on
                127.0.0.1 (tests/lib/shardmill_test/nginx_server.py, as tests/http), 1×2
--quick: 128³ volumes and the 24×64×64 CT-like phantom, six configurations (w5 1×1 and 2×1,
w8-small 1×2, pct-reread, w7-tiff-ome, scan-http); < 60 s; the ctest `bench.plan_vs_run.quick`.

Each configuration: `plan --json` with the run's --set, --ranks and --threads (the estimate),
then --repeats runs (3; --quick: 1), the least wall time kept as scaling/calibrate keeps its
least: one plain process for one rank, else mpirun --oversubscribe --bind-to none --mca
pml ob1; each rank runs under a small wrapper that records its whole process's peak RSS
(wait4's ru_maxrss). Measured: wall = launch -> exit less the wrapper's own cost (the least of
three of its runs around /bin/true: a Python start, ~25 ms quiet, which no job pays and which
made a 0.3 s job look 8 % slower), every rank's peak RSS, the output tree's
bytes (the sum of its files' sizes) and its file count (the HDF5 export's file, when there is
one, is not among them: plan's output_bytes and files are the Zarr output's); beside them, in
the JSON, the run's process tree's CPU seconds, other work's cores and the vCPUs' steal over
the run, which tell work per byte from waiting when the seconds are off. Errors are
(estimate - measured) / measured. The load average before and after each run is recorded.
Every output is kept until the end (ext4 without a journal slows creates after a many-file
deletion: docs/BENCHMARKS.md W8), then deleted.

Checks: output bytes within ±10 %, files exact, the RSS bound >= every rank's peak (and, reported,
<= 1.3× it); the full profile also reports seconds within ±25 % and a median |error| <= 15 %
(issue 34's bar on a quiet machine). --quick (and --strict) exit 1 when a check fails; seconds
are checked with --strict only (never by --quick: the CI machine is not quiet).
Writes OUT/plan-vs-run-<stamp>.json (rows, checks, machine, commit) and the same stem .md (the
table); OUT is bench/results by default.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

from shardmill_test import REPO
from shardmill_test import machine
from shardmill_test import results
from shardmill_test import volumes as mv
from shardmill_test.nginx_server import NginxServer
from shardmill_test.ranks import session_env
from shardmill_test import script_module

w7 = script_module.load("bench/ingest/w7.py")  # the CT as a TIFF stack and an HDF5 dataset

PY = "/usr/bin/python3"
MiB = 2**20

# Each rank runs under this: exec the command in a child, write the child's peak RSS (bytes).
RSS_WRAP = r"""
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
with open(os.path.join(sys.argv[1], "rss." + rank), "w") as f:
    f.write(str(ru.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
"""


def configurations(quick):
    """(tag, kind, ranks, threads, extra) in run order; kind names the input and job."""
    if quick:
        return [("w5-1x1", "w5", 1, 1, []), ("w5-2x1", "w5", 2, 1, []),
                ("w8-small-1x2", "w5", 1, 2, ["output.shard=[8,32,32]", "output.chunk=[2,16,16]"]),
                ("pct-reread-1x2", "pct", 1, 2, []), ("w7-tiff-ome-1x2", "tiff", 1, 2, []),
                ("scan-http-1x2", "http", 1, 2, [])]
    c = [(f"w5-{r}x{t}", "w5", r, t, []) for r, t in
         [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2)]]
    for r, t in [(1, 2), (2, 1)]:
        c.append((f"w8-auto-{r}x{t}", "w5", r, t, ["output.shard=auto", "output.chunk=auto"]))
    for r, t in [(1, 2), (2, 1)]:
        c.append((f"w8-small-{r}x{t}", "w5", r, t,
                  ["output.shard=[8,32,32]", "output.chunk=[2,16,16]"]))
    c += [("w7-tiff-ome-1x2", "tiff", 1, 2, []), ("w7-hdf5-ome-1x2", "hdf5", 1, 2, []),
          ("pct-reread-1x2", "pct", 1, 2, []), ("ome-u8-{ome}-2x1", "ome8", 2, 1, []),
          ("scan-http-1x2", "http", 1, 2, [])]
    return c


def children_cpu_s():
    """User+sys CPU seconds of this process's waited-for children (their children included)."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c.ru_utime + c.ru_stime


def proc_stat_s():
    """(the machine's busy CPU seconds, its steal seconds) from /proc/stat's first line."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(v[:8]) - v[3] - v[4]) / hz, (v[7] if len(v) > 7 else 0) / hz


def write_yaml(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def job_of(a, kind, tag, inputs, http_url):
    """(config path, --set list, output dir or None) for one configuration."""
    out = os.path.join(a.work, f"{tag}.zarr")
    sets = [f"output.path={out}", "output.exists=overwrite"]
    scaling = os.path.join(REPO, "configs", "scaling-convert.yaml")
    if kind == "w5":
        return scaling, [f"input.store={inputs['vol']}"] + sets, out
    if kind == "pct":
        # the 512³ input is 256 MiB decoded: it does not fit half of 192 MiB, so the write pass
        # reads it again (quick: 128³ = 4 MiB against 6 MiB, a budget no whole process fits: a
        # knob that makes the input re-read, not a ceiling, limits.memory_ceiling false)
        mem = "6MiB, memory_ceiling: false" if a.quick else "192MiB"
        cfg = write_yaml(os.path.join(a.work, "pct.yaml"), [
            "job: convert", f"input: {{store: {inputs['vol']}, cache: {{enabled: true, "
            "max_bytes: 32MiB}}", "normalize: {mode: percentile, lo: 1, hi: 99}",
            "output: {path: out.zarr, shard: [64, 256, 256], chunk: [64, 64, 64], "
            "codec: {name: zstd, level: 3}, fsync: true}", f"limits: {{memory_bytes: {mem}}}",
            "progress: false"])
        return cfg, sets, out
    if kind in ("tiff", "hdf5"):
        ct = inputs["ct"]
        lines = ["job: convert", "input:", f"  store: {ct[kind]}", f"  format: {kind}"]
        if kind == "hdf5":
            lines += ["  hdf5: {dataset: /exchange/data}"]
        lines += ["  spacing: [1.5, 0.957, 0.957]", "  unit: millimeter",
                  "normalize: {mode: percentile, lo: 1, hi: 99}",
                  "output: {path: out.zarr, ome: {levels: 2, method: mean}}",
                  "limits: {memory_bytes: 2GiB}", "progress: false"]
        return write_yaml(os.path.join(a.work, f"{kind}.yaml"), lines), sets, out
    if kind == "ome8":
        cfg = write_yaml(os.path.join(a.work, "ome8.yaml"), [
            "job: convert", f"input: {{store: {inputs['big']}, cache: {{enabled: true, "
            "max_bytes: 256MiB}}", "normalize: {mode: scale, divisor: 4095}",
            "output: {path: out.zarr, dtype: uint8, ome: {levels: auto, method: mean}, "
            "fsync: true}", "limits: {memory_bytes: 2GiB}", "progress: false"])
        return cfg, sets, out
    if kind == "http":
        name = os.path.basename(inputs["vol"])
        cfg = write_yaml(os.path.join(a.work, "scan-http.yaml"), [
            "job: scan", f"input: {{store: {http_url}/{name}, cache: {{enabled: true, "
            "max_bytes: 256MiB}}", "tile: [64, 64, 64]", "passes: 1",
            "histogram: {bins: 65536, range: [0, 65536]}", "progress: false"])
        return cfg, [], None
    raise ValueError(kind)


def tree(path):
    """(bytes, files) of a directory tree (file sizes; a missing tree is (0, 0))."""
    nbytes = nfiles = 0
    for d, _, files in os.walk(path):
        for f in files:
            nbytes += os.path.getsize(os.path.join(d, f))
            nfiles += 1
    return nbytes, nfiles


def pct(est, meas):
    return None if not meas else round((est - meas) / meas * 100, 1)


def point(a, cfg, sets, out, tag, kind, ranks, threads):
    rep = os.path.join(a.work, f"{tag}.report.json")
    argv = sets + [f"parallel.threads={threads}"]
    argv = [x for s in argv for x in ("--set", s)]
    p = subprocess.run([a.shardmill, "plan", cfg, "--ranks", str(ranks), "--threads",
                        str(threads), "--json"] + argv + (["--rates", a.rates] if a.rates else []),
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"plan_vs_run: {tag}: plan failed ({p.returncode}): {p.stderr.strip()}")
    est = json.loads(p.stdout)["estimate"]
    rssdir = os.path.join(a.work, f"{tag}.rss")
    env = session_env(dict(os.environ, OMP_NUM_THREADS=str(threads), OMPI_ALLOW_RUN_AS_ROOT="1",
                           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))  # a session dir of its own
    launcher = [] if ranks == 1 else [a.mpirun, "--oversubscribe", "--bind-to", "none", "--mca",
                                      "pml", "ob1", "-np", str(ranks)]
    # the least wall time of --repeats runs, as scaling/calibrate measures its rates (the
    # machine's speed moves by 10-20 % from one minute to the next); a repeat writes an output of
    # its own (out.rN, deleted with the others at the end), and the peak RSS is the largest
    best, walls, rss = None, [], []
    for i in range(max(1, a.repeats)):
        again = []
        if out and i > 0:
            again = ["--set", f"output.path={out}.r{i}"]
            a.repeat_outs.append(f"{out}.r{i}")
        shutil.rmtree(rssdir, ignore_errors=True)
        os.makedirs(rssdir)
        load0 = os.getloadavg()
        cpu0, stat0 = children_cpu_s(), proc_stat_s()
        t0 = time.monotonic()
        r = subprocess.run(launcher + [PY, a.wrap, rssdir, a.shardmill, "run", cfg, "-q",
                                       "--report", rep] + argv + again,
                           env=env, capture_output=True, text=True)
        wall = max(0.0, time.monotonic() - t0 - a.wrapper_s)
        load1 = os.getloadavg()
        cpu = children_cpu_s() - cpu0
        stat1 = proc_stat_s()
        if r.returncode != 0:
            raise SystemExit(f"plan_vs_run: {tag}: run failed ({r.returncode}): "
                             f"{r.stderr.strip()[-2000:]}")
        got = [int(open(os.path.join(rssdir, f)).read()) for f in sorted(os.listdir(rssdir))]
        if len(got) != ranks:
            raise SystemExit(f"plan_vs_run: {tag}: {len(got)} rank RSS records for {ranks} ranks")
        rss = [max(x, y) for x, y in zip(got, rss)] if rss else got
        walls.append(round(wall, 3))
        if best is None or wall < best[0]:
            best = (wall, load0, load1, cpu, stat0, stat1)
    wall, load0, load1, cpu, stat0, stat1 = best
    if kind == "pct":  # the configuration's point: the write pass reads the input again
        with open(rep) as f:
            mem = json.load(f)["memory"]
        if est["assumes"]["kept_input"] or mem.get("kept_input") is not False:
            raise SystemExit(f"plan_vs_run: {tag}: the input was kept, not re-read: "
                             f"plan {est['assumes']['kept_input']}, run {mem}")
    nbytes, nfiles = tree(out) if out else (0, 0)
    peak = max(rss)
    row = {"tag": tag, "ranks": ranks, "threads": threads,
           "estimated_s": round(est["seconds"], 2), "measured_s": round(wall, 2),
           "measured_all_s": walls,
           "seconds_error_pct": pct(est["seconds"], wall),
           "rss_bound_bytes": est["peak_rss_bytes_per_rank"], "rss_bytes_per_rank": rss,
           "rss_bound_over_peak": round(est["peak_rss_bytes_per_rank"] / peak, 2),
           "output_bytes_est": est["output_bytes"], "output_bytes": nbytes,
           "bytes_error_pct": pct(est["output_bytes"], nbytes) if out else 0.0,
           "files_est": est["files"], "files": nfiles,
           "terms_s": est["terms_s"], "rss_parts_bytes": est["rss_parts_bytes"],
           "kept_input": est["assumes"]["kept_input"], "two_pass": est["assumes"]["two_pass"],
           "wrapper_s": round(a.wrapper_s, 3),
           "loadavg_before": [round(x, 2) for x in load0],
           "loadavg_after": [round(x, 2) for x in load1],
           # where the wall time went: the run's process tree's CPU seconds (user+sys, every
           # rank, the launcher's), the machine's other work's cores over the run and the time
           # the hypervisor took the vCPUs (steal), to tell work per byte from waiting
           "cpu_s": round(cpu, 2),
           "other_cores": round(max(0.0, stat1[0] - stat0[0] - cpu) / wall, 2) if wall else None,
           "steal_s": round(stat1[1] - stat0[1], 2)}
    row["checks"] = {
        "bytes_within_10pct": abs(row["bytes_error_pct"]) <= 10,
        "files_exact": row["files_est"] == row["files"],
        "rss_bound_covers_every_rank": est["peak_rss_bytes_per_rank"] >= peak,
        "rss_bound_within_1_3x": est["peak_rss_bytes_per_rank"] <= 1.3 * peak,
        "seconds_within_25pct": abs(row["seconds_error_pct"]) <= 25}
    print(json.dumps({k: row[k] for k in ("tag", "estimated_s", "measured_s", "seconds_error_pct",
                                          "rss_bound_over_peak", "bytes_error_pct", "files_est",
                                          "files", "cpu_s", "other_cores", "steal_s")}),
          flush=True)
    return row


def wrapper_cost(wrap, work):
    """The RSS wrapper's own wall seconds (its Python start and the fork), the least of three of
    its runs around /bin/true: taken off each run's wall, which measures the job."""
    d = os.path.join(work, "wrap-cost.rss")
    os.makedirs(d, exist_ok=True)
    best = None
    for _ in range(3):
        t0 = time.monotonic()
        subprocess.run([PY, wrap, d, "/bin/true"], check=True)
        dt = time.monotonic() - t0
        best = dt if best is None else min(best, dt)
    shutil.rmtree(d, ignore_errors=True)
    return best


def table(rows):
    lines = ["| configuration | ranks × threads | estimated s | measured s | error | RSS bound MiB"
             " | peak RSS MiB (each rank) | bound / peak | output MB est / measured | error "
             "| files est / measured |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for x in rows:
        each = ", ".join(str(round(v / MiB)) for v in x["rss_bytes_per_rank"])
        lines.append(
            f"| {x['tag']} | {x['ranks']}×{x['threads']} | {x['estimated_s']:.2f} | "
            f"{x['measured_s']:.2f} | {x['seconds_error_pct']:+.0f}% | "
            f"{x['rss_bound_bytes'] / MiB:.0f} | {each} | {x['rss_bound_over_peak']:.2f}× | "
            f"{x['output_bytes_est'] / 1e6:.1f} / {x['output_bytes'] / 1e6:.1f} | "
            f"{x['bytes_error_pct']:+.1f}% | {x['files_est']} / {x['files']} |")
    return lines


def summary(rows):
    errs = [abs(x["seconds_error_pct"]) for x in rows]
    return {"configurations": len(rows),
            "median_abs_seconds_error_pct": round(statistics.median(errs), 1) if errs else None,
            "max_abs_seconds_error_pct": max(errs) if errs else None,
            "median_abs_bytes_error_pct":
                round(statistics.median(abs(x["bytes_error_pct"]) for x in rows), 1),
            "rss_bound_over_peak": [min(x["rss_bound_over_peak"] for x in rows),
                                    max(x["rss_bound_over_peak"] for x in rows)],
            "failed": {k: [x["tag"] for x in rows if not x["checks"][k]]
                       for k in rows[0]["checks"]} if rows else {}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None,
                    help="runs of each configuration, the least wall time kept (default 3; "
                         "--quick: 1)")
    ap.add_argument("--only", default=None, help="comma-separated tags (or tag prefixes)")
    ap.add_argument("--rates", default=None)
    ap.add_argument("--ome-size", type=int, default=1024,
                    help="the uint8 OME pyramid's volume side (default 1024)")
    ap.add_argument("--work", default=os.path.join(REPO, "data", "plan_vs_run"))
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--prepare", action="store_true",
                    help="write the inputs (volumes, the CT's TIFF and HDF5) into --work and stop")
    ap.add_argument("--strict", action="store_true",
                    help="also fail on the seconds (±25 %%, median <= 15 %%) and RSS <= 1.3×")
    a = ap.parse_args()
    if a.repeats is None:
        a.repeats = 1 if a.quick else 3
    a.repeat_outs = []
    a.shardmill = os.path.abspath(a.shardmill)
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    a.wrap = os.path.join(a.work, "rss_wrap.py")
    with open(a.wrap, "w") as f:
        f.write(RSS_WRAP)
    a.wrapper_s = wrapper_cost(a.wrap, a.work)
    todo = [(t.format(ome=a.ome_size), k, r, th, x) for t, k, r, th, x in
            configurations(a.quick)]
    if a.only:
        want = a.only.split(",")
        todo = [c for c in todo if any(c[0].startswith(w) for w in want)]
    kinds = {c[1] for c in todo}
    size = 128 if a.quick else 512
    inputs = {"vol": os.path.join(a.work, f"vol-{size}.zarr")}
    if kinds & {"w5", "pct", "http"}:
        mv.ensure_volume(inputs["vol"], (size,) * 3, jobs=2, quiet=a.quick)
    if "ome8" in kinds:
        inputs["big"] = os.path.join(a.work, f"vol-{a.ome_size}.zarr")
        mv.ensure_volume(inputs["big"], (a.ome_size,) * 3, jobs=2)
    if kinds & {"tiff", "hdf5"}:
        inputs["ct"] = w7.ct_sources(a.work, a.quick)
    if a.prepare:
        print(f"plan_vs_run: inputs ready in {a.work}", file=sys.stderr)
        return 0
    rows, outs = [], []
    t_start = time.monotonic()
    srv = NginxServer(a.work) if "http" in kinds else None
    try:
        if srv is not None:
            srv.__enter__()
        for tag, kind, r, t, extra in todo:
            cfg, sets, out = job_of(a, kind, tag, inputs, srv.url if srv else None)
            if out:
                outs.append(out)
            rows.append(point(a, cfg, sets + extra, out, tag, kind, r, t))
    finally:
        if srv is not None:
            srv.__exit__(None, None, None)
        for o in outs + a.repeat_outs:
            shutil.rmtree(o, ignore_errors=True)
    s = summary(rows)
    s["elapsed_s"] = round(time.monotonic() - t_start, 1)
    md = table(rows)
    md.append("")
    md.append(f"median |seconds error| {s['median_abs_seconds_error_pct']}% over "
              f"{s['configurations']} configurations (max {s['max_abs_seconds_error_pct']}%); "
              f"RSS bound / peak {s['rss_bound_over_peak'][0]}–{s['rss_bound_over_peak'][1]}×; "
              f"load average {rows[0]['loadavg_before'][0] if rows else '-'} at the start, "
              f"{rows[-1]['loadavg_after'][0] if rows else '-'} at the end")
    print("\n".join(md))
    doc = {"profile": "quick" if a.quick else "full", "rows": rows, "summary": s,
           "rates": a.rates or "built in", "commit": machine.git_commit(),
           "machine": machine.machine(), "utc": results.utc_stamp()}
    os.makedirs(a.out, exist_ok=True)
    path = results.unique_path(a.out, f"plan-vs-run-{doc['utc']}", ".json")
    results.write_json(path, doc)
    with open(path[:-5] + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"plan_vs_run: wrote {path} and {path[:-5]}.md", file=sys.stderr)
    hard = ["bytes_within_10pct", "files_exact", "rss_bound_covers_every_rank"]
    if a.strict:
        hard += ["rss_bound_within_1_3x", "seconds_within_25pct"]
    bad = {k: v for k, v in s["failed"].items() if k in hard and v}
    if a.strict and (s["median_abs_seconds_error_pct"] or 0) > 15:
        bad["median_seconds_error_le_15pct"] = [f"{s['median_abs_seconds_error_pct']}%"]
    if bad and (a.quick or a.strict):
        print(f"plan_vs_run: FAILED checks: {json.dumps(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
