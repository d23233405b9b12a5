#!/usr/bin/python3
"""The SPEC §7 report of every job, and the short summary on standard output (issue 10).

    test_report_schema.py --shardmill BIN --work DIR

- scan of uint16 data with the default 65,536-bin histogram and no report path: standard output
  is a short summary (under 40 lines, not JSON) holding NumPy's checksum; with --report FILE the
  file has the whole JSON (every bin, equal to NumPy's bincount); with --report - standard output
  is that JSON and nothing else; the config's `report` key works like --report.
- scan, convert, ingest and read-bench reports: every SPEC §7 key present, null only where the
  job has nothing to report (rb_common.NULL_OK).
- ingest: result checksums, histogram and output checksums equal NumPy's over the ingested values,
  and the written array read back holds exactly those values; a float32 ingest without
  histogram.range reports histogram null.
Prints one line per check and a closing 'N passed, N failed'; exit 1 on any failure.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np


from shardmill_test import report_json
from shardmill_test.checks import Checks

import rb_common as rc  # noqa: E402


def summary_ok(c, label, out, must=()):
    lines = out.splitlines()
    c.expect(0 < len(lines) < 40, f"{label}: summary under 40 lines", f"{len(lines)} lines")
    try:
        json.loads(out)
        c.expect(False, f"{label}: stdout is not the JSON report")
    except ValueError:
        c.expect(not any(ln.lstrip().startswith(("{", "\"")) for ln in lines),
                f"{label}: stdout is not the JSON report", out[:200])
    for m in must:
        c.expect(m in out, f"{label}: summary names {m!r}", out[:400])


def scan_cases(c, sm, work, a, store):
    cfg = os.path.join(work, "scan.yaml")
    rc.write_config(cfg, ["job: scan", f"input: {{store: {store}}}", "progress: false"])
    s, w = rc.checksums(a, [0, 0], list(a.shape), a.shape)
    p = rc.run([sm, "run", cfg])
    c.expect(p.returncode == 0, "scan, no report: exit 0", p.stderr)
    summary_ok(c, "scan, no report", p.stdout, [f"checksum {s}", f"weighted checksum {w}",
                                                 "figure of merit", "time:"])
    rep = os.path.join(work, "scan.json")
    p = rc.run([sm, "run", cfg, "--report", rep])
    c.expect(p.returncode == 0, "scan --report FILE: exit 0", p.stderr)
    summary_ok(c, "scan --report FILE", p.stdout, [f"checksum {s}", f"report: {rep}"])
    r = rc.load_json(rep)
    probs = rc.schema_problems(r, "scan")
    c.expect(not probs, "scan report: every SPEC §7 key", "; ".join(probs))
    h = r["result"]["histogram"]
    want = np.bincount(a.ravel().astype(np.int64), minlength=65536)
    c.expect(h["bins"] == 65536 and h["counts"] == want.tolist(),
            "scan report: all 65,536 bins, equal to NumPy's bincount")
    c.expect(r["result"]["checksum"] == s and r["result"]["weighted_checksum"] == w,
            "scan report: checksums equal NumPy's")
    p = rc.run([sm, "run", cfg, "--report", "-"])
    try:
        whole = report_json.with_int_checksums(json.loads(p.stdout))
    except ValueError:
        whole = None
    c.expect(p.returncode == 0 and whole is not None and whole["result"]["checksum"] == s,
            "scan --report -: standard output is the whole JSON and nothing else", p.stdout[:200])
    cfg2 = os.path.join(work, "scan-report-key.yaml")
    rep2 = os.path.join(work, "scan-key.json")
    rc.write_config(cfg2, ["job: scan", f"input: {{store: {store}}}", "progress: false",
                           f"report: {rep2}"])
    p = rc.run([sm, "run", cfg2])
    c.expect(p.returncode == 0 and os.path.exists(rep2)
            and rc.load_json(rep2)["result"]["checksum"] == s,
            "scan with the config's report key: the file has the JSON", p.stderr)
    summary_ok(c, "scan with the report key", p.stdout, [f"report: {rep2}"])


def convert_case(c, sm, work, a, store):
    out = os.path.join(work, "conv.zarr")
    shutil.rmtree(out, ignore_errors=True)
    cfg = os.path.join(work, "convert.yaml")
    rc.write_config(cfg, ["job: convert", f"input: {{store: {store}}}", "progress: false",
                          f"output: {{path: {out}, shard: [128, 128], chunk: [64, 64]}}",
                          "normalize: {mode: window, lo: 100, hi: 60000}"])
    p = rc.run([sm, "run", cfg])
    c.expect(p.returncode == 0, "convert, no report: exit 0", p.stderr)
    s, _ = rc.checksums(a, [0, 0], list(a.shape), a.shape)
    summary_ok(c, "convert, no report", p.stdout, [f"checksum {s}", "window: [100, 60000]", out])
    shutil.rmtree(out)
    rep = os.path.join(work, "convert.json")
    p = rc.run([sm, "run", cfg, "--report", rep])
    c.expect(p.returncode == 0, "convert --report FILE: exit 0", p.stderr)
    probs = rc.schema_problems(rc.load_json(rep), "convert")
    c.expect(not probs, "convert report: every SPEC §7 key", "; ".join(probs))


def ingest_case(c, sm, work, dtype, shape, values, null_ok=None):
    raw = os.path.join(work, f"vol-{dtype}.raw")
    values.astype("<" + np.dtype(dtype).str[1:]).tofile(raw)
    out = os.path.join(work, f"ing-{dtype}.zarr")
    shutil.rmtree(out, ignore_errors=True)
    cfg = os.path.join(work, f"ingest-{dtype}.yaml")
    rc.write_config(cfg, ["job: ingest", "progress: false",
                          f"input: {{store: {raw}, format: raw, raw: {{dtype: {dtype}, "
                          f"shape: {list(shape)}}}}}",
                          f"output: {{path: {out}, shard: [2, 32, 64], chunk: [1, 16, 32]}}"])
    rep = os.path.join(work, f"ingest-{dtype}.json")
    p = rc.run([sm, "run", cfg, "--report", rep])
    if not c.expect(p.returncode == 0, f"ingest {dtype}: exit 0", p.stderr):
        return
    summary_ok(c, f"ingest {dtype} --report FILE", p.stdout, [out, f"report: {rep}"])
    r = rc.load_json(rep)
    probs = rc.schema_problems(r, "ingest", null_ok)
    c.expect(not probs, f"ingest {dtype} report: every SPEC §7 key", "; ".join(probs))
    bits = values.reshape(shape)
    if np.dtype(dtype).kind == "f":
        bits = bits.view(np.uint32)
    s, w = rc.checksums(bits, [0] * len(shape), list(shape), shape)
    res = r["result"]
    c.expect(res["checksum"] == s and res["weighted_checksum"] == w,
            f"ingest {dtype}: result checksums equal NumPy's over the ingested values",
            f"{res['checksum']}, {res['weighted_checksum']} vs {s}, {w}")
    c.expect(res["output_checksum"] == s and res["output_weighted_checksum"] == w,
            f"ingest {dtype}: output checksums equal NumPy's")
    c.expect(r["input"].get("store") == raw and r["roi"]["shape"] == list(shape)
            and r["output"]["path"] == out and r["output"]["complete"] is True,
            f"ingest {dtype}: input.store, roi, output", json.dumps(r["input"]))
    back = os.path.join(work, f"ing-{dtype}.bin")
    q = rc.run([sm, "read", out, "-o", back])
    c.expect(q.returncode == 0 and open(back, "rb").read() == values.tobytes(),
            f"ingest {dtype}: the written array holds exactly the ingested values", q.stderr)
    if np.dtype(dtype) == np.int16:
        h = res["histogram"]
        want = np.bincount(values.astype(np.int64).ravel() + 32768, minlength=65536)
        c.expect(h is not None and h["bins"] == 65536 and h["range"] == [-32768, 32768]
                and h["counts"] == want.tolist(),
                f"ingest {dtype}: histogram equals NumPy's (one bin per value)")
        p = rc.run([sm, "run", cfg, "--set", "output.exists=overwrite"])
        c.expect(p.returncode == 0, f"ingest {dtype}, no report: exit 0", p.stderr)
        summary_ok(c, f"ingest {dtype}, no report", p.stdout, [f"checksum {s}"])
    else:
        c.expect(res["histogram"] is None,
                f"ingest {dtype}: no histogram without histogram.range (null)")


def read_bench_case(c, sm, work, store):
    cfg = os.path.join(work, "rb.yaml")
    rc.write_config(cfg, ["job: read-bench", f"input: {{store: {store}}}", "progress: false",
                          "roi: {offset: [7, 11]}", "read_bench: {extents: [256], repeats: 2}"])
    p = rc.run([sm, "run", cfg])
    c.expect(p.returncode == 0, "read-bench, no report: exit 0", p.stderr)
    summary_ok(c, "read-bench, no report", p.stdout, ["case 1: [7, 11] + [256, 256]"])
    rep = os.path.join(work, "rb.json")
    p = rc.run([sm, "run", cfg, "--report", rep])
    probs = rc.schema_problems(rc.load_json(rep), "read-bench") if p.returncode == 0 else [
        p.stderr]
    c.expect(not probs, "read-bench report: every SPEC §7 key", "; ".join(probs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    paths = rc.generate(os.path.join(args.work, "arrays"))
    a = rc.w3()
    c = Checks("report_schema")
    sm = args.shardmill
    scan_cases(c, sm, args.work, a, paths["v2_gzip"])
    convert_case(c, sm, args.work, a, paths["v3_shard_gzip"])
    shape = (3, 64, 128)
    rng = np.random.default_rng(10)
    ingest_case(c, sm, args.work, "int16", shape,
                rng.integers(-1024, 3000, size=shape).astype(np.int16))
    ingest_case(c, sm, args.work, "float32", shape,
                rng.normal(size=shape).astype(np.float32),
                rc.NULL_OK["ingest"] | {"result.histogram"})
    read_bench_case(c, sm, args.work, paths["v3_index_stress"])
    return c.done()


if __name__ == "__main__":
    sys.exit(main())
