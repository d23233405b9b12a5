"""Histograms of float inputs without `histogram.range` (issue 21 item 7, SPEC §5): a min/max pass
finds the finite min and max, then 65,536 bins over [min, nextafter(max, +inf)) in double (max in
the last bin); NaN, +inf and -inf are counted apart (±inf also in overflow / underflow, so the
percentile's N counts them). NumPy is the oracle: it bins the float64 values with the same
formula, min(floor((v - lo) * B / (hi - lo)), B - 1), and its exact percentile is the
ceil(p/100 * N)-th smallest non-NaN value.

Usage: /usr/bin/python3 test_convert_float_hist.py --shardmill BIN --work DIR --group GROUP
       [--mpiexec MPIEXEC]
The input: the head CT (data/ct/matrix.dat, int16 [108, 256, 256]) as float32 HU * 0.37 + 0.25
(non-integers), with NaN, +inf and -inf planted at fixed random voxels.
Groups (one ctest each):
  scan      a Zarr v2 float32 array (zarr-python 2.13), job scan, no histogram key: the report's
            histogram (range_from minmax, bins, range, every count, nan/inf_pos/inf_neg,
            min/max) equals NumPy's; timing_ms.range is there; the checksums are NumPy's
  convert   the same array, convert with normalize percentile [1, 99] and no histogram key: the
            histogram as above, the window's lo/hi are the SPEC §5 percentiles of NumPy's
            histogram exactly and each within one bin width of NumPy's exact percentile (and of
            np.percentile(method='inverted_cdf') over the finite values' side), level 0 equals
            NumPy's float32 window at the reported lo/hi bit for bit (NaN stays NaN, +inf 1,
            -inf 0)
  raw       the same volume as a raw float32 source (input.format raw): the same checks through
            the source's box reader
  window    normalize window (one pass) without a histogram key: the min/max pass runs too, the
            histogram equals NumPy's, the output is NumPy's window
  wide_int  int32 and uint64 Zarr arrays (uint64 values beyond 2^53: binned as doubles), scan:
            the histogram equals NumPy's over the float64 values
  degenerate  a constant float32 array: range [c, nextafter(c)), every voxel in bin 0, and a
            percentile window is exit 3 "empty window"; an all-NaN/inf array: range [0, 1)
  plan      `shardmill plan` and `validate` accept a float32 input with percentile and no range
  mpi       (--mpiexec) scan and convert under mpiexec -n 2: the same histogram (the global
            min/max), the same window and the same shard bytes as one process
Exit 77 (skipped) without data/ct (scripts/fetch-data.sh), and for mpi without --mpiexec.
"""

import argparse
import json
import math
import os
from fractions import Fraction

import numpy as np

from shardmill_test import report_json
from shardmill_test import spec_oracle
from shardmill_test import runner as cc
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks
from shardmill_test.ranks import launch

SKIP = 77
B = 65536
CT = os.path.join(cc.REPO, "data", "ct", "matrix.dat")
SHAPE = (108, 256, 256)


def float_ct():
    """The CT as float32 HU * 0.37 + 0.25 with 20 NaN, 25 +inf and 15 -inf voxels and a unique
    min and max, or None."""
    if not os.path.isfile(CT):
        print(f"SKIP: {CT} absent (run scripts/fetch-data.sh)")
        return None
    hu = np.fromfile(CT, dtype="<i2").reshape(SHAPE)
    v = (hu.astype(np.float32) * np.float32(0.37) + np.float32(0.25)).astype(np.float32)
    flat = v.reshape(-1)
    idx = np.random.default_rng(21).choice(flat.size, 60, replace=False)
    flat[idx[:20]] = np.nan
    flat[idx[20:45]] = np.inf
    flat[idx[45:]] = -np.inf
    # the finite min only in the first slices, the max only in the last: with 2 ranks each
    # holds one of them, so only the global reduction gives the range
    v[1, 5, 5] = np.float32(-500.375)
    v[106, 200, 200] = np.float32(2000.125)
    return v


def write_zarr(path, v, chunks=(16, 64, 64)):
    import numcodecs
    import zarr
    z = zarr.open(path, mode="w", shape=v.shape, chunks=chunks, dtype=v.dtype.newbyteorder("<"),
                  compressor=numcodecs.Zstd(3))
    z[:] = v
    return path


