#!/usr/bin/python3
"""Runs `shardmill run` (job: scan) on generated configurations and compares every report field
that the NumPy oracle (scan_oracle.py) knows. Label `oracle` in ctest.

    check_scan.py --shardmill BIN --fixtures DIR [--arrays v2_uint8,v3_float32] [-j 2]
    check_scan.py --shardmill BIN --fixtures DIR --http --arrays v3_uint8,v2_int16
    check_scan.py --shardmill BIN --real-data DATA_DIR [--http]

Fixture mode: for each array of DIR/manifest.json (gen_fixtures.py) a matrix of ROIs (whole,
chunk-aligned, nonaligned, touching the array's end), tiles that do and do not divide the ROI
(and the default tile), 1 and 3 passes, threads 1 and 2 (whose results must be identical), the
type's default histogram and an explicit one. Compared: input.shape/dtype, roi, tile, passes,
result.voxels, voxels_processed (= voxels × passes), tiles, checksum, weighted_checksum, every
histogram count, underflow, overflow, nan, bins and range.
--http serves DIR with nginx (tests/lib/shardmill_test/nginx_server.py) and also checks the request
counters against nginx's access log: with the cache on, payload GETs = distinct chunks touched
(404s included) whatever the passes and tiles; metadata GETs per open ≤ 2 (v3) / ≤ 3 (v2:
zarr.json probe, .zarray, .zattrs), never per tile or pass.
--real-data: data/mri-crop.zarr, data/mri.zarr (zarrita.js-written MRI, oracle from nibabel) and
data/ct.zarr (zarr-python-written CT, oracle from data/ct/matrix.dat); exits 77 (ctest: skipped)
with a message when DATA_DIR lacks them.
Prints one line per case and a closing 'N passed, N failed' line; exit 1 on any failure.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from shardmill_test import report_json
from shardmill_test import scan_oracle

SKIP = 77


def yaml_list(v):
    return "[" + ", ".join(repr(float(x)) if isinstance(x, float) else str(x) for x in v) + "]"


def make_config(store, case):
    lines = ["job: scan", "input:", f"  store: {json.dumps(store)}"]
    if case.get("cache") is not None:
        lines.append(f"  cache: {{enabled: {'true' if case['cache'] else 'false'}}}")
    if case.get("roi"):
        off, shp = case["roi"]
        lines.append(f"roi: {{offset: {yaml_list(off)}, shape: {yaml_list(shp)}}}")
    if case.get("tile"):
        lines.append(f"tile: {yaml_list(case['tile'])}")
    lines.append(f"passes: {case.get('passes', 1)}")
    if case.get("hist"):
        b, lo, hi = case["hist"]
        lines.append(f"histogram: {{bins: {b}, range: [{lo!r}, {hi!r}]}}")
    lines.append(f"parallel: {{threads: {case.get('threads', 1)}}}")
    return "\n".join(lines) + "\n"


def run_shardmill(shardmill, store, case, work, name):
    cfg = os.path.join(work, name + ".yaml")
    rep = os.path.join(work, name + ".report.json")
    with open(cfg, "w") as f:
        f.write(make_config(store, case))
    if os.path.exists(rep):
        os.unlink(rep)
    p = subprocess.run([shardmill, "run", cfg, "--report", rep], capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {p.stderr.strip()[-400:]}"
    try:
        with open(rep) as f:
            return report_json.with_int_checksums(json.load(f)), None
    except (OSError, ValueError) as e:
        return None, f"report {rep}: {e}"


def request_checks(report, srv, mark, case, chunks):
    """Request counters: the report against nginx's log and against SPEC §3/§8."""
    bad = []
    rq = scan_oracle.report_get(report, "io.requests")
    if not isinstance(rq, dict):
        return ["io.requests missing"]
    # nginx logs a request after its response: wait for as many lines as the report counts
    log = srv.requests(since=mark, expect=sum(rq.values()), timeout=10)
    meta_log = [r for r in log if r["uri"].rsplit("/", 1)[-1] in
                ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")]
    pay_log = [r for r in log if r not in meta_log]
    if rq.get("metadata") != len(meta_log):
        bad.append(f"io.requests.metadata {rq.get('metadata')} != nginx {len(meta_log)}")
    if rq.get("payload", 0) + rq.get("index", 0) != len(pay_log):
        bad.append(f"io.requests.payload+index {rq.get('payload')}+{rq.get('index')} != nginx "
                   f"{len(pay_log)}")
    # SPEC §3: metadata once per opened array, never per tile or pass. v3: zarr.json (≤ 2 with
    # a probe); v2: the zarr.json probe (404), .zarray, .zattrs (≤ 3).
    limit = 3 if any(r["uri"].endswith("/.zarray") for r in meta_log) else 2
    if len(meta_log) > limit:
        bad.append(f"{len(meta_log)} metadata GETs for one open (at most {limit}): "
                   + ", ".join(r["uri"] for r in meta_log))
    off, shp = case["roi"]
    touched = scan_oracle.chunks_touched(off, shp, chunks)
    if case.get("cache", True):
        if len(pay_log) != touched:
            bad.append(f"cache on: {len(pay_log)} payload GETs (nginx), {touched} distinct chunks "
                       f"touched (passes {case.get('passes', 1)})")
    elif len(pay_log) < touched * case.get("passes", 1):
        bad.append(f"cache off: {len(pay_log)} payload GETs < {touched} chunks × passes")
    by = scan_oracle.report_get(report, "io.bytes.payload")
    sent = sum(r["bytes"] for r in pay_log if r["status"] in (200, 206))
    if isinstance(by, int) and by != sent:
        bad.append(f"io.bytes.payload {by} != nginx body bytes {sent}")
    return bad


class Runner:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.passed = 0
        self.failed = 0

    def report_case(self, name, bad):
        if bad:
            self.failed += 1
            print(f"FAIL {name}")
            for b in bad:
                print(f"     {b}")
        else:
            self.passed += 1
            print(f"ok   {name}")
        sys.stdout.flush()

    def run_cases(self, arr, store, cases, dtype, chunks, srv=None):
        """Runs cases (list of (name, case)); with srv one at a time (request accounting)."""
        oracle_cache = {}

        def want_for(case):
            off, shp = case["roi"] if case.get("roi") else (None, None)
            tile = case.get("tile") or list(chunks)
            b, lo, hi = case["hist"] if case.get("hist") else (None, None, None)
            key = (str(off), str(shp), str(tile), b, lo, hi)
            if key not in oracle_cache:
                oracle_cache[key] = scan_oracle.scan(arr, off, shp, tile, b, lo, hi)
            return oracle_cache[key]

        def one(item):
            name, case = item
            mark = srv.mark() if srv else None
            rep, err = run_shardmill(self.args.shardmill, store, case, self.work,
                                     name.replace("/", "_").replace(" ", "_"))
            if err:
                return name, case, None, [err]
            want = want_for(case)
            bad = scan_oracle.compare(rep, want, case, arr.shape, dtype)
            if srv is not None:
                c = dict(case)
                if not c.get("roi"):
                    c["roi"] = ([0] * arr.ndim, list(arr.shape))
                bad += request_checks(rep, srv, mark, c, chunks)
            return name, case, rep, bad

        for _, case in cases:  # oracle results first (NumPy, not thread-safe to share lazily)
            want_for(case)
        jobs = 1 if srv is not None else self.args.jobs
        results = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            for name, case, rep, bad in ex.map(one, cases):
                self.report_case(name, bad)
                results[name] = (case, rep)
        # the same case with other threads/passes must give an identical result
        groups = {}
        for name, (case, rep) in results.items():
            if rep is None:
                continue
            key = json.dumps({k: v for k, v in case.items() if k not in ("threads", "passes", "cache")},
                             sort_keys=True)
            r = dict(rep.get("result", {}))
            r.pop("voxels_processed", None)
            groups.setdefault(key, []).append((name, r))
        for key, members in groups.items():
            if len(members) < 2:
                continue
            base_name, base = members[0]
            bad = [f"{n}: result differs from {base_name}"
                   for n, r in members[1:] if r != base]
            self.report_case(f"identical results: {', '.join(n for n, _ in members)}", bad)


def fixture_cases(shape, dtype, custom_hist):
    z, y, x = shape
    rois = {"whole": None,
            "aligned": ([16, 32, 16], [32, 48, 32]),
            "nonaligned": ([3, 5, 7], [61, 77, 41]),
            "edge": ([z - 20, y - 20, x - 20], [20, 20, 20])}
    tiles = {"t16": [16, 16, 16], "t20x24x13": [20, 24, 13]}
    default_hist = None if dtype != "float32" else tuple(custom_hist)
    cases = []
    for rname, roi in rois.items():
        for tname, tile in tiles.items():
            for passes, threads in ((1, 1), (3, 2)):
                cases.append((f"{rname} {tname} p{passes} th{threads}",
                              {"roi": roi, "tile": tile, "passes": passes, "threads": threads,
                               "hist": default_hist}))
        cases.append((f"{rname} t20x24x13 p1 th2",
                      {"roi": roi, "tile": [20, 24, 13], "passes": 1, "threads": 2,
                       "hist": default_hist}))
        h2 = tuple(custom_hist) if dtype != "float32" else (7, -0.0, 1e30)
        cases.append((f"{rname} t20x24x13 p1 th2 hist{h2[0]}",
                      {"roi": roi, "tile": [20, 24, 13], "passes": 1, "threads": 2, "hist": h2}))
    cases.append(("whole default-tile p1 th1", {"roi": None, "passes": 1, "threads": 1,
                                                "hist": default_hist}))
    return cases


def run_fixtures(args, runner):
    with open(os.path.join(args.fixtures, "manifest.json")) as f:
        man = json.load(f)
    names = args.arrays.split(",") if args.arrays else [a["name"] for a in man["arrays"]]
    srv_ctx = None
    if args.http:
        from shardmill_test.nginx_server import NginxServer
        srv_ctx = NginxServer(args.fixtures)
        srv_ctx.start()
    try:
        for a in man["arrays"]:
            if a["name"] not in names:
                continue
            dtype = a["dtype"]
            arr = scan_oracle.load_array(os.path.join(args.fixtures, a["path"]), node=args.node)
            cases = fixture_cases(arr.shape, dtype, man["custom_hist"][dtype])
            if args.http:
                cases = [(n, c) for n, c in cases if c["threads"] == 2 or "default" in n]
                cases = cases + [(n + " cache-off", dict(c, cache=False)) for n, c in cases
                                 if "p3" in n]
                cases = [(n, dict(c, cache=c.get("cache", True))) for n, c in cases]
                store = f"{srv_ctx.url}/{a['path']}"
            else:
                store = os.path.join(args.fixtures, a["path"])
            cases = [(f"{a['name']} {n}", c) for n, c in cases]
            runner.run_cases(arr, store, cases, dtype, man["chunks"], srv_ctx)
    finally:
        if srv_ctx:
            srv_ctx.stop()


def run_real(args, runner):
    d = args.real_data
    mri_nii = os.path.join(d, "mri", "ch2better.nii.gz")
    crop, full = os.path.join(d, "mri-crop.zarr"), os.path.join(d, "mri.zarr")
    ct_raw, ct_zarr = os.path.join(d, "ct", "matrix.dat"), os.path.join(d, "ct.zarr")
    have_mri = all(os.path.exists(p) for p in (mri_nii, os.path.join(crop, "zarr.json"),
                                               os.path.join(full, "zarr.json")))
    have_ct = os.path.exists(ct_raw) and os.path.exists(os.path.join(ct_zarr, ".zarray"))
    if not have_mri and not have_ct:
        print(f"SKIP: no real data in {d} (run scripts/fetch-data.sh and scripts/make-w1-input.sh)")
        return SKIP
    srv = None
    if args.http:
        from shardmill_test.nginx_server import NginxServer
        srv = NginxServer(d).start()
    try:
        if have_mri:
            vol = scan_oracle.load_nifti_zyx(mri_nii)
            cvol = np.ascontiguousarray(vol[:256, :256, :256])
            w1 = ([0, 0, 0], [128, 128, 128])
            cases = []
            for tile in (32, 64):
                for passes in (1, 8):
                    for cache in (True, False):
                        cases.append((f"mri-crop W1 t{tile} p{passes} cache-{'on' if cache else 'off'}",
                                      {"roi": w1, "tile": [tile] * 3, "passes": passes,
                                       "threads": 2 if passes == 8 else 1, "cache": cache}))
            cases.append(("mri-crop nonaligned t[20,30,40] th2",
                          {"roi": ([1, 2, 3], [125, 124, 123]), "tile": [20, 30, 40],
                           "threads": 2, "cache": True}))
            store = f"{srv.url}/mri-crop.zarr" if srv else crop
            runner.run_cases(cvol, store, cases, "uint8", [64, 64, 64], srv)
            store = f"{srv.url}/mri.zarr" if srv else full
            runner.run_cases(vol, store, [("mri whole t64 th2", {"tile": [64, 64, 64],
                                                                 "threads": 2, "cache": True}),
                                          ("mri whole t[50,64,100] hist[16,10,120] th2",
                                           {"tile": [50, 64, 100], "threads": 2, "cache": True,
                                            "hist": (16, 10.0, 120.0)})],
                             "uint8", [64, 64, 64], srv)
        else:
            print(f"SKIP: MRI stores missing in {d} (scripts/make-w1-input.sh)")
        if have_ct:
            ct = np.fromfile(ct_raw, dtype="<i2").reshape(108, 256, 256)
            with open(os.path.join(ct_zarr, ".zarray")) as f:
                chunks = json.load(f)["chunks"]
            cases = [("ct whole default-hist th2", {"threads": 2, "cache": True}),
                     ("ct nonaligned t[8,32,32] hist256 th2",
                      {"roi": ([1, 2, 3], [101, 250, 249]), "tile": [8, 32, 32], "threads": 2,
                       "cache": True, "hist": (256, -1024.0, 3072.0)})]
            store = f"{srv.url}/ct.zarr" if srv else ct_zarr
            runner.run_cases(ct, store, cases, "int16", chunks, srv)
        else:
            print(f"SKIP: CT missing in {d} (scripts/fetch-data.sh)")
    finally:
        if srv:
            srv.stop()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--fixtures")
    ap.add_argument("--real-data")
    ap.add_argument("--arrays")
    ap.add_argument("--http", action="store_true")
    ap.add_argument("--node", default="node")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--work", help="keep configs and reports here (default: a temp dir)")
    a = ap.parse_args(argv)
    if not os.access(a.shardmill, os.X_OK):
        print(f"FAIL: {a.shardmill} is not executable")
        return 1
    with tempfile.TemporaryDirectory(prefix="sm-check-scan-") as tmp:
        work = a.work or tmp
        os.makedirs(work, exist_ok=True)
        runner = Runner(a, work)
        if a.real_data:
            rc = run_real(a, runner)
            if rc == SKIP:
                return SKIP
        else:
            run_fixtures(a, runner)
    print(f"{runner.passed} passed, {runner.failed} failed")
    return 1 if runner.failed or runner.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
