#!/usr/bin/python3
"""input.format png (issue 36 #3, CONTRIBUTING.md "A new source"): PNG slices written by
independent writers and read by shardmill, value for value:
  - pypng (python3-png): a directory of 16-bit grayscale slices s1.png .. s12.png (natural order:
    s10 after s9) of a [12, 37, 53] volume, ingested (values kept) into Zarr v3 with shards
    [4, 16, 16] that cut every slice's rows and columns, decoded by shardmill_test.zarr_decode:
    equal to NumPy's volume; and converted with a percentile window at 2 threads: equal to
    NumPy's SPEC §5 window (shardmill_test.spec_oracle);
  - pypng: one Adam7-interlaced 16-bit file ([1, H, W]) and 8-bit and 4-bit slices (values as
    stored, not scaled to 8 bits);
  - Pillow (python3-pil): 8-bit "L" slices;
  - bad input, each exit 3 naming the file, and no output claimed complete (no completion
    marker): a color (RGB) slice among gray ones, a slice of another size, a truncated slice (found
    when its rows are decoded), a directory without .png files.
Usage: test_source_png.py --shardmill BIN --work DIR
"""

import argparse
import os
import shutil
import sys

import numpy as np
import png
from PIL import Image

from shardmill_test import runner as cc
from shardmill_test import spec_oracle
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks


def write_pypng(path, plane, bitdepth, interlace=False):
    h, w = plane.shape
    with open(path, "wb") as f:
        png.Writer(w, h, greyscale=True, bitdepth=bitdepth, interlace=interlace).write(
            f, plane.tolist())


def stack(work, name, vol, write):
    d = os.path.join(work, name)
    os.makedirs(d)
    for z in range(vol.shape[0]):
        write(os.path.join(d, f"s{z + 1}.png"), vol[z])
    return d


def ingest(args, work, name, store, extra=None):
    out = os.path.join(work, name + ".zarr")
    output = {"path": out, "fsync": False, "shard": [4, 16, 16], "chunk": [2, 8, 8]}
    cfg = {"job": "ingest", "input": {"store": store, "format": "png"}, "output": output,
           "progress": False}
    cfg.update(extra or {})
    path = cc.write_config(os.path.join(work, name + ".yaml"), cfg)
    return out, cc.run([args.shardmill, "run", path])


def check_values(c, label, out, r, want):
    if not c.check(f"{label}: exit 0", r.returncode == 0, cc.describe(r)):
        return
    got = zarr_decode.spec_decode(out)
    c.check(f"{label}: the output equals NumPy's volume, value for value",
            got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want),
            spec_oracle.first_diff(got, want) if got.shape == want.shape else got.shape)


def check_refused(c, label, args, work, name, store, what):
    out, r = ingest(args, work, name, store)
    c.check(f"{label}: exit 3 naming {what}", r.returncode == 3 and what in r.stderr,
            cc.describe(r))
    c.check(f"{label}: no output claimed complete (no marker)",
            not os.path.exists(os.path.join(out, "shardmill.complete.json")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = cc.fresh_dir(os.path.abspath(args.work))
    c = Checks("source_png")
    rng = np.random.default_rng(36)
    vol = rng.integers(0, 4096, (12, 37, 53)).astype("<u2")
    vol[3, 5:20, 7:30] = 65535  # the top of the range survives the byte order

    d16 = stack(work, "u16", vol, lambda p, a: write_pypng(p, a, 16))
    out, r = ingest(args, work, "u16", d16)
    check_values(c, "pypng 16-bit slices", out, r, vol)

    out = os.path.join(work, "pct.zarr")
    cfg = cc.write_config(os.path.join(work, "pct.yaml"), {
        "job": "convert", "input": {"store": d16, "format": "png"},
        "normalize": {"mode": "percentile", "lo": 1, "hi": 99},
        "output": {"path": out, "dtype": "uint16", "fsync": False, "shard": [4, 16, 16]},
        "parallel": {"threads": 2}, "progress": False})
    r = cc.run([args.shardmill, "run", cfg])
    want = spec_oracle.percentile_window(vol, 1, 99)
    want = np.rint(want.astype(np.float32) * np.float32(65535)).clip(0, 65535).astype("<u2")
    check_values(c, "pypng 16-bit slices, percentile window to uint16", out, r, want)

    one = os.path.join(work, "interlaced.png")
    write_pypng(one, vol[7], 16, interlace=True)
    out, r = ingest(args, work, "interlaced", one)
    check_values(c, "pypng Adam7-interlaced 16-bit file", out, r, vol[7:8])

    v8 = (vol >> 4).astype("u1")
    out, r = ingest(args, work, "u8", stack(work, "u8", v8, lambda p, a: write_pypng(p, a, 8)))
    check_values(c, "pypng 8-bit slices", out, r, v8)
    v4 = (vol & 15).astype("u1")
    out, r = ingest(args, work, "u4", stack(work, "u4", v4, lambda p, a: write_pypng(p, a, 4)))
    check_values(c, "pypng 4-bit slices (values as stored)", out, r, v4)
    out, r = ingest(args, work, "pil", stack(work, "pil", v8,
                                             lambda p, a: Image.fromarray(a, "L").save(p)))
    check_values(c, "Pillow 8-bit slices", out, r, v8)

    bad = stack(work, "rgb", vol[:3], lambda p, a: write_pypng(p, a, 16))
    rgb = (v8[1][:, :, None] * np.ones(3, "u1")).reshape(37, 53 * 3)
    with open(os.path.join(bad, "s2.png"), "wb") as f:
        png.Writer(53, 37, greyscale=False, bitdepth=8).write(f, rgb.tolist())
    check_refused(c, "an RGB slice", args, work, "rgb", bad, "s2.png")
    bad = stack(work, "size", vol[:3], lambda p, a: write_pypng(p, a, 16))
    write_pypng(os.path.join(bad, "s3.png"), vol[2, :36], 16)
    check_refused(c, "a slice of another size", args, work, "size", bad, "s3.png")
    bad = stack(work, "short", vol[:3], lambda p, a: write_pypng(p, a, 16))
    path = os.path.join(bad, "s2.png")
    os.truncate(path, os.path.getsize(path) // 2)
    check_refused(c, "a truncated slice", args, work, "short", bad, "s2.png")
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    open(os.path.join(empty, "notes.txt"), "w").write("no slices\n")
    check_refused(c, "a directory without .png files", args, work, "empty", empty, "no .png")
    status = c.done()
    if status == 0:
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