def oracle_hist(v, bins=B):
    """SPEC §5 with the min/max pass, in NumPy float64."""
    f = np.asarray(v).ravel().astype(np.float64)
    fin = f[np.isfinite(f)]
    o = {"nan": int(np.count_nonzero(np.isnan(f))), "inf_pos": int(np.count_nonzero(f == np.inf)),
         "inf_neg": int(np.count_nonzero(f == -np.inf))}
    if fin.size == 0:
        lo, hi, mn, mx = 0.0, 1.0, None, None
    else:
        mn, mx = float(fin.min()) + 0.0, float(fin.max()) + 0.0
        lo, hi = mn, float(np.nextafter(mx, np.inf))
    b = np.floor((fin - lo) * bins / (hi - lo))
    b = np.minimum(b, bins - 1).astype(np.int64)
    o.update(lo=lo, hi=hi, min=mn, max=mx, counts=np.bincount(b, minlength=bins),
             underflow=o["inf_neg"], overflow=o["inf_pos"])
    return o


def edge(o, i):
    """sm_hist_edge in double: lo + i * (hi - lo) / B."""
    return o["lo"] + (i * (o["hi"] - o["lo"])) / len(o["counts"])


def hist_percentile(o, p):
    """SPEC §5 percentile of the oracle histogram (a float, as the engine computes the edge)."""
    n = o["underflow"] + int(o["counts"].sum()) + o["overflow"]
    target = math.ceil(Fraction(str(p)) * n / 100)
    if o["underflow"] >= target:
        return o["lo"]
    hit = np.nonzero(np.cumsum(o["counts"]) + o["underflow"] >= target)[0]
    return o["hi"] if hit.size == 0 else edge(o, int(hit[0]))


def exact_percentile(v, p):
    """The ceil(p/100 * N)-th smallest non-NaN value (N counts +-inf)."""
    f = np.sort(np.asarray(v).ravel().astype(np.float64))
    f = f[~np.isnan(f)]
    k = math.ceil(Fraction(str(p)) * f.size / 100)
    return float(f[max(k, 1) - 1])


def check_hist(c, label, h, o, bins=B):
    """The report's histogram against the oracle, field by field."""
    if not c.check(f"{label}: histogram reported", isinstance(h, dict), h):
        return False
    c.check(f"{label}: range_from minmax", h.get("range_from") == "minmax", h.get("range_from"))
    c.check(f"{label}: bins {bins}", h.get("bins") == bins, h.get("bins"))
    c.check(f"{label}: range [min, nextafter(max)] = NumPy's {[o['lo'], o['hi']]}",
            h.get("range") == [o["lo"], o["hi"]], h.get("range"))
    c.check(f"{label}: min/max = NumPy's finite min/max {o['min']}, {o['max']}",
            h.get("min") == o["min"] and h.get("max") == o["max"],
            f"{h.get('min')}, {h.get('max')}")
    for k in ("nan", "inf_pos", "inf_neg", "underflow", "overflow"):
        c.check(f"{label}: {k} = {o[k]}", h.get(k) == o[k], h.get(k))
    counts = np.asarray(h.get("counts", []), dtype=np.int64)
    ok = counts.shape == o["counts"].shape and np.array_equal(counts, o["counts"])
    detail = ""
    if not ok and counts.shape == o["counts"].shape:
        bad = np.nonzero(counts != o["counts"])[0]
        detail = f"{bad.size} bins differ, first {int(bad[0])}: {counts[bad[0]]} vs " \
                 f"{o['counts'][bad[0]]}"
    c.check(f"{label}: every bin count = NumPy's", ok, detail)
    if o["min"] is not None and o["min"] < o["max"]:  # min == max: all in bin 0
        c.check(f"{label}: max is in the last bin, min in bin 0",
                o["counts"][0] > 0 and o["counts"][-1] > 0)
    return True


def run_job(c, args, work, label, cfg, ranks=0):
    """Writes LABEL.yaml, runs it (mpiexec -n ranks when ranks > 0); the report or None."""
    rep = os.path.join(work, label + ".report.json")
    cfg = dict(cfg, report=rep, progress=False)
    path = cc.write_config(os.path.join(work, label + ".yaml"), cfg)
    if ranks:
        r = launch(args.shardmill, args.mpiexec, ["run", path], ranks, work, timeout=300)
        ok = r is not None and r.returncode == 0
        detail = "timeout" if r is None else cc.describe(r)
    else:
        r = cc.run([args.shardmill, "run", path], cwd=work)
        ok, detail = r.returncode == 0, cc.describe(r)
    if not c.check(f"{label}: exits 0", ok, detail):
        return None
    return report_json.load(rep)


