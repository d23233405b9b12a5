#!/usr/bin/python3
"""output.shard auto made shallower by the read plan (issue 33 item 3, docs/internals/reading.md):
a 256^3 uint16 multi-page deflate TIFF (32 MiB decoded), percentile [1, 99] to float32
(the default shard [256, 256, 128]: two shards share every slice), limits.memory_bytes 48 MiB,
so a group's window at the default shard depth (256: 32 MiB) does not fit half the limit and the
plan picks depth 192 (24 MiB). limits.memory_ceiling is off: the budget is a knob here, not a
ceiling of the process. The writer must use the depth the
partition used: before the fix the convert stopped with exit 1, "plan of 4 shards for a grid of
2". Checks: exit 0 under 1x1 and (with --mpiexec) 2x1; zarr.json's shard depth 192 and the
report's io.source.layout.why saying so; the values equal NumPy's SPEC §5 percentile window
(shardmill_test.zarr_decode, written from the Zarr v3 spec); every run the same shard files; an OME image's level 0 too.

    test_shard_depth.py --shardmill BIN --work DIR [--mpiexec MPIEXEC]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

from shardmill_test import file_tree
from shardmill_test import report_json
from shardmill_test import runner as cc
from shardmill_test import spec_oracle
from shardmill_test import volumes
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks
from shardmill_test.ranks import mpi_env, plain_env

SHAPE = (256, 256, 256)
MEMORY = 48 << 20
DEPTH = 192
PCT = (1, 99)


def volume():
    return volumes.phantom_slices(SHAPE)


def oracle(vol):
    return spec_oracle.percentile_window(vol, PCT[0], PCT[1]).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mpiexec")
    args = ap.parse_args()
    import tifffile
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    vol = volume()
    want = oracle(vol)
    tif = os.path.join(args.work, "multi.tif")
    with tifffile.TiffWriter(tif) as w:
        for z in range(SHAPE[0]):
            w.write(vol[z], contiguous=False, compression="zlib", rowsperstrip=SHAPE[1])
    c = Checks("shard_depth")
    first = None
    for ranks, threads in [(1, 1)] + ([(2, 1)] if args.mpiexec else []):
        label = f"{ranks}x{threads}"
        out = os.path.join(args.work, label + ".zarr")
        cfg = cc.write_config(os.path.join(args.work, label + ".yaml"), {
            "job": "convert", "input": {"store": tif, "format": "tiff"},
            "normalize": {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]},
            "output": {"path": out, "fsync": False},
            "limits": {"memory_bytes": MEMORY, "memory_ceiling": False}, "parallel": {"threads": threads},
            "progress": False})
        rep_path = os.path.join(args.work, label + ".report.json")
        argv = [args.shardmill, "run", cfg, "--report", rep_path]
        if ranks == 1:
            cmd, env = argv, plain_env()
        else:
            cmd, env = [args.mpiexec, "--oversubscribe", "-np", str(ranks)] + argv, mpi_env()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if not c.check(f"{label}: convert exits 0", p.returncode == 0,
                       f"exit {p.returncode}: {p.stderr[-600:]}"):
            continue
        shard = json.load(open(os.path.join(out, "zarr.json")))["chunk_grid"]["configuration"][
            "chunk_shape"]
        c.check(f"{label}: shard depth {shard[0]} == {DEPTH}", shard[0] == DEPTH)
        rep = report_json.load(rep_path)
        why = ((rep.get("io") or {}).get("source") or {}).get("layout", {}).get("why", "")
        c.check(f"{label}: the report says why: {why!r}", f"shard depth {DEPTH}" in why)
        if first is None:
            got = zarr_decode.spec_decode(out)
            c.check(f"{label}: output = NumPy's percentile window (float32)",
                    got.dtype == want.dtype and np.array_equal(got, want),
                    spec_oracle.first_diff(got, want))
            first = (label, out)
        else:
            same, how = file_tree.same_tree(os.path.join(first[1], "c"), os.path.join(out, "c"))
            c.check(f"{label}: the same shard files as {first[0]}", same, how)
    # an OME image: level 0 takes the shallower depth, the levels below level 0's grid
    out = os.path.join(args.work, "ome.zarr")
    cfg = cc.write_config(os.path.join(args.work, "ome.yaml"), {
        "job": "convert", "input": {"store": tif, "format": "tiff"},
        "normalize": {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]},
        "output": {"path": out, "fsync": False, "ome": {"levels": 2}},
        "limits": {"memory_bytes": MEMORY, "memory_ceiling": False}, "parallel": {"threads": 1}, "progress": False})
    p = subprocess.run([args.shardmill, "run", cfg], env=plain_env(), capture_output=True,
                       text=True)
    if c.check("ome 1x1: convert exits 0", p.returncode == 0,
               f"exit {p.returncode}: {p.stderr[-600:]}"):
        got = zarr_decode.spec_decode(os.path.join(out, "0"))
        c.check("ome 1x1: level 0 = NumPy's percentile window (float32)",
                got.dtype == want.dtype and np.array_equal(got, want),
                spec_oracle.first_diff(got, want))
    shutil.rmtree(args.work, ignore_errors=True)
    return c.done()


if __name__ == "__main__":
    sys.exit(main())
