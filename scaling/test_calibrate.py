#!/usr/bin/python3
"""scaling/calibrate without timing (issue 34 items 2 and 6):
  refusal   other work's cores from /proc/stat samples, and the refusal to write a rates file
            when they exceed the limit (unless --force): pure functions, made-up samples;
  fit       `calibrate --from-reports` over made-up reports whose stage seconds follow from known
            rates: the rates file it writes holds those rates (and the base's others);
  http      the HTTP fetch rates (a request's cost, one connection's bytes/s) from two made-up
            one-thread scans (http_fit);
  report    a run's report carries a `rates` section whose bytes are the input's and output's
            (NumPy and the output's zarr.json as oracles) and whose bytes_per_s = bytes / seconds.

    PYTHONPATH=tests/lib /usr/bin/python3 scaling/test_calibrate.py [--shardmill BIN] [--work DIR]
"""

import argparse
import importlib.machinery
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
_loader = importlib.machinery.SourceFileLoader("calibrate", os.path.join(HERE, "calibrate"))
_spec = importlib.util.spec_from_loader("calibrate", _loader)
cal = importlib.util.module_from_spec(_spec)
_loader.exec_module(cal)

FAILS = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"))
    if not ok:
        FAILS.append(what)


def close(a, b, rel=1e-6):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


# ---- refusal ----

def test_refusal():
    hz = 100
    # 2 CPUs over 10 s: 2000 jiffies; busy = everything but idle (4th) and iowait (5th)
    s0 = "cpu  1000 0 500 8000 100 0 0 0 0 0"
    s1 = "cpu  2200 0 700 8700 100 0 0 0 0 0"  # +1400 busy, +700 idle
    b0, b1 = cal.busy_seconds(s0, hz), cal.busy_seconds(s1, hz)
    check("busy_seconds counts user+nice+system+irq+softirq+steal", close(b1 - b0, 14.0),
          (b0, b1))
    # the calibration itself used 9 CPU seconds of the 14: other work 5 s over 10 s = 0.5 cores
    oc = cal.other_cores(b0, b1, 100.0, 109.0, 10.0)
    check("other_cores = (busy - own) / wall", close(oc, 0.5), oc)
    check("other_cores is never negative", cal.other_cores(b0, b1, 0.0, 30.0, 10.0) == 0.0)
    check("at the limit: written", cal.refusal(0.5, 0.5, False) is None)
    why = cal.refusal(1.6, 0.5, False)
    check("above the limit: refused, naming the load and --force",
          why is not None and "1.60 cores" in why and "--force" in why, why)
    check("above the limit with --force: written", cal.refusal(1.6, 0.5, True) is None)
    check("a quiet machine: written", cal.refusal(0.02, 0.5, False) is None)
    # the meter over a made-up /proc/stat: its busy time, less this process tree's
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "stat")
        with open(p, "w") as f:
            f.write(s0 + "\n")
        m = cal.LoadMeter(p)
        m.hz = hz
        m.start()
        with open(p, "w") as f:
            f.write(s1 + "\n")
        got = m.stop()
        check("LoadMeter reports other_cores and the 1-min load",
              got["other_cores"] >= 0 and "loadavg_1min_start" in got, got)


# ---- the fit ----

KNOWN = {"scan_s_per_byte": 8e-9, "decode_s_per_byte": 5e-9, "read_s_per_byte": 9e-9,
         "write_s_per_byte": 1.2e-8, "pyramid_s_per_byte": 2.0e-8, "scan_job_s_per_byte": 7e-9,
         "export_s_per_byte": 3e-9,
         "by_dtype.uint8.write_s_per_byte": 3.0e-8, "by_dtype.uint8.pyramid_s_per_byte": 6e-8,
         "sources.tiff.scan_s_per_byte": 2.5e-8, "sources.tiff.decode_s_per_byte": 2.2e-8,
         "sources.tiff.read_s_per_byte": 2.7e-8, "sources.raw.read_s_per_byte": 4e-9}
FIXED = 0.00017  # shard_fixed_s of the base
INNER = 0.6  # inner_efficiency of the base: a write of fewer shards than threads
SYNC_BPS, SYNC_FIXED = 1.5e9, 0.003