def check_window(c, label, rep, v, o, lo_p=1, hi_p=99):
    """The percentile window: SPEC §5 on NumPy's histogram exactly, and within one bin of the
    exact percentile."""
    nm = rep["result"]["normalization"]
    width = (o["hi"] - o["lo"]) / B
    for key, p in (("lo", lo_p), ("hi", hi_p)):
        got, want = nm.get(key), hist_percentile(o, p)
        c.check(f"{label}: window {key} = SPEC §5 p{p} of NumPy's histogram {want!r}",
                got == want, got)
        x = exact_percentile(v, p)
        c.check(f"{label}: window {key} within one bin ({width:.4g}) of the exact p{p} = {x!r}",
                got is not None and got <= x < got + width, f"{got} vs {x}")
        fin = np.asarray(v).ravel().astype(np.float64)
        fin = fin[~np.isnan(fin)]
        ic = float(np.percentile(fin, p, method="inverted_cdf"))
        c.check(f"{label}: np.percentile(inverted_cdf) p{p} = the sorted rank's value", ic == x,
                f"{ic} vs {x}")


def check_output(c, label, out, v, lo, hi):
    got = zarr_decode.spec_decode(out)
    want = spec_oracle.normalize(v, "window", lo=lo, hi=hi)
    c.check(f"{label}: level 0 = NumPy's float32 window at the reported [lo, hi] bit for bit",
            spec_oracle.same_bits(got, want), spec_oracle.first_diff(got, want))


def convert_cfg(store, out, mode="percentile", extra_input=None):
    nm = {"mode": "percentile", "lo": 1, "hi": 99} if mode == "percentile" else \
        {"mode": "window", "lo": -100.5, "hi": 400.25}
    return {"job": "convert", "input": dict({"store": store}, **(extra_input or {})),
            "normalize": nm, "output": {"path": out, "fsync": False}}


def group_scan(c, args, work):
    v = float_ct()
    if v is None:
        return SKIP
    store = write_zarr(os.path.join(work, "ct32.zarr"), v)
    rep = run_job(c, args, work, "scan", {"job": "scan", "input": {"store": store}})
    if rep is None:
        return None
    o = oracle_hist(v)
    check_hist(c, "scan", rep["result"]["histogram"], o)
    t = rep["timing_ms"]
    c.check("scan: timing_ms.range (the min/max pass) reported", isinstance(t.get("range"), float)
            and "range" in t["max"] and "range" in t["mean"], t)
    s, w = spec_oracle.checksums(v, v.shape, [0, 0, 0])
    c.check("scan: checksums = NumPy's", rep["result"]["checksum"] == s and
            rep["result"]["weighted_checksum"] == w, rep["result"])
    return None


def convert_and_check(c, args, work, label, v, cfg):
    rep = run_job(c, args, work, label, cfg)
    if rep is None:
        return None
    o = oracle_hist(v)
    check_hist(c, label, rep["result"]["histogram"], o)
    nm = rep["result"]["normalization"]
    if cfg["normalize"]["mode"] == "percentile":
        check_window(c, label, rep, v, o)
    check_output(c, label, cfg["output"]["path"], v, nm["lo"], nm["hi"])
    return rep


def group_convert(c, args, work):
    v = float_ct()
    if v is None:
        return SKIP
    store = write_zarr(os.path.join(work, "ct32.zarr"), v)
    convert_and_check(c, args, work, "convert", v,
                      convert_cfg(store, os.path.join(work, "out.zarr")))
    return None


def group_raw(c, args, work):
    v = float_ct()
    if v is None:
        return SKIP
    raw = os.path.join(work, "ct32.raw")
    v.astype("<f4").tofile(raw)
    extra = {"format": "raw", "raw": {"dtype": "float32", "shape": list(SHAPE),
                                      "byte_order": "little"}}
    convert_and_check(c, args, work, "raw", v,
                      convert_cfg(raw, os.path.join(work, "out.zarr"), extra_input=extra))
    return None


def group_window(c, args, work):
    v = float_ct()
    if v is None:
        return SKIP
    store = write_zarr(os.path.join(work, "ct32.zarr"), v)
    rep = convert_and_check(c, args, work, "window", v,
                            convert_cfg(store, os.path.join(work, "out.zarr"), mode="window"))
    if rep is not None:
        c.check("window: the window is the configuration's",
                rep["result"]["normalization"]["lo"] == -100.5 and
                rep["result"]["normalization"]["hi"] == 400.25, rep["result"]["normalization"])
    return None


def group_wide_int(c, args, work):
    rng = np.random.default_rng(5)
    i32 = rng.integers(-2**31, 2**31, size=(5, 33, 17), dtype=np.int64).astype(np.int32)
    u64 = rng.integers(0, 2**63, size=(5, 33, 17), dtype=np.int64).astype(np.uint64)
    u64 = u64 * np.uint64(2) + np.uint64(1)  # odd values above 2^53: rounded to doubles
    for name, v in (("int32", i32), ("uint64", u64)):
        store = write_zarr(os.path.join(work, name + ".zarr"), v, chunks=(2, 16, 16))
        rep = run_job(c, args, work, name, {"job": "scan", "input": {"store": store},
                                            "histogram": {"bins": 1000}})
        if rep is not None:
            check_hist(c, name, rep["result"]["histogram"], oracle_hist(v, 1000), bins=1000)
    return None


