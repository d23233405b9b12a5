#!/usr/bin/python3
"""W1 tiled-scan benchmark driver (SPEC §8 W1). Run with /usr/bin/python3.

Full profile (data/mri-crop.zarr from scripts/make-w1-input.sh; writes
bench/results/w1-<UTC>.json, never overwrites):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/scan_http/w1.py --build-dir /work/build-w1 [--pairs 5]

Smoke profile for CI (a synthetic [160,150,140] uint8 v3 array written by zarrita.js into the
output directory, the same ROI, tiles, passes and cache settings, 1 pair, the peer only in the
cache-on cases, one warm-up pair; ≲30 s):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/scan_http/w1.py --quick --shardmill BUILD/jobs/shardmill --out DIR

nginx (tests/lib/shardmill_test/nginx_server.py) serves the data directory on 127.0.0.1. For every case
(tile side 32 | 64) × (passes 1 | 8) × (encoded-object cache on | off) the driver runs fresh
`shardmill run` processes (job scan, ROI [0:128]³, 256-bin histogram over [0, 256), threads
auto; cache off through `--set input.cache.enabled=false`) and fresh zarrita.js peer processes
(bench/scan_http/peer_zarrita.mjs: FetchStore over the same server, zarr.get per tile, the same
histogram and checksums in JS): a warm-up round, then rounds over all cases (round-robin, so
machine noise spreads over every case), each round one shardmill-then-peer pair per case (ABAB
within a case). For each process it records its wall time and peak RSS (wait4 ru_maxrss,
through the bench/region_read/w3_spawn.c launcher), the in-process timings (shardmill report timing_ms,
the peer's own clock), the request counters (shardmill report io.requests/io.bytes and nginx's
access log for the same process) and the results. Every result
of every process is compared with the NumPy oracle (tests/lib/shardmill_test/scan_oracle.py; for the MRI the
volume comes from nibabel, for the synthetic array from the NumPy data written). Targets are
printed as pass/fail and recorded, but never change the exit status (benchmarks, never timed
tests); a wrong value, a failed process or a data error exits 1.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from shardmill_test import report_json
from shardmill_test import machine
from shardmill_test import results
from shardmill_test import scan_oracle
from shardmill_test.nginx_server import NginxServer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

MIB = 1 << 20
ROI = ([0, 0, 0], [128, 128, 128])
BINS, LO, HI = 256, 0.0, 256.0
TILES = (32, 64)
PASSES = (1, 8)
QUICK_SHAPE = (160, 150, 140)
META_NAMES = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")
# SPEC §8 W1 targets (see evaluate_targets)
WALL_TARGET_MS = 20.0
SPEEDUP_TARGET = 10.0
RSS_TARGET = 32 * MIB
META_PER_OPEN = 2


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_text(argv, cwd=None):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (p.stdout or p.stderr).strip() if p.returncode == 0 else None


SPAWN = None  # the compiled bench/region_read/w3_spawn.c launcher (shared by W1, W2 and W3)


def build_spawn(work):
    global SPAWN
    exe = os.path.join(work, "w3_spawn")
    subprocess.run(["cc", "-O2", "-std=c11", "-o", exe,
                    os.path.join(HERE, "..", "region_read", "w3_spawn.c")], check=True)
    SPAWN = exe


def spawn(argv, out_path, err_path):
    """Runs argv as a fresh process through w3_spawn: (exit code, wall ms, peak RSS bytes,
    the launcher's result). Peak RSS is the child's wait4 ru_maxrss (see w3_spawn.c for why a
    launcher); the child's stdin is /dev/null, its stdout and stderr go to the two files."""
    res = out_path + ".spawn.json"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        subprocess.run([SPAWN, res] + argv, check=True, stdin=subprocess.DEVNULL, stdout=out,
                       stderr=err)
    with open(res) as f:
        r = json.load(f)
    code = r["exit_code"] if r["exited"] else -r["signal"]
    return code, r["wall_ns"] / 1e6, r["maxrss_kib"] * 1024, r


def nginx_counts(reqs):
    meta = [r for r in reqs if r["uri"].rsplit("/", 1)[-1] in META_NAMES]
    pay = [r for r in reqs if r not in meta]
    return {"metadata": len(meta), "payload": len(pay),
            "payload_404": sum(1 for r in pay if r["status"] == 404),
            "metadata_uris": sorted({r["uri"] for r in meta}),
            "bytes_payload": sum(r["bytes"] for r in pay if r["status"] in (200, 206)),
            "bytes_metadata": sum(r["bytes"] for r in meta if r["status"] in (200, 206)),
            "connections": len({r["conn"] for r in reqs}),
            "distinct_payload_uris": len({r["uri"] for r in pay})}


def scan_config(url, tile, passes):
    return (f"job: scan\n"
            f"input: {{store: {json.dumps(url)}, cache: {{enabled: true, max_bytes: 256MiB}}}}\n"
            f"roi: {{offset: {ROI[0]}, shape: {ROI[1]}}}\n"
            f"tile: [{tile}, {tile}, {tile}]\n"
            f"passes: {passes}\n"
            f"histogram: {{bins: {BINS}, range: [0, 256]}}\n"
            f"parallel: {{threads: auto}}\n")


def check_peer(res, want):
    bad = []
    for k in ("voxels", "tiles", "checksum", "weighted_checksum"):
        if res.get(k) != want[k]:
            bad.append(f"peer {k} = {res.get(k)!r}, oracle {want[k]!r}")
    h, wh = res.get("histogram", {}), want["histogram"]
    for k in ("bins", "underflow", "overflow", "nan"):
        if h.get(k) != wh[k]:
            bad.append(f"peer histogram.{k} = {h.get(k)!r}, oracle {wh[k]!r}")
    if [int(c) for c in h.get("counts", [])] != wh["counts"]:
        bad.append("peer histogram.counts differ from the oracle")
    return bad


class Bench:
    def __init__(self, a, work, srv, store_rel, arr):
        self.a = a
        self.work = work
        self.srv = srv
        self.url = f"{srv.url}/{store_rel}"
        self.arr = arr
        self.oracle = {}
        self.errors = []
        self.seq = 0
        meta = json.load(open(os.path.join(a.data_dir, store_rel, "zarr.json")))
        self.chunks = meta["chunk_grid"]["configuration"]["chunk_shape"]
        self.touched = scan_oracle.chunks_touched(ROI[0], ROI[1], self.chunks)

    def want(self, tile):
        if tile not in self.oracle:
            r = scan_oracle.scan(self.arr, ROI[0], ROI[1], [tile] * 3, BINS, LO, HI)
            r.pop("_rounded_up_to_last_bin")
            self.oracle[tile] = r
        return self.oracle[tile]

    def run_shardmill(self, tile, passes, cache):
        self.seq += 1
        base = os.path.join(self.work, f"sm-{self.seq:04d}")
        cfg = base + ".yaml"
        rep = base + ".report.json"
        with open(cfg, "w") as f:
            f.write(scan_config(self.url, tile, passes))
        argv = [self.a.shardmill, "run", cfg, "--report", rep]
        if not cache:
            argv[3:3] = ["--set", "input.cache.enabled=false"]
        rc, run = self.spawn_counted(argv, base)
        if rc != 0:
            err = open(base + ".err").read().strip()
            self.errors.append(f"shardmill tile {tile} passes {passes} cache {cache}: exit {rc}: "
                               f"{err[-300:]}")
            return run
        try:
            with open(rep) as f:
                report = report_json.with_int_checksums(json.load(f))
        except (OSError, ValueError) as e:
            self.errors.append(f"shardmill report {rep}: {e}")
            return run
        case = {"roi": ROI, "tile": [tile] * 3, "passes": passes, "hist": (BINS, LO, HI),
                "cache": cache}
        bad = scan_oracle.compare(report, self.want(tile), case, self.arr.shape, "uint8")
        run["values_ok"] = not bad
        if bad:
            self.errors += [f"shardmill tile {tile} passes {passes} cache {cache}: {b}"
                            for b in bad]
        io = report.get("io", {})
        run["report"] = {"requests": io.get("requests"), "bytes": io.get("bytes"),
                         "cache": io.get("cache"), "index_cache": io.get("index_cache"),
                         "timing_ms": report.get("timing_ms"), "memory": report.get("memory"),
                         "threads": report.get("threads")}
        rq = io.get("requests") or {}
        n = run["nginx"]
        run["counters_match_nginx"] = (rq.get("metadata") == n["metadata"]
                                       and (rq.get("payload", 0) + rq.get("index", 0))
                                       == n["payload"])
        if not run["counters_match_nginx"]:
            self.errors.append(f"shardmill tile {tile} passes {passes} cache {cache}: report "
                               f"requests {rq} != nginx metadata {n['metadata']} payload "
                               f"{n['payload']}")
        return run

    def spawn_counted(self, argv, base):
        """One process (stdout/stderr to base.out/.err) with its wall, peak RSS, CPU times and
        the nginx requests it made; returns its exit status and that record."""
        mark = self.srv.mark()
        rc, wall, rss, sp = spawn(argv, base + ".out", base + ".err")
        reqs = self.srv.requests(since=mark)
        return rc, {"wall_ms": wall, "peak_rss_bytes": rss, "exit": rc,
                    "nginx": nginx_counts(reqs), "utime_us": sp["utime_us"],
                    "stime_us": sp["stime_us"], "spawner_hwm_kib": sp["spawner_hwm_kib"]}

    def run_peer(self, tile, passes):
        self.seq += 1
        base = os.path.join(self.work, f"peer-{self.seq:04d}")
        argv = [self.a.node, os.path.join(HERE, "peer_zarrita.mjs"), self.url,
                "--offset", ",".join(map(str, ROI[0])), "--shape", ",".join(map(str, ROI[1])),
                "--tile", str(tile), "--passes", str(passes), "--bins", str(BINS),
                "--range", "0,256", "--mode", self.a.peer_mode]
        rc, run = self.spawn_counted(argv, base)
        if rc != 0:
            self.errors.append(f"peer tile {tile} passes {passes}: exit {rc}: "
                               f"{open(base + '.err').read().strip()[-300:]}")
            return run
        out = json.loads(open(base + ".out").read().strip().splitlines()[-1])
        want = dict(self.want(tile))
        if self.a.peer_mode == "roi":
            want["tiles"] = 1
        bad = check_peer(out["result"], want)
        run["values_ok"] = not bad
        self.errors += [f"peer tile {tile} passes {passes}: {b}" for b in bad]
        run["timing_ms"] = out["timing_ms"]
        run["requests"] = out["requests"]
        run["peer"] = out["peer"]
        run["node"] = out["node"]
        return run


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs, keyf):
    vals = [keyf(r) for r in runs]
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def timing(r, k):
    t = (r.get("report") or {}).get("timing_ms") or {}
    v = t.get(k)
    if isinstance(v, dict):  # {max, mean} over ranks
        v = v.get("max")
    return v


