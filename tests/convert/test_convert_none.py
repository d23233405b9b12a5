"""`normalize.mode: none` (SPEC §2, issue 14): convert re-encodes / rechunks without changing a
value. Inputs written by zarr-python 2.13 (Zarr v2); every output value read back by zarrita.js
0.7.5 must equal the input's (cast to output.dtype when that widens losslessly), bit for bit;
the report's input checksums and output checksums against NumPy (SPEC §5); the marker and
`shardmill verify`. A narrowing output.dtype is refused: exit 2, one line naming output.dtype.

Usage: /usr/bin/python3 test_convert_none.py --shardmill BIN --node NODE --work DIR --family F
Families (one ctest each, label `convert`): int16, uint8, float32, narrowing.
"""

import json
import os

import numpy as np

from shardmill_test import report_json
from shardmill_test import spec_oracle
from shardmill_test import runner as cc

SHAPE = (20, 40, 50)
CHUNKS = (16, 16, 16)
ROI = ([1, 2, 3], [18, 37, 45])  # chunk-straddling, edge shards
LAYOUT = {"shard": [8, 32, 32], "chunk": [2, 16, 16]}  # shards smaller than an input chunk


def values_for(dtype, seed=5):
    rng = np.random.default_rng(seed)
    if dtype == "int16":
        v = rng.integers(-32768, 32768, SHAPE).astype(np.int16)
    elif dtype == "uint8":
        v = rng.integers(0, 256, SHAPE).astype(np.uint8)
    else:
        v = rng.normal(0, 1000, SHAPE).astype(np.float32)
        v.flat[[0, 1, 2]] = [np.float32(-0.0), np.float32(1e-42), np.float32(3.4e38)]
    return v


def make_input(work, dtype):
    import numcodecs
    import zarr
    vals = values_for(dtype)
    path = os.path.join(work, f"{dtype}.in.zarr")
    z = zarr.open(path, mode="w", shape=SHAPE, chunks=CHUNKS, dtype=vals.dtype,
                  compressor=numcodecs.Zstd(level=1))
    z[:] = vals
    return path, vals


def convert(c, args, work, name, inp, dtype_out=None, hist=None, threads=2):
    out_rel = name + ".zarr"
    cfg = {"job": "convert", "input": {"store": inp}, "normalize": {"mode": "none"},
           "roi": {"offset": ROI[0], "shape": ROI[1]},
           "output": dict(LAYOUT, path=out_rel), "parallel": {"threads": threads},
           "progress": False}
    if dtype_out is not None:
        cfg["output"]["dtype"] = dtype_out
    if hist is not None:
        cfg["histogram"] = hist
    path = cc.write_config(os.path.join(work, name + ".yaml"), cfg)
    rep = os.path.join(work, name + ".report.json")
    r = cc.run([args.shardmill, "run", path, "--report", rep], cwd=work)
    return r, os.path.join(work, out_rel), rep


def family_values(c, args, work, dtype, widen, hist=None):
    inp, vals = make_input(work, dtype)
    sel = tuple(slice(o, o + s) for o, s in zip(*ROI))
    src = vals[sel]
    arrays = []
    for target in [None] + widen:
        name = f"{dtype}_to_{target or 'same'}"
        r, out, rep_path = convert(c, args, work, name, inp, target, hist)
        if not c.check(f"{name} convert exits 0", r.returncode == 0, cc.describe(r)):
            continue
        want = src.astype(target) if target else src
        meta = json.load(open(os.path.join(out, "zarr.json")))
        c.check(f"{name} zarr.json data_type {want.dtype.name}",
                meta.get("data_type") == want.dtype.name, meta.get("data_type"))
        rep = report_json.load(rep_path)
        res = rep.get("result", {})
        s, w = spec_oracle.checksums(src, vals.shape, ROI[0])
        c.check(f"{name} report input checksums",
                res.get("checksum") == s and res.get("weighted_checksum") == w,
                (res.get("checksum"), res.get("weighted_checksum"), s, w))
        os_, ow = spec_oracle.checksums(want, want.shape, [0, 0, 0])
        c.check(f"{name} report output checksums",
                res.get("output_checksum") == os_ and res.get("output_weighted_checksum") == ow,
                (res.get("output_checksum"), res.get("output_weighted_checksum"), os_, ow))
        c.check(f"{name} report normalization none",
                res.get("normalization", {}).get("mode") == "none", res.get("normalization"))
        prov = meta.get("attributes", {}).get("shardmill", {})
        c.check(f"{name} provenance histogram voxels",
                prov.get("histogram", {}).get("voxels") == int(np.prod(ROI[1])),
                prov.get("histogram"))
        cc.check_marker(c, name, out)
        v = cc.run([args.shardmill, "verify", out])
        c.check(f"{name} verify", v.returncode == 0, cc.describe(v))
        arrays.append((name, out, want, [([3, 5, 7], [4, 30, 9])]))
    # 1 thread gives the same bytes as 2 (SPEC §1)
    r, out1, _ = convert(c, args, work, f"{dtype}_t1", inp, None, hist, threads=1)
    if c.check(f"{dtype} 1 thread exits 0", r.returncode == 0, cc.describe(r)):
        diffs = cc.tree_diff(out1, os.path.join(work, f"{dtype}_to_same.zarr"))
        c.check(f"{dtype} 1 and 2 threads byte-identical", not diffs, "; ".join(diffs[:8]))
    cc.zarrita_read_all(c, args.node, work, arrays)


def family_narrowing(c, args, work):
    inp, _ = make_input(work, "int16")
    for target in ["uint8", "int8", "uint16", "uint32"]:  # int16 -> float32 is exact
        r, out, _ = convert(c, args, work, f"narrow_{target}", inp, target)
        lines = cc.one_error_line(r.stderr)
        c.check(f"int16 -> {target} refused with exit 2", r.returncode == 2, cc.describe(r))
        c.check(f"int16 -> {target}: one line naming output.dtype and the cast",
                len(lines) == 1 and lines[0].startswith("shardmill: error: output.dtype: ")
                and f"int16 -> {target}" in lines[0] and "narrowing" in lines[0], lines)
        c.check(f"int16 -> {target}: no output", not os.path.exists(os.path.join(
            out, "shardmill.complete.json")), out)


FAMILIES = {
    "int16": lambda c, a, w: family_values(c, a, w, "int16", ["int32", "float64"]),
    "uint8": lambda c, a, w: family_values(c, a, w, "uint8", ["uint16", "int16", "float32"]),
    "float32": lambda c, a, w: family_values(c, a, w, "float32", ["float64"],
                                             hist={"bins": 16, "range": [-4000, 4000]}),
    "narrowing": family_narrowing,
}


def main():
    return cc.group_main("convert.none", FAMILIES, no_node=("narrowing",), flag="family")


if __name__ == "__main__":
    cc.main_guard(main)
