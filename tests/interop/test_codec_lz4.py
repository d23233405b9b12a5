#!/usr/bin/python3
"""output.codec.name lz4 (numcodecs.lz4, issue 36 #3), read by independent decoders:
  - OME-NGFF 0.4 (Zarr v2): zarr-python 2.13 with numcodecs 0.11's LZ4 reads every level equal to
    the ingested volume (level 0) and to NumPy's nearest strides; the .zarray names
    {"id": "lz4", "acceleration": N};
  - Zarr v3, unsharded: every chunk file is a numcodecs LZ4 block (python3-lz4's
    lz4.block.decompress with its 4-byte size) whose values equal NumPy's slice of the volume;
  - a level outside the writer's range is exit 2 naming output.codec.level.
Usage: test_codec_lz4.py --shardmill BIN --work DIR
"""

import argparse
import json
import os
import shutil
import sys

import lz4.block
import numpy as np
import zarr

from shardmill_test import runner as cc
from shardmill_test.checks import Checks


def ingest(args, work, name, vol, output):
    raw = os.path.join(work, "vol.raw")
    vol.tofile(raw)
    out = os.path.join(work, name)
    output = dict(output, path=out, fsync=False)
    cfg = cc.write_config(os.path.join(work, name + ".yaml"), {
        "job": "ingest",
        "input": {"store": raw, "format": "raw",
                  "raw": {"dtype": "uint16", "shape": list(vol.shape)}},
        "output": output, "progress": False})
    return out, cc.run([args.shardmill, "run", cfg])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    c = Checks("write_lz4")
    rng = np.random.default_rng(36)
    vol = (rng.integers(0, 50, (6, 40, 36)) * 7).astype("<u2")  # compressible, not trivial

    out, r = ingest(args, args.work, "v04.zarr", vol,
                    {"codec": {"name": "lz4", "level": 2},
                     "ome": {"levels": 2, "method": "nearest", "downsample": "yx",
                             "version": "0.4"}})
    c.check("ingest 0.4 with lz4: exit 0", r.returncode == 0, cc.describe(r))
    if r.returncode == 0:
        za = json.load(open(os.path.join(out, "0", ".zarray")))
        c.check(".zarray compressor is numcodecs' lz4", za["compressor"] ==
                {"acceleration": 2, "id": "lz4"}, za["compressor"])
        g = zarr.open_group(out, mode="r")
        c.check("zarr-python 2.13 reads level 0 == the volume",
                np.array_equal(g["0"][...], vol), g["0"].shape)
        c.check("zarr-python 2.13 reads level 1 == NumPy's strides",
                np.array_equal(g["1"][...], vol[:, ::2, ::2]), g["1"].shape)

    out, r = ingest(args, args.work, "v3.zarr", vol,
                    {"codec": {"name": "lz4", "level": 1}, "shard": [], "chunk": [2, 16, 16]})
    c.check("ingest v3 unsharded with lz4: exit 0", r.returncode == 0, cc.describe(r))
    if r.returncode == 0:
        meta = json.load(open(os.path.join(out, "zarr.json")))
        c.check("zarr.json names numcodecs.lz4", meta["codecs"][-1] ==
                {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}, meta["codecs"])
        n = 0
        for z in range(0, 6, 2):
            for y in range(0, 40, 16):
                for x in range(0, 36, 16):
                    key = os.path.join(out, "c", str(z // 2), str(y // 16), str(x // 16))
                    want = np.zeros((2, 16, 16), "<u2")
                    part = vol[z:z + 2, y:y + 16, x:x + 16]
                    want[:part.shape[0], :part.shape[1], :part.shape[2]] = part
                    if not os.path.exists(key):
                        c.check(f"chunk {key} exists (no value is the fill)", not part.any())
                        continue
                    got = np.frombuffer(lz4.block.decompress(open(key, "rb").read()), "<u2")
                    n += np.array_equal(got.reshape(2, 16, 16), want)
        c.check("every chunk is a numcodecs LZ4 block of NumPy's slice", n == 3 * 3 * 3, n)

    out, r = ingest(args, args.work, "bad.zarr", vol, {"codec": {"name": "lz4", "level": 0}})
    c.check("lz4 level 0 is exit 2 naming output.codec.level",
            r.returncode == 2 and "output.codec.level" in r.stderr, cc.describe(r))
    c.check("nothing is created", not os.path.exists(out))
    return c.done()


if __name__ == "__main__":
    sys.exit(main())