def case_summary(c):
    sm, pe = c["shardmill"], c["peer"]
    s = {"shardmill_wall_ms": summarize(sm, lambda r: r["wall_ms"]),
         "shardmill_peak_rss_bytes_max": max(r["peak_rss_bytes"] for r in sm),
         "peer_wall_ms": summarize(pe, lambda r: r["wall_ms"]),
         "peer_inproc_total_ms": summarize(pe, lambda r: (r.get("timing_ms") or {}).get("total")),
         "peer_peak_rss_bytes_max": max(r["peak_rss_bytes"] for r in pe) if pe else None}
    for k in ("total", "open", "hydrate", "decode", "process"):
        s[f"shardmill_{k}_ms"] = summarize(sm, lambda r, k=k: timing(r, k))
    last = sm[-1]
    s["nginx"] = last["nginx"]
    s["report_requests"] = (last.get("report") or {}).get("requests")
    s["report_cache"] = (last.get("report") or {}).get("cache")
    s["metadata_gets_per_pass"] = last["nginx"]["metadata"] / c["passes"]
    if pe:
        s["peer_nginx"] = pe[-1]["nginx"]
    return s


def evaluate_targets(cases, touched):
    """SPEC §8 W1 / the brief's targets: list of {name, value, limit, pass}."""
    out = []
    by = {(c["tile"], c["passes"], c["cache"]): c for c in cases}

    def add(name, value, limit, ok):
        out.append({"name": name, "value": value, "limit": limit, "pass": bool(ok)})

    for (tile, passes, cache), c in sorted(by.items()):
        if not cache:
            continue
        gets = [r["nginx"]["payload"] for r in c["shardmill"]]
        add(f"cache on, tile {tile}, {passes} pass(es): payload GETs = distinct chunks touched",
            sorted(set(gets)), touched, all(g == touched for g in gets))
    metas = [r["nginx"]["metadata"] for c in cases for r in c["shardmill"]]
    add("metadata GETs per open (one open per process)", max(metas) if metas else None,
        f"<= {META_PER_OPEN}", metas and max(metas) <= META_PER_OPEN)
    c = by.get((64, 1, True))
    if c:
        s = c["summary"]
        wall = s["shardmill_wall_ms"]["median"]
        add("tile 64, 1 pass, cache on: shardmill process wall (median ms)", round(wall, 2),
            f"<= {WALL_TARGET_MS}", wall <= WALL_TARGET_MS)
        out[-1]["min"] = round(s["shardmill_wall_ms"]["min"], 2)
        if s["peer_wall_ms"]:
            ratio = s["peer_wall_ms"]["median"] / wall
            add("tile 64, 1 pass: zarrita.js / shardmill process wall (medians)", round(ratio, 2),
                f">= {SPEEDUP_TARGET}", ratio >= SPEEDUP_TARGET)
            tot = s["shardmill_total_ms"]
            if tot and s["peer_inproc_total_ms"]:
                r2 = s["peer_inproc_total_ms"]["median"] / max(tot["median"], 1e-9)
                add("tile 64, 1 pass: zarrita.js / shardmill in-process total (medians; info)",
                    round(r2, 2), f">= {SPEEDUP_TARGET}", r2 >= SPEEDUP_TARGET)
    for tile in TILES:
        for cache in (True, False):
            c1, c8 = by.get((tile, 1, cache)), by.get((tile, 8, cache))
            if not (c1 and c8):
                continue
            d1, d8 = c1["summary"]["shardmill_decode_ms"], c8["summary"]["shardmill_decode_ms"]
            if d1 and d8:
                ratio = d8["median"] / max(d1["median"], 1e-9)
                add(f"tile {tile}, cache {'on' if cache else 'off'}: decode ms 8 passes / 1 pass "
                    "(medians)", round(ratio, 2), "<= 8", ratio <= 8.0)
                out[-1]["min_ratio"] = round(d8["min"] / max(d1["min"], 1e-9), 2)
    rss = [r["peak_rss_bytes"] for c in cases for r in c["shardmill"]]
    add("shardmill peak RSS, every run (MiB)", round(max(rss) / MIB, 2) if rss else None,
        f"<= {RSS_TARGET // MIB}", rss and max(rss) <= RSS_TARGET)
    return out


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def toolchain(a):
    build_dir, cache = machine.cmake_cache(a.shardmill)
    cc = cache.get("CMAKE_C_COMPILER", "cc")
    nginx = subprocess.run([os.environ.get("SM_NGINX", "/usr/sbin/nginx"), "-v"],
                           capture_output=True, text=True)
    cpu = machine.cpu_model()
    return {
        "shardmill": a.shardmill, "shardmill_version": run_text([a.shardmill, "--version"]),
        "build_dir": build_dir, "build_type": cache.get("CMAKE_BUILD_TYPE"),
        "c_flags_release": cache.get("CMAKE_C_FLAGS_RELEASE"),
        "c_compiler": cc, "c_compiler_version": (run_text([cc, "--version"]) or "").split("\n")[0],
        "node": run_text([a.node, "--version"]),
        "zarrita": machine.zarrita_version(),
        "nginx": (nginx.stderr or nginx.stdout).strip(),
        "python": platform.python_version(), "numpy": np.__version__,
        "kernel": platform.release(), "cpu": cpu, "nproc": os.cpu_count(),
        "commit": run_text(["git", "-C", REPO, "rev-parse", "HEAD"]),
        "tree_dirty": bool(run_text(["git", "--no-optional-locks", "-C", REPO, "status",
                                     "--porcelain", "--untracked-files=no"])),
    }


