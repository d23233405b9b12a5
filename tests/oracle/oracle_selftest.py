#!/usr/bin/python3
"""Checks scan_oracle.scan (NumPy, vectorised) against a plain-Python transcription of SPEC §5
(exact integers, one voxel at a time) on small random arrays of every dtype, ROIs and ranges.
Prints one line per case and a closing 'N passed, N failed' line; exit 1 on any failure."""

import itertools
import math
import struct
import sys

import numpy as np

from shardmill_test import scan_oracle

M64 = 1 << 64


def reference(arr, offset, shape, bins, lo, hi):
    fmt = {"f": {4: "<f", 8: "<d"}}
    checksum = 0
    weighted = 0
    counts = [0] * bins
    under = over = nan = 0
    strides = [int(np.prod(arr.shape[k + 1:])) for k in range(arr.ndim)]
    for idx in itertools.product(*[range(o, o + s) for o, s in zip(offset, shape)]):
        v = arr[idx]
        if arr.dtype.kind == "f":
            size = arr.dtype.itemsize
            u = int.from_bytes(struct.pack(fmt["f"][size], float(v)), "little")
            fv = float(v)
        elif arr.dtype.kind == "b":
            u = int(bool(v))
            fv = float(u)
        else:
            u = int(v) % M64
            fv = float(int(v))
        checksum = (checksum + u) % M64
        i = sum(a * b for a, b in zip(idx, strides))
        weighted = (weighted + u * (1 + i)) % M64
        if math.isnan(fv):
            nan += 1
        elif fv < lo:
            under += 1
        elif fv >= hi:
            over += 1
        else:
            counts[min(math.floor((fv - lo) * bins / (hi - lo)), bins - 1)] += 1
    if checksum >= 1 << 63:
        checksum -= M64
    return {"voxels": int(np.prod(shape)), "checksum": checksum, "weighted_checksum": weighted,
            "histogram": {"bins": bins, "range": [lo, hi], "counts": counts, "underflow": under,
                          "overflow": over, "nan": nan}}


def main():
    rng = np.random.default_rng(7)
    passed = failed = 0
    shape = (9, 11, 7)
    for dtype in ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                  "uint64", "float32", "float64"]:
        dt = np.dtype(dtype)
        if dt.kind == "f":
            a = (rng.normal(0, 1e3, shape)).astype(dt)
            a.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e30, -1e30]
            hists = [(50, -2000.0, 2000.0), (3, -0.5, 0.25)]
        elif dt.kind == "b":
            a = rng.integers(0, 2, shape).astype(bool)
            hists = [(2, 0.0, 2.0)]
        else:
            info = np.iinfo(dt)
            a = rng.integers(int(info.min), int(info.max), shape, dtype=dt, endpoint=True)
            a.reshape(-1)[:2] = [info.min, info.max]
            hists = [(17, float(info.min) / 3, float(info.max) / 2)]
            if dt.itemsize <= 2:
                hists.append(scan_oracle.default_hist(dt) if dtype != "uint8" else (256, 0.0, 256.0))
        for (off, shp), (bins, lo, hi) in itertools.product(
                [((0, 0, 0), shape), ((2, 3, 1), (5, 7, 6))], hists):
            got = scan_oracle.scan(a, off, shp, None, bins, lo, hi)
            got.pop("_rounded_up_to_last_bin")
            want = reference(a, off, shp, bins, lo, hi)
            ok = got == want
            name = f"{dtype} roi {off}+{shp} hist {bins}[{lo},{hi})"
            print(("ok   " if ok else "FAIL ") + name)
            if not ok:
                for k in want:
                    if got.get(k) != want[k]:
                        print(f"     {k}: oracle {got.get(k)} reference {want[k]}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