def model_threads(items, ranks, threads, cores, inner=None):
    """The model's threads at once (jobs/plan_model.c): items over the busiest thread's
    ceil(ceil(items / ranks) / threads), divided by the time-slicing max(1, ranks x threads /
    cores); min(ranks x threads, cores) when the stage names no items. `inner` (the write: the
    base's inner_efficiency e): a rank with fewer shards than threads works on each with all of
    them, at a speedup of 1 + (threads - 1) x e."""
    if items is None:
        return min(ranks * threads, cores)
    mine = math.ceil(items / ranks)
    if inner is not None and mine < threads:
        busiest = mine / (1 + (threads - 1) * inner)
    else:
        busiest = math.ceil(mine / threads)
    return items / busiest / max(1.0, ranks * threads / cores)


def made_up(ranks, threads, cores, kind, dtype, stages):
    """A report whose `rates` section has the stage seconds the KNOWN rates imply (the model:
    per-thread seconds = bytes x rate + files x FIXED, divided by the threads that run at once)."""
    st = {}
    for name, s in stages.items():
        s = dict(s)
        if name == "sync":
            s["seconds"] = s["bytes"] / SYNC_BPS + SYNC_FIXED
        elif name == "finish":
            s["seconds"] = s["files"] * 2e-6
        else:
            t = sum(b * KNOWN[k] for k, b in s.pop("terms").items()) + s.get("files", 0) * FIXED
            items = s.get("tiles", s.get("shards", s.get("files") if name == "pyramid" else None))
            s["seconds"] = t / model_threads(items, ranks, 1 if name == "export" else threads,
                                             cores, INNER if name == "write" else None)
        if "bytes" in s:
            s["bytes_per_s"] = s["bytes"] / s["seconds"]
        st[name] = s
    rr = {"ranks": ranks, "threads": threads, "cores": cores, "input": kind, "stages": st}
    if dtype is not None:
        rr["output_dtype"] = dtype
    return {"job": "convert" if dtype else "scan", "rates": rr}