def perf_profile(b, out_dir, stamp, tile, passes, cache=True):
    """perf record -g of one shardmill run; returns the paths and the top of perf report."""
    perf = shutil.which("perf")
    if not perf:
        return {"error": "perf not found"}
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"w1-{stamp}-perf-t{tile}-p{passes}")
    cfg = base + ".yaml"
    with open(cfg, "w") as f:
        f.write(scan_config(b.url, tile, passes))
    argv = [perf, "record", "-F", "10000", "--call-graph", "dwarf,16384", "-o", base + ".data",
            "--", b.a.shardmill, "run", cfg, "--report", base + ".report.json"]
    if not cache:
        argv[argv.index("run") + 2:argv.index("run") + 2] = ["--set", "input.cache.enabled=false"]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-400:]}
    rep = subprocess.run([perf, "report", "--stdio", "--no-children", "-i", base + ".data",
                          "--sort", "dso,symbol", "--percent-limit", "0.5", "-g", "none"],
                         capture_output=True, text=True)
    with open(base + ".txt", "w") as f:
        f.write(rep.stdout)
    flat = [ln for ln in rep.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    return {"data": base + ".data", "report": base + ".txt", "top": flat[:25]}


def make_quick_data(data_dir, node):
    """Synthetic uint8 [160,150,140] v3 array (bytes + zstd 3, chunks 64³) written by zarrita."""
    z, y, x = np.indices(QUICK_SHAPE)
    rng = np.random.default_rng(1)
    arr = ((z * 3 + y * 5 + x * 7) % 200 + rng.integers(0, 56, QUICK_SHAPE)).astype(np.uint8)
    raw = os.path.join(data_dir, "quick.raw")
    arr.tofile(raw)
    spec = {"arrays": [{"dir": os.path.join(data_dir, "quick.zarr"), "raw": raw, "dtype": "uint8",
                        "shape": list(QUICK_SHAPE), "chunks": [64, 64, 64],
                        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                   {"name": "zstd", "configuration": {"level": 3,
                                                                      "checksum": False}}],
                        "fill": 0, "delete": []}]}
    sp = os.path.join(data_dir, "quick-spec.json")
    with open(sp, "w") as f:
        json.dump(spec, f)
    subprocess.run([node, os.path.join(REPO, "tests", "oracle", "gen_fixtures_v3.mjs"), sp],
                   check=True, stdout=subprocess.DEVNULL)
    os.unlink(raw)
    back = scan_oracle.load_array(os.path.join(data_dir, "quick.zarr"), node=node)
    if not np.array_equal(back, arr):
        raise SystemExit("w1: zarrita.js reads the synthetic array back differently")
    return "quick.zarr", arr