def group_degenerate(c, args, work):
    const = np.full((4, 8, 8), 2.75, dtype=np.float32)
    const[0, 0, :3] = [np.nan, np.inf, -np.inf]
    store = write_zarr(os.path.join(work, "const.zarr"), const, chunks=(2, 8, 8))
    rep = run_job(c, args, work, "const", {"job": "scan", "input": {"store": store}})
    if rep is not None:
        o = oracle_hist(const)
        check_hist(c, "const", rep["result"]["histogram"], o)
        c.check("const: every finite voxel in bin 0", rep["result"]["histogram"]["counts"][0] ==
                const.size - 3, rep["result"]["histogram"]["counts"][:2])
    cfg = convert_cfg(store, os.path.join(work, "const-out.zarr"))
    path = cc.write_config(os.path.join(work, "const-pct.yaml"), dict(cfg, progress=False))
    r = cc.run([args.shardmill, "run", path], cwd=work)
    c.check("const: percentile window of constant data is exit 3 'empty window'",
            r.returncode == 3 and "empty window" in r.stderr, cc.describe(r))
    odd = np.array([np.nan, np.inf, -np.inf, np.nan] * 8, dtype=np.float32).reshape(2, 4, 4)
    store = write_zarr(os.path.join(work, "nonfinite.zarr"), odd, chunks=(1, 4, 4))
    rep = run_job(c, args, work, "nonfinite", {"job": "scan", "input": {"store": store}})
    if rep is not None:
        h = rep["result"]["histogram"]
        c.check("nonfinite: range [0, 1), min and max null, no bin counted",
                h["range"] == [0.0, 1.0] and h["min"] is None and h["max"] is None and
                sum(h["counts"]) == 0, {k: h[k] for k in ("range", "min", "max")})
        check_hist(c, "nonfinite", h, oracle_hist(odd))
    return None


def group_plan(c, args, work):
    v = np.linspace(-1, 1, 4 * 16 * 16, dtype=np.float32).reshape(4, 16, 16)
    store = write_zarr(os.path.join(work, "f.zarr"), v, chunks=(2, 8, 8))
    cfg = cc.write_config(os.path.join(work, "plan.yaml"),
                          convert_cfg(store, os.path.join(work, "out.zarr")))
    for cmd in (["plan", cfg, "--ranks", "2"], ["validate", cfg]):
        r = cc.run([args.shardmill] + cmd, cwd=work)
        c.check(f"{cmd[0]}: a float32 input with percentile and no histogram.range is accepted",
                r.returncode == 0, cc.describe(r))
    return None


def group_mpi(c, args, work):
    if not args.mpiexec:
        print("SKIP: no --mpiexec")
        return SKIP
    v = float_ct()
    if v is None:
        return SKIP
    store = write_zarr(os.path.join(work, "ct32.zarr"), v)
    o = oracle_hist(v)
    for ranks in (0, 2):
        label = f"scan_n{ranks}"
        rep = run_job(c, args, work, label, {"job": "scan", "input": {"store": store}}, ranks)
        if rep is not None:
            check_hist(c, label, rep["result"]["histogram"], o)
    outs = []
    for ranks in (0, 2):
        label = f"convert_n{ranks}"
        out = os.path.join(work, label + ".zarr")
        rep = run_job(c, args, work, label, convert_cfg(store, out), ranks)
        if rep is None:
            return None
        c.check(f"{label}: ranks {max(ranks, 1)}", rep["ranks"] == max(ranks, 1), rep["ranks"])
        check_hist(c, label, rep["result"]["histogram"], o)
        check_window(c, label, rep, v, o)
        outs.append(out)
    check_output(c, "convert_n2", outs[1], v, *[hist_percentile(o, p) for p in (1, 99)])
    shards = [{k: open(os.path.join(d, k), "rb").read() for k in cc.files_under(d)
               if k.startswith("c")} for d in outs]
    c.check("convert: 2 ranks write the shards of one process byte for byte",
            shards[0] == shards[1] and len(shards[0]) > 0, f"{len(shards[0])} vs {len(shards[1])}")
    return None


GROUPS = {"scan": group_scan, "convert": group_convert, "raw": group_raw, "window": group_window,
          "wide_int": group_wide_int, "degenerate": group_degenerate, "plan": group_plan,
          "mpi": group_mpi}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--group", required=True, choices=sorted(GROUPS))
    ap.add_argument("--mpiexec", default="")
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = cc.fresh_dir(os.path.abspath(os.path.join(args.work, args.group)))
    c = Checks(f"convert.float_hist.{args.group}")
    if GROUPS[args.group](c, args, work) == SKIP:
        return SKIP
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