def reports():
    MiB = 1 << 20
    inb, outb = 32 * MiB, 64 * MiB
    return [
        # percentile kept, float32, 1 x 4 on 2 cores: 8 tiles, 2 shards (4 threads on each, at
        # the base's inner_efficiency)
        made_up(1, 4, 2, "zarr", "float32", {
            "scan": {"bytes": inb, "tiles": 8, "terms": {"scan_s_per_byte": inb}},
            "write": {"bytes": outb, "input_bytes": 0, "input_read": "kept", "files": 2,
                      "shards": 2, "terms": {"write_s_per_byte": outb}},
            "sync": {"bytes": 40 * MiB}, "finish": {"files": 8}}),
        # percentile re-read, 4 ranks x 2 threads oversubscribed on 2 cores
        made_up(4, 2, 2, "zarr", "float32", {
            "scan": {"bytes": 2 * inb, "terms": {"scan_s_per_byte": 2 * inb}},
            "write": {"bytes": 2 * outb, "input_bytes": 2 * inb, "input_read": "decode",
                      "files": 16, "shards": 16, "terms": {"decode_s_per_byte": 2 * inb,
                                             "write_s_per_byte": 2 * outb}}}),
        # one pass with a pyramid, and an export
        made_up(1, 1, 2, "zarr", "float32", {
            "write": {"bytes": outb, "input_bytes": inb, "input_read": "scan", "files": 8,
                      "terms": {"read_s_per_byte": inb, "write_s_per_byte": outb}},
            "pyramid": {"bytes": outb // 8, "files": 1,
                        "terms": {"pyramid_s_per_byte": outb // 8}},
            "export": {"bytes": outb, "file_bytes": outb, "deflate": False, "shards": 3,
                       "terms": {"export_s_per_byte": outb}}}),
        # uint8 pyramid
        made_up(2, 1, 2, "zarr", "uint8", {
            "write": {"bytes": inb // 2, "input_bytes": inb, "input_read": "scan", "files": 4,
                      "terms": {"read_s_per_byte": inb,
                                "by_dtype.uint8.write_s_per_byte": inb // 2}},
            "pyramid": {"bytes": inb // 16, "files": 2,
                        "terms": {"by_dtype.uint8.pyramid_s_per_byte": inb // 16}}}),
        # a scan job
        made_up(1, 2, 2, "zarr", None, {
            "scan": {"bytes": 3 * inb, "passes": 3, "terms": {"scan_job_s_per_byte": 3 * inb}}}),
        # TIFF: re-read and one pass; raw: one pass
        made_up(1, 1, 2, "tiff", "float32", {
            "scan": {"bytes": inb, "terms": {"sources.tiff.scan_s_per_byte": inb}},
            "write": {"bytes": outb, "input_bytes": inb, "input_read": "decode", "files": 8,
                      "terms": {"sources.tiff.decode_s_per_byte": inb,
                                "write_s_per_byte": outb}}}),
        made_up(1, 1, 2, "tiff", "float32", {
            "write": {"bytes": outb, "input_bytes": inb, "input_read": "scan", "files": 8,
                      "terms": {"sources.tiff.read_s_per_byte": inb, "write_s_per_byte": outb}}}),
        made_up(1, 2, 2, "raw", "float32", {
            "write": {"bytes": outb, "input_bytes": inb, "input_read": "scan", "files": 8,
                      "terms": {"sources.raw.read_s_per_byte": inb, "write_s_per_byte": outb}}}),
    ]


def nested(d, dotted):
    for p in dotted.split("."):
        d = d.get(p) if isinstance(d, dict) else None
    return d


def test_fit(args):
    repo = os.path.dirname(HERE)
    with tempfile.TemporaryDirectory() as d:
        runs = os.path.join(d, "runs")
        os.makedirs(os.path.join(runs, "week2"))
        for i, rep in enumerate(reports()):
            sub = runs if i % 2 else os.path.join(runs, "week2")
            with open(os.path.join(sub, f"r{i}.report.json"), "w") as f:
                json.dump(rep, f)
        with open(os.path.join(runs, "notes.json"), "w") as f:
            json.dump({"not": "a report"}, f)  # skipped
        base = os.path.join(d, "base.json")
        with open(os.path.join(repo, "scaling", "rates.json")) as f:
            b = json.load(f)
        b["rates"]["shard_fixed_s"] = FIXED
        b["rates"]["syncfs_fixed_s"] = SYNC_FIXED
        b["rates"]["start_plain_s"] = 0.123
        b["rates"]["run_fixed_s"] = 0.0  # the made-up stages hold no run's fixed work
        b["rates"]["inner_efficiency"] = INNER
        with open(base, "w") as f:
            json.dump(b, f)
        out = os.path.join(d, "fitted.json")
        p = subprocess.run([sys.executable, os.path.join(HERE, "calibrate"), "--from-reports",
                            runs, "--base", base, "-o", out], capture_output=True, text=True)
        check("calibrate --from-reports exits 0", p.returncode == 0, p.stderr)
        if p.returncode != 0:
            return None
        with open(out) as f:
            got = json.load(f)
        r = got["rates"]
        for k, v in KNOWN.items():
            check(f"fitted {k} = {v:g}", close(nested(r, k), v, 1e-6), nested(r, k))
        check("fitted syncfs_bytes_per_s", close(r["syncfs_bytes_per_s"], SYNC_BPS, 1e-6),
              r["syncfs_bytes_per_s"])
        check("finish_s_per_shard kept from the base (8 shard files are too few to fit it)",
              r["finish_s_per_shard"] == b["rates"]["finish_s_per_shard"])
        check("a rate no report determines is the base's", r["start_plain_s"] == 0.123)
        fr = got["basis"]["from_reports"]
        check("the basis lists the 8 reports, not the other JSON", len(fr["reports"]) == 8,
              fr["reports"])
        check("the basis says how many reports each fitted key rests on",
              fr["fitted"]["write_s_per_byte"]["reports"] == 6, fr["fitted"]["write_s_per_byte"])
        # a uint16 write faster than its own input's read: the fit clamps its rate at 0, which
        # would make plan count no write time: the base's rate stays (absent here), with a warning
        MiB = 1 << 20
        fast = made_up(1, 1, 2, "zarr", "uint16", {
            "write": {"bytes": 16 * MiB, "input_bytes": 32 * MiB, "input_read": "scan",
                      "files": 2, "terms": {"read_s_per_byte": 32 * MiB}}})
        fast["rates"]["stages"]["write"]["seconds"] *= 0.5
        with open(os.path.join(runs, "fast.report.json"), "w") as f:
            json.dump(fast, f)
        out2 = os.path.join(d, "fitted2.json")
        p = subprocess.run([sys.executable, os.path.join(HERE, "calibrate"), "--from-reports",
                            runs, "--base", base, "-o", out2], capture_output=True, text=True)
        with open(out2) as f:
            r2 = json.load(f)["rates"]
        check("a rate the fit clamps at 0 is not written: the base's stays, with a warning",
              p.returncode == 0 and nested(r2, "by_dtype.uint16.write_s_per_byte") ==
              nested(b["rates"], "by_dtype.uint16.write_s_per_byte") and
              "by_dtype.uint16.write_s_per_byte: not determined" in p.stderr,
              (p.returncode, nested(r2, "by_dtype.uint16.write_s_per_byte"), p.stderr[-300:]))
        os.unlink(os.path.join(runs, "fast.report.json"))
        # no reports at all: exit 3, nothing written
        os.unlink(out)
        empty = os.path.join(d, "empty")
        os.makedirs(empty)
        p = subprocess.run([sys.executable, os.path.join(HERE, "calibrate"), "--from-reports",
                            empty, "--base", base, "-o", out], capture_output=True, text=True)
        check("no report with rates: exit 3, one error line, nothing written",
              p.returncode == 3 and "no report with a rates section" in p.stderr and
              not os.path.exists(out), (p.returncode, p.stderr))
        return got


# ---- the report's rates section ----

def level_values(out):
    """Value bytes of every level of the output (its zarr.json shapes and data types)."""
    sizes = {"float32": 4, "uint8": 1, "uint16": 2}
    vals = []
    for root, _, files in os.walk(out):
        if "zarr.json" in files:
            with open(os.path.join(root, "zarr.json")) as f:
                z = json.load(f)
            if z.get("node_type") == "array":
                vals.append(math.prod(z["shape"]) * sizes[z["data_type"]])
    return sorted(vals, reverse=True)


def consistent(name, rr):
    for sn, s in rr["stages"].items():
        if "bytes" in s:
            want = s["bytes"] / s["seconds"] if s["seconds"] > 0 else None
            check(f"{name}: {sn}.bytes_per_s = bytes / seconds",
                  (want is None and s["bytes_per_s"] is None) or close(s["bytes_per_s"], want),
                  s)


def run(shardmill, cfg):
    p = subprocess.run([shardmill, "run", cfg, "--quiet"], capture_output=True, text=True)
    check(f"run {os.path.basename(cfg)}", p.returncode == 0, p.stderr)
    return p.returncode == 0


def plan_predicts(args, cfg, rep, st):
    """The rates fitted from this one report make `plan` of the same job give its stage times
    back (the fit inverts plan's model; scan and write are determined by this report alone)."""
    fitted = os.path.join(args.work, "fitted-one.json")
    # a base without the run's fixed work: the fit takes it off the first stage (plan counts it
    # in start), so with the repo's the scan term would come back less by it; and without the
    # file system's read bandwidths: plan adds the input's read to the compute, which the report's
    # stage seconds already hold (with the repo's cold 0.8 GB/s the scan came back 1.3 % more)
    base = os.path.join(args.work, "base-one.json")
    with open(os.path.join(os.path.dirname(HERE), "scaling", "rates.json")) as f:
        b = json.load(f)
    b["rates"]["run_fixed_s"] = 0.0
    for k in ("fs_read_cold_bytes_per_s", "fs_read_warm_bytes_per_s"):
        b["rates"].pop(k, None)
    with open(base, "w") as f:
        json.dump(b, f)
    p = subprocess.run([sys.executable, os.path.join(HERE, "calibrate"), "--from-reports", rep,
                        "--base", base, "-o", fitted], capture_output=True, text=True)
    check("calibrate --from-reports of one real report", p.returncode == 0, p.stderr)
    p = subprocess.run([args.shardmill, "plan", cfg, "--ranks", "1", "--threads", "2", "--json",
                        "--rates", fitted], capture_output=True, text=True)
    check("plan --rates of the fitted file", p.returncode == 0, p.stderr)
    if p.returncode != 0:
        return
    terms = json.loads(p.stdout)["estimate"]["terms_s"]
    for name in ("scan", "write", "export"):
        check(f"plan's {name} term = the report's {name} seconds",
              close(terms[name], st[name]["seconds"], 0.01), (terms[name], st[name]))


def test_report(args):
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    w = args.work
    vol = np.random.default_rng(7).integers(0, 4096, size=(40, 48, 56), dtype=np.uint16)
    raw = os.path.join(w, "vol.raw")
    vol.astype("<u2").tofile(raw)
    inp = ("{store: " + raw + ", format: raw, raw: {dtype: uint16, shape: [40, 48, 56], "
           "byte_order: little}}")
    in_bytes = vol.size * 2
    # percentile to an OME-Zarr of 2 levels (two passes, kept) with an export
    out, rep = os.path.join(w, "a.zarr"), os.path.join(w, "a.json")
    cfg = os.path.join(w, "a.yaml")
    with open(cfg, "w") as f:
        f.write(f"job: convert\ninput: {inp}\noutput: {{path: {out}, shard: [16, 32, 32], "
                "chunk: [8, 16, 16], ome: {levels: 2}}\n"
                "normalize: {mode: percentile, lo: 1, hi: 99}\nparallel: {threads: 2}\n"
                f"export: {{hdf5: {{path: {os.path.join(w, 'a.h5')}}}}}\nreport: {rep}\n")
    if run(args.shardmill, cfg):
        with open(rep) as f:
            r = json.load(f)
        rr = r.get("rates")
        check("a convert's report has a rates section", isinstance(rr, dict), r.keys())
        if isinstance(rr, dict):
            st = rr["stages"]
            check("rates: ranks, threads, cores, input raw, uint16, two passes kept",
                  rr["ranks"] == 1 and rr["threads"] == 2 and rr["cores"] >= 1 and
                  rr["input"] == "raw" and rr["input_dtype"] == "uint16" and rr["two_pass"] and
                  rr["kept"] and rr["output_dtype"] == "float32", rr)
            check("scan.bytes = the input's decoded bytes (NumPy)", st["scan"]["bytes"] ==
                  in_bytes, st["scan"])
            lv = level_values(out)
            wp = (st["write"]["bytes"] + st.get("pyramid", {}).get("bytes", 0) +
                  st.get("spill", {}).get("bytes", 0))
            check("write.bytes + pyramid.bytes + spill.bytes = every level's values (zarr.json)",
                  wp == sum(lv) and st["write"]["bytes"] >= lv[0], (st, lv))
            check("write reads nothing (kept)", st["write"]["input_bytes"] == 0 and
                  st["write"]["input_read"] == "kept", st["write"])
            check("sync.bytes = output.bytes", st["sync"]["bytes"] == r["output"]["bytes"])
            check("finish.files = output.shards", st["finish"]["files"] == r["output"]["shards"])
            check("export.bytes = level 0's values, file_bytes = export.bytes",
                  st["export"]["bytes"] == lv[0] and
                  st["export"]["file_bytes"] == r["export"]["bytes"], st["export"])
            total = r["timing_ms"]["total"] / 1e3
            check("every stage's seconds within the run's total",
                  all(0 <= s["seconds"] <= total + 1e-3 for s in st.values()), st)
            consistent("convert", rr)
            plan_predicts(args, cfg, rep, st)
    # scale, one pass, uint8
    out, rep = os.path.join(w, "b.zarr"), os.path.join(w, "b.json")
    cfg = os.path.join(w, "b.yaml")
    with open(cfg, "w") as f:
        f.write(f"job: convert\ninput: {inp}\noutput: {{path: {out}, dtype: uint8}}\n"
                "normalize: {mode: scale, divisor: 4095}\nparallel: {threads: 1}\n"
                f"report: {rep}\n")
    if run(args.shardmill, cfg):
        with open(rep) as f:
            rr = json.load(f)["rates"]
        st = rr["stages"]
        check("one pass: no scan stage, the write reads the input as the scan counts it",
              "scan" not in st and st["write"]["input_read"] == "scan" and
              st["write"]["input_bytes"] == in_bytes and rr["two_pass"] is False, st)
        check("one pass uint8: write.bytes = voxels", st["write"]["bytes"] == vol.size, st)
        consistent("one pass", rr)
    # the rerun of a complete output (auto): null, its stages did no work
    with open(cfg) as f:
        text = f.read()
    with open(cfg, "w") as f:
        f.write(text.replace("dtype: uint8}", "dtype: uint8, exists: auto}"))
    if run(args.shardmill, cfg):
        with open(rep) as f:
            check("a complete output left alone: rates null", json.load(f)["rates"] is None)
    shutil.rmtree(args.work, ignore_errors=True)


def test_clamped():
    """The direct calibration, like --from-reports, does not write a rate its fit clamped at 0
    (the calibration of 2026-12-07 wrote sources.tiff.decode_s_per_byte 0 and plan fell back to
    a Zarr input's decode): drop_clamped removes it, and main() keeps --base's."""
    fitted = {"write_s_per_byte": 5e-9, "sources.tiff.decode_s_per_byte": 0.0,
              "by_dtype.uint8.write_s_per_byte": 0.0}
    gone = cal.drop_clamped(fitted, "the runs", "base.json")
    check("drop_clamped: the rates clamped at 0, sorted",
          gone == ["by_dtype.uint8.write_s_per_byte", "sources.tiff.decode_s_per_byte"], gone)
    check("drop_clamped: the determined rate stays", fitted == {"write_s_per_byte": 5e-9}, fitted)
    base = {"sources": {"tiff": {"decode_s_per_byte": 2e-9}}}
    check("get_rate: a nested member", cal.get_rate(base, "sources.tiff.decode_s_per_byte") ==
          2e-9)
    check("get_rate: absent", cal.get_rate(base, "by_dtype.uint8.write_s_per_byte") is None)


def test_run_fixed():
    """The run's fixed work: a tiny run's write stage less its bytes' work, and taken out of each
    run's first stage before the fit (the scan's when there is one, else the write's)."""
    sec = {"stages": {"write": {"bytes": 1000, "seconds": 0.05, "input_bytes": 500, "files": 1}}}
    f = cal.run_fixed_of(sec, {"read_s_per_byte": 2e-6, "write_s_per_byte": 1e-5}, 0.001)
    check("run_fixed_of: write seconds - (input x read + bytes x write + files x shard_fixed)",
          close(f, 0.05 - (0.001 + 0.01 + 0.001)), f)
    check("run_fixed_of: never negative, 0 without a write stage",
          cal.run_fixed_of(sec, {"write_s_per_byte": 1.0}, 0.0) == 0.0 and
          cal.run_fixed_of({"stages": {}}, {}, 0.0) == 0.0)
    rr = {"ranks": 1, "threads": 1, "cores": 2, "input": "zarr", "output_dtype": "float32",
          "stages": {"scan": {"bytes": 100, "seconds": 1.0, "tiles": 1},
                     "write": {"bytes": 200, "seconds": 2.0, "input_bytes": 0,
                               "input_read": "kept", "shards": 1, "files": 0}}}
    rows = dict((tuple(sorted(c)), rhs) for c, rhs in cal.stage_rows(rr, 0.0, 0.25))
    check("stage_rows: the fixed work comes off the first stage (the scan) only",
          close(rows[("scan_s_per_byte",)], 0.75) and close(rows[("write_s_per_byte",)], 2.0),
          rows)
    del rr["stages"]["scan"]
    rows = dict((tuple(sorted(c)), rhs) for c, rhs in cal.stage_rows(rr, 0.0, 0.25))
    check("stage_rows: one pass, off the write", close(rows[("write_s_per_byte",)], 1.75), rows)


def test_inner_efficiency():
    """Run I (one shard, a thread per core): what each thread past the first adds, from its write
    stage against its bytes' work for one thread; a report of such a run fits back the rates
    that made it when the fit counts the same efficiency (made up: 2 threads at 1.4x)."""
    work = 500 * 2e-6 + 1000 * 1e-5 + 1 * 0.001  # read + write + the shard file: 0.012 s
    sec = {"ranks": 1, "threads": 2, "cores": 2, "input": "zarr", "output_dtype": "float32",
           "stages": {"write": {"bytes": 1000, "seconds": 0.005 + work / 1.4, "input_bytes": 500,
                                "input_read": "scan", "shards": 1, "files": 1}}}
    fitted = {"read_s_per_byte": 2e-6, "write_s_per_byte": 1e-5}
    e = cal.inner_efficiency_of(sec, fitted, 0.001, 0.005)
    check("inner_efficiency_of: (work / (write - run_fixed) - 1) / (T - 1)", close(e, 0.4), e)
    check("inner_efficiency_of: None for one thread or without a write stage",
          cal.inner_efficiency_of(dict(sec, threads=1), fitted, 0.001) is None and
          cal.inner_efficiency_of({"threads": 2, "stages": {}}, fitted, 0.0) is None)
    slow = dict(sec, stages={"write": dict(sec["stages"]["write"], seconds=1.0)})
    check("inner_efficiency_of: clamped at 0 (slower than one thread)",
          cal.inner_efficiency_of(slow, fitted, 0.001) == 0.0)
    rows = cal.stage_rows(sec, 0.001, 0.005, inner_efficiency=0.4)
    coef, rhs = rows[0]
    check("stage_rows: the write of one shard on 2 threads at efficiency 0.4 is 1.4 threads' time",
          close(rhs, work - 0.001), (coef, rhs))


def test_shard_fixed():
    """Run M (many small shard files): the shard file's fixed cost is its write stage less its
    bytes' work and the run's fixed work, over its files; the sync's cost per file its sync stage
    less its bytes at the syncfs bandwidth and the syncfs's fixed cost (the rates file had W8's
    old 0.17 ms, never measured, and plan was 26 % low on W8's 16,386 files)."""
    sec = {"ranks": 1, "threads": 1, "cores": 2, "input": "zarr", "output_dtype": "float32",
           "stages": {"write": {"bytes": 1000, "seconds": 0.5, "input_bytes": 500,
                                "input_read": "scan", "shards": 100, "files": 100},
                      "sync": {"bytes": 1000, "seconds": 0.012},
                      "finish": {"files": 100, "seconds": 0.001}}}
    f = cal.shard_fixed_of(sec, {"read_s_per_byte": 2e-4, "write_s_per_byte": 1e-4}, 0.05)
    check("shard_fixed_of: (write - run_fixed - input x read - bytes x write) / files",
          close(f, (0.5 - 0.05 - 0.1 - 0.1) / 100), f)
    sec["output_dtype"] = "uint8"
    f = cal.shard_fixed_of(sec, {"read_s_per_byte": 2e-4, "write_s_per_byte": 1e-4,
                                 "by_dtype.uint8.write_s_per_byte": 2e-4}, 0.0)
    check("shard_fixed_of: the output dtype's write rate", close(f, (0.5 - 0.1 - 0.2) / 100), f)
    check("shard_fixed_of: None without shard files",
          cal.shard_fixed_of({"stages": {}}, {}, 0.0) is None)
    check("shard_fixed_of: never negative",
          cal.shard_fixed_of(sec, {"write_s_per_byte": 1.0}, 0.0) == 0.0)
    s = cal.sync_file_of(sec, 1e6, 0.001)
    check("sync_file_of: (sync - bytes / bandwidth - fixed) / files",
          close(s, (0.012 - 0.001 - 0.001) / 100), s)
    sec["ranks"] = 2
    s = cal.sync_file_of(sec, 1e6, 0.001)
    check("sync_file_of: per rank (plan divides by the ranks)",
          close(s, 2 * (0.012 - 0.001 - 0.001) / 100), s)
    check("sync_file_of: None without a sync stage",
          cal.sync_file_of({"stages": {"finish": {"files": 3}}}, 1e6, 0.0) is None)


def test_http_fit():
    """The HTTP fetch rates: two one-thread scans whose fetch seconds follow from a known request
    cost and bytes/s (made up: 0.2 ms a request, 800 MB/s) give them back; a request cost that
    comes out negative is 0 (the bytes from the large run alone); runs that do not determine a
    positive bytes/s give None (nothing written)."""
    c, bw = 2e-4, 8e8
    small = (512 * c + 30000 / bw, 512, 30000)
    big = (512 * c + 135e6 / bw, 512, int(135e6))
    got = cal.http_fit(small, big)
    check("http_fit: the request cost and bytes/s the runs follow from",
          got is not None and close(got[0], c) and close(got[1], bw), got)
    got = cal.http_fit((0.001, 100, int(1e6)), (0.5, 100, int(4e8)))  # 1 MB in 1 ms
    check("http_fit: a negative request cost is 0, the bytes/s the large run's",
          got is not None and got[0] == 0.0 and close(got[1], 4e8 / 0.5), got)
    check("http_fit: the small run slower than the large one: None",
          cal.http_fit((0.5, 512, 30000), (0.1, 512, int(1e8))) is None)
    check("http_fit: the same requests and bytes twice: None",
          cal.http_fit((0.1, 8, 100), (0.2, 16, 200)) is None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardmill")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(),
                                                   f"test_calibrate-{os.getpid()}"))
    args = ap.parse_args()
    test_refusal()
    test_clamped()
    test_run_fixed()
    test_inner_efficiency()
    test_shard_fixed()
    test_http_fit()
    test_fit(args)
    if args.shardmill:
        test_report(args)
    print(f"{len(FAILS)} failed" if FAILS else "all passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
