#!/usr/bin/python3
"""NumPy oracle for the `scan` job's result (SPEC §5), independent of shardmill.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 -m shardmill_test.scan_oracle STORE [--array P]
        [--offset z,y,x] [--shape d,h,w] [--tile d,h,w] [--bins B --range LO,HI] [--node NODE]

prints the oracle's `result` as JSON. As a module: `load_array(store)` reads a Zarr array
(v2 with zarr-python 2.13, v3 with zarrita.js 0.7.5 through dump_zarrita.mjs) into NumPy, and
`scan(array, offset, shape, tile, bins, lo, hi)` computes
  voxels, tiles                  prod(shape), prod(ceil(shape / tile))
  checksum                       Σ v over the ROI as int64, wrapping (floats: IEEE bit pattern
                                 read as an unsigned integer)
  weighted_checksum              Σ v·(1 + i) mod 2^64, v as above converted to uint64, i the
                                 linear C-order index in the whole array (not the ROI)
  histogram                      B bins over [lo, hi): bin = floor((v − lo)·B / (hi − lo)) in
                                 float64 in that order; v < lo underflow, v ≥ hi overflow, NaN
                                 apart. (A v < hi whose formula rounds up to B would be put in
                                 bin B−1; the fixtures check whether any such v occurs.)
Defaults (SPEC §5): uint8 256 bins over [0, 256); int8/int16/uint16 one bin per value over the
type range; other types need an explicit range.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from shardmill_test import REPO
from shardmill_test import spec_oracle
from shardmill_test import report_json

V3_DTYPES = {"bool": "?", "int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2",
             "int32": "i4", "uint32": "u4", "int64": "i8", "uint64": "u8", "float32": "f4",
             "float64": "f8"}


def zarr_format(store):
    if os.path.exists(os.path.join(store, "zarr.json")):
        return 3
    if os.path.exists(os.path.join(store, ".zarray")):
        return 2
    raise ValueError(f"{store}: neither zarr.json nor .zarray")


def load_array(store, array=None, node="node"):
    """The whole array as a native-endian NumPy array, read by an independent Zarr reader."""
    path = os.path.join(store, array) if array else store
    if zarr_format(path) == 2:
        import zarr

        a = zarr.open_array(path, mode="r")[...]
        return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("=")))
    with tempfile.TemporaryDirectory(prefix="sm-oracle-") as tmp:
        raw = os.path.join(tmp, "a.raw")
        p = subprocess.run([node, os.path.join(REPO, "tests", "oracle", "dump_zarrita.mjs"), store, raw]
                           + ([array] if array else []), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"dump_zarrita.mjs {store}: {p.stderr.strip()}")
        meta = json.loads(p.stdout.strip().splitlines()[-1])
        dt = np.dtype("<" + V3_DTYPES[meta["dtype"]]) if meta["dtype"] != "bool" else np.bool_
        return np.fromfile(raw, dtype=dt).reshape(meta["shape"]).astype(np.dtype(dt).newbyteorder("="))


def load_nifti_zyx(path):
    """A NIfTI-1 volume from nibabel as a [z, y, x] C-order array of its stored dtype, checked
    against nibabel's scaled get_fdata() (only unscaled data is accepted)."""
    import nibabel

    img = nibabel.load(path)
    raw = np.asarray(img.dataobj)
    if not np.array_equal(img.get_fdata(), raw.astype(np.float64)):
        raise ValueError(f"{path}: get_fdata() differs from the stored values (scaled data)")
    return np.ascontiguousarray(raw.transpose(tuple(range(raw.ndim))[::-1]))


def default_hist(dtype):
    """spec_oracle.default_hist with float bounds (as the scan report gives them)."""
    bins, lo, hi = spec_oracle.default_hist(dtype)
    return bins, float(lo), float(hi)


def as_u64(v):
    """v as SPEC §5 takes it for the sums: ints converted to uint64 (two's complement wrap),
    floats as their IEEE bit pattern, bool as 0/1."""
    dt = v.dtype
    if dt.kind == "f":
        bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
        return v.view(bits).astype(np.uint64)
    if dt.kind == "b":
        return v.astype(np.uint64)
    if dt.kind == "u":
        return v.astype(np.uint64)
    return v.astype(np.int64).view(np.uint64)


def histogram(v, bins, lo, hi):
    f = v.astype(np.float64).reshape(-1)
    nan = np.isnan(f)
    under = f < lo
    over = f >= hi
    inr = ~(nan | under | over)
    b = np.floor((f[inr] - lo) * float(bins) / (hi - lo))
    rounded_up = int(np.count_nonzero(b >= bins))
    b = np.clip(b, 0, bins - 1).astype(np.int64)
    counts = np.bincount(b, minlength=bins)
    return {"bins": int(bins), "range": [lo, hi], "counts": [int(c) for c in counts],
            "underflow": int(np.count_nonzero(under)), "overflow": int(np.count_nonzero(over)),
            "nan": int(np.count_nonzero(nan))}, rounded_up