def fmt(s, k="median"):
    return "-" if not s else f"{s[k]:.1f}"


def print_table(cases):
    hdr = ("| tile | passes | cache | shardmill wall ms (med/min) | report total / decode ms | "
           "payload GETs | meta GETs | peak RSS MiB | zarrita.js wall ms | zarrita in-proc ms | "
           "peer GETs | speed-up (wall) |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for c in cases:
        s = c["summary"]
        w = s["shardmill_wall_ms"]
        pw = s["peer_wall_ms"]
        sp = (pw["median"] / w["median"]) if (w and pw) else None
        print(f"| {c['tile']}³ | {c['passes']} | {'on' if c['cache'] else 'off'} | "
              f"{fmt(w)} / {fmt(w, 'min')} | {fmt(s['shardmill_total_ms'])} / "
              f"{fmt(s['shardmill_decode_ms'])} | {s['nginx']['payload']} | "
              f"{s['nginx']['metadata']} | {s['shardmill_peak_rss_bytes_max'] / MIB:.1f} | "
              f"{fmt(pw)} | {fmt(s['peer_inproc_total_ms'])} | "
              f"{s.get('peer_nginx', {}).get('payload', '-')} | "
              f"{'-' if sp is None else f'{sp:.1f}×'} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardmill", help="the shardmill binary (default BUILD_DIR/jobs/shardmill)")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--data-dir", help="directory served by nginx (default: REPO/data; --quick: "
                    "a synthetic array in OUT)")
    ap.add_argument("--out", help="results directory (default bench/results; --quick: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="CI smoke profile")
    ap.add_argument("--pairs", type=int, help="ABAB pairs per case (default 5, --quick 1)")
    ap.add_argument("--node", default=shutil.which("node") or "node")
    ap.add_argument("--peer-mode", choices=["tile", "roi"], default="tile")
    ap.add_argument("--keep", action="store_true", help="keep the per-process files")
    ap.add_argument("--perf", action="store_true",
                    help="also perf record -g shardmill (tile 64 passes 1/8, tile 32 passes 8) "
                    "into OUT/tmp, with the top of perf report in the results")
    a = ap.parse_args(argv)
    a.shardmill = os.path.abspath(a.shardmill or os.path.join(a.build_dir, "jobs", "shardmill"))
    if not os.access(a.shardmill, os.X_OK):
        log(f"w1: error: {a.shardmill} is not executable (build the shardmill target)")
        return 1
    a.pairs = a.pairs or (1 if a.quick else 5)
    if a.out is None:
        a.out = tempfile.mkdtemp(prefix="sm-w1-quick-") if a.quick else os.path.join(
            REPO, "bench", "results")
    work = tempfile.mkdtemp(prefix="sm-w1-")
    try:
        build_spawn(work)
        if a.quick and a.data_dir is None:
            a.data_dir = os.path.join(a.out, "data")
            os.makedirs(a.data_dir, exist_ok=True)
            store_rel, arr = make_quick_data(a.data_dir, a.node)
            source = {"kind": "synthetic", "writer": "zarrita.js", "shape": list(QUICK_SHAPE)}
        else:
            a.data_dir = os.path.abspath(a.data_dir or os.path.join(REPO, "data"))
            store_rel = "mri-crop.zarr"
            nii = os.path.join(a.data_dir, "mri", "ch2better.nii.gz")
            if not os.path.exists(os.path.join(a.data_dir, store_rel, "zarr.json")):
                log(f"w1: error: {a.data_dir}/{store_rel} missing: run scripts/make-w1-input.sh")
                return 1
            arr = np.ascontiguousarray(scan_oracle.load_nifti_zyx(nii)[:256, :256, :256])
            manifest = os.path.join(a.data_dir, "w1-input.json")
            source = {"kind": "MRI ch2better (mricron-data), crop [0:256]^3", "nifti": nii}
            if os.path.exists(manifest):
                source["w1_input"] = json.load(open(manifest))
        tc = toolchain(a)
        load_start = loadavg()
        if load_start and load_start[0] > (os.cpu_count() or 1):
            log(f"w1: warning: load average {load_start[0]} > {os.cpu_count()} cores: timings "
                "will be noisy (values are still checked)")
        if tc["build_type"] and tc["build_type"] != "Release":
            log(f"w1: warning: {a.shardmill} is a {tc['build_type']} build (SPEC §8: Release)")
        log(f"w1: {'quick' if a.quick else 'full'} profile, {a.pairs} pair(s) per case, "
            f"store {store_rel}, shardmill {tc['shardmill_version']}")
        with NginxServer(a.data_dir) as srv:
            b = Bench(a, work, srv, store_rel, arr)
            order = [(t, p, c) for t in TILES for p in PASSES for c in (True, False)]
            cases = [{"tile": t, "passes": p, "cache": c, "shardmill": [], "peer": [],
                      "warmup": {}} for t, p, c in order]
            # Round-robin over the cases (so machine noise spreads over all of them), each
            # round one (shardmill, peer) pair per case: ABAB within a case, after a warm-up
            # round. --quick: one warm-up pair, the peer (no cache) only in cache-on cases.
            for rnd in range(-1, a.pairs):
                for k, c in enumerate(cases):
                    tile, passes, cache = c["tile"], c["passes"], c["cache"]
                    if rnd < 0:
                        if not a.quick or k == 0:
                            c["warmup"] = {"shardmill": b.run_shardmill(tile, passes, cache),
                                           "peer": b.run_peer(tile, passes)}
                        continue
                    c["shardmill"].append(b.run_shardmill(tile, passes, cache))
                    if cache or not a.quick:
                        c["peer"].append(b.run_peer(tile, passes))
                log(f"w1: round {rnd + 1}/{a.pairs} done" if rnd >= 0 else "w1: warm-up done")
            for c in cases:
                c["summary"] = case_summary(c)
                s = c["summary"]
                log(f"w1: tile {c['tile']} passes {c['passes']} cache "
                    f"{'on ' if c['cache'] else 'off'}: shardmill {fmt(s['shardmill_wall_ms'])} "
                    f"ms, zarrita.js {fmt(s['peer_wall_ms'])} ms, payload GETs "
                    f"{s['nginx']['payload']}")
            perf = {}
            if a.perf:
                stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
                for tile, passes in ((64, 1), (64, 8), (32, 8)):
                    # perf.data files are large: kept in OUT/tmp (git-ignored under bench/results)
                    perf[f"t{tile}-p{passes}"] = perf_profile(b, os.path.join(a.out, "tmp"),
                                                              stamp, tile, passes)
                    log(f"w1: perf t{tile} p{passes}: " + "\n  ".join(
                        perf[f"t{tile}-p{passes}"].get("top", [])[:12]))
            touched = b.touched
            want = {t: b.want(t) for t in TILES}
            errors = b.errors
        targets = evaluate_targets(cases, touched)
        doc = {"workload": "W1 tiled scan (SPEC §8)", "profile": "quick" if a.quick else "full",
               "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
               "host": platform.node(), "toolchain": tc, "input": source,
               "loadavg": {"start": load_start, "end": loadavg()},
               "store": store_rel, "roi": {"offset": ROI[0], "shape": ROI[1]},
               "histogram": {"bins": BINS, "range": [LO, HI]},
               "chunks_touched": touched, "pairs": a.pairs, "peer_mode": a.peer_mode,
               "oracle": {str(t): {k: want[t][k] for k in ("voxels", "tiles", "checksum",
                                                           "weighted_checksum")}
                          for t in TILES},
               "cases": cases, "targets": targets, "value_errors": errors, "perf": perf}
        path = results.write_report(a.out, "w1", doc)
        print_table(cases)
        print()
        for t in targets:
            extra = "".join(f", {k} {t[k]}" for k in ("min", "min_ratio") if k in t)
            print(f"{'PASS' if t['pass'] else 'FAIL'}  {t['name']}: {t['value']} "
                  f"(target {t['limit']}{extra})")
        print(f"\nresults: {path}")
        if errors:
            print(f"\nw1: {len(errors)} value/counter error(s):")
            for e in errors[:20]:
                print(f"  {e}")
            return 1
        print("w1: every result matched the oracle (shardmill and zarrita.js)")
        return 0
    finally:
        if a.keep:
            log(f"w1: per-process files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