def scan(arr, offset=None, shape=None, tile=None, bins=None, lo=None, hi=None):
    nd = arr.ndim
    offset = [0] * nd if offset is None else list(offset)
    shape = [s - o for s, o in zip(arr.shape, offset)] if shape is None else list(shape)
    if bins is None:
        bins, lo, hi = default_hist(arr.dtype)
    sl = tuple(slice(o, o + s) for o, s in zip(offset, shape))
    roi = arr[sl]
    if list(roi.shape) != shape:
        raise ValueError(f"ROI {offset}+{shape} outside {list(arr.shape)}")
    strides = [int(np.prod(arr.shape[k + 1:])) for k in range(nd)]
    u = as_u64(roi)
    checksum = np.uint64(0)
    weighted = np.uint64(0)
    with np.errstate(over="ignore"):
        # slab by slab along axis 0 (bounded memory for the real volumes)
        rest = np.zeros(shape[1:], dtype=np.uint64)
        for k in range(1, nd):
            ix = np.arange(offset[k], offset[k] + shape[k], dtype=np.uint64) * np.uint64(strides[k])
            rest = rest + ix.reshape([-1 if j == k - 1 else 1 for j in range(nd - 1)])
        for z in range(shape[0]):
            base = np.uint64((offset[0] + z) * strides[0] + 1)
            s = u[z]
            checksum = checksum + np.sum(s, dtype=np.uint64)
            weighted = weighted + np.sum(s * (rest + base), dtype=np.uint64)
    tiles = 1
    if tile is not None:
        for s, t in zip(shape, tile):
            tiles *= -(-s // t)
    hist, rounded_up = histogram(roi, bins, lo, hi)
    res = {"voxels": int(np.prod(shape)), "checksum": int(np.array(checksum).view(np.int64)),
           "weighted_checksum": int(weighted), "histogram": hist}
    if tile is not None:
        res["tiles"] = tiles
    res["_rounded_up_to_last_bin"] = rounded_up
    return res


def chunks_touched(offset, shape, chunks):
    """Distinct chunks a box intersects."""
    n = 1
    for o, s, c in zip(offset, shape, chunks):
        n *= (o + s - 1) // c - o // c + 1
    return n


# ---- a report against the oracle (tests/oracle/check_scan.py, the W1 benchmark) ----

def report_get(d, path):
    """d at the dotted path, or the class KeyError when a key is absent."""
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return KeyError
        d = d[k]
    return d


def compare(report, want, case, arr_shape, dtype):
    """Mismatch messages between a report and the oracle's result."""
    report = report_json.with_int_checksums(report)  # SPEC §7: checksums are decimal strings
    bad = []

    def eq(path, expect):
        got = report_get(report, path)
        if got is KeyError:
            bad.append(f"{path} missing")
        elif got != expect:
            bad.append(f"{path} = {got!r}, oracle {expect!r}")

    eq("input.shape", list(arr_shape))
    eq("input.dtype", dtype)
    off, shp = case["roi"] if case.get("roi") else ([0] * len(arr_shape), list(arr_shape))
    eq("roi.offset", list(off))
    eq("roi.shape", list(shp))
    if case.get("tile"):
        eq("tile", list(case["tile"]))
    eq("passes", case.get("passes", 1))
    eq("result.voxels", want["voxels"])
    eq("result.voxels_processed", want["voxels"] * case.get("passes", 1))
    eq("result.tiles", want["tiles"])
    eq("result.checksum", want["checksum"])
    eq("result.weighted_checksum", want["weighted_checksum"])
    h = report_get(report, "result.histogram")
    wh = want["histogram"]
    if not isinstance(h, dict):
        bad.append("result.histogram missing")
        return bad
    for k in ("bins", "underflow", "overflow", "nan"):
        eq(f"result.histogram.{k}", wh[k])
    rng = h.get("range")
    if not (isinstance(rng, list) and len(rng) == 2 and [float(x) for x in rng] == wh["range"]):
        bad.append(f"result.histogram.range = {rng!r}, oracle {wh['range']!r}")
    counts = h.get("counts")
    if not isinstance(counts, list) or len(counts) != len(wh["counts"]):
        bad.append(f"result.histogram.counts has {len(counts) if isinstance(counts, list) else counts!r}"
                   f" entries, oracle {len(wh['counts'])}")
    else:
        diff = [i for i, (a, b) in enumerate(zip(counts, wh["counts"])) if a != b]
        if diff:
            show = ", ".join(f"[{i}] {counts[i]} vs {wh['counts'][i]}" for i in diff[:5])
            bad.append(f"result.histogram.counts: {len(diff)} bins differ ({show})")
    return bad


def _ints(text):
    return [int(x) for x in text.split(",")] if text else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--array")
    ap.add_argument("--offset")
    ap.add_argument("--shape")
    ap.add_argument("--tile")
    ap.add_argument("--bins", type=int)
    ap.add_argument("--range")
    ap.add_argument("--node", default="node")
    a = ap.parse_args(argv)
    arr = load_array(a.store, a.array, a.node)
    lo = hi = None
    if a.bins is not None:
        lo, hi = (float(x) for x in a.range.split(","))
    res = scan(arr, _ints(a.offset), _ints(a.shape), _ints(a.tile), a.bins, lo, hi)
    json.dump(res, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
