#!/usr/bin/python3
"""Fixture arrays for the HTTP tier, written at test time into the build tree.

Usage: /usr/bin/python3 gen_fixtures.py OUTDIR

- v2_gzip.zarr      zarr-python 2.13, int16 [20,70,90], chunks [8,32,32], gzip, '.' keys,
                    all-fill chunks not written (write_empty_chunks=False)
- v2_nested.zarr    zarr-python 2.13, uint8 [50,130], chunks [16,32], zstd, '/' keys
- v3_sharded.zarr   tests/lib/shardmill_test/shard_writer.py, uint16 [24,100,100], shards [8,64,64],
                    inner [4,16,16], gzip, index at the end (+crc32c), empty inner chunks and a
                    missing shard
- v3_sharded_start.zarr  same data, zstd + crc32c inner codecs, index at the start
- v3_plain.zarr     shard_writer.py unsharded v3, float32 [30,40], chunks [16,16], gzip
- names.zarr        a v3 group whose arrays have names a URL must percent-encode
                    (space, %, #, ?, non-ASCII), with the decoy "pctA" next to "pct%41"

manifest.json lists each array with its expected-value file (.npy, C order), fill value,
chunk grid and one chunk key per array to aim faults at. If tests/lib/shardmill_test/shard_writer.py is
missing, the sharded arrays are skipped (the manifest says so).
"""

import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    from shardmill_test import shard_writer as sw
except ImportError:  # the interop engineer's writer is absent: sharded fixtures are skipped
    sw = None


NODE_NAMES = ["plain", "with space", "pct%41", "pctA", "hash#1", "q?x", "plus+1", "semi;c",
              "caf\u00e9"]


def smooth(shape, dtype, seed):
    """Compressible but position-dependent values (misplaced chunks show up)."""
    rng = np.random.default_rng(seed)
    idx = np.indices(shape)
    v = np.zeros(shape, dtype=np.int64)
    for d, w in enumerate((131, 17, 3)[-len(shape):]):
        v += idx[d] * w
    v += rng.integers(0, 4, size=shape)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is not None:
        v = (v % (int(info.max) - max(int(info.min), 0))) + max(int(info.min), 0) // 2
    return v.astype(dtype)


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: gen_fixtures.py OUTDIR")
    import zarr
    import numcodecs

    out = os.path.abspath(argv[1])
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    arrays = []

    def save(name, data, fill, chunks, fault_key, fault_box, fmt, meta_doc, **extra):
        np.save(os.path.join(out, name + ".npy"), np.ascontiguousarray(data))
        entry = {"name": name, "path": name + ".zarr", "expected": name + ".npy",
                 "dtype": data.dtype.name, "shape": list(data.shape), "fill": fill,
                 "chunks": chunks, "fault_key": fault_key, "fault_box": fault_box,
                 "zarr_format": fmt, "meta_doc": meta_doc}
        entry.update(extra)
        arrays.append(entry)

    # v2 gzip, '.' separator, some all-fill chunks absent.
    d = smooth((20, 70, 90), "int16", 1) - 3000
    d[0:8, 0:32, 64:90] = -7  # one whole chunk of fill: not written
    z = zarr.open(os.path.join(out, "v2_gzip.zarr"), mode="w", shape=d.shape, chunks=(8, 32, 32),
                  dtype="<i2", compressor=numcodecs.GZip(level=5), fill_value=-7,
                  write_empty_chunks=False)
    z[...] = d
    assert not os.path.exists(os.path.join(out, "v2_gzip.zarr", "0.0.2"))
    save("v2_gzip", d, -7, [8, 32, 32], "0.1.1", [[0, 8], [32, 64], [32, 64]], 2, ".zarray")

    # v2 zstd with '/' keys (nested directories over HTTP).
    d = smooth((50, 130), "uint8", 2)
    z = zarr.open(os.path.join(out, "v2_nested.zarr"), mode="w", shape=d.shape, chunks=(16, 32),
                  dtype="|u1", compressor=numcodecs.Zstd(level=3), fill_value=0,
                  dimension_separator="/")
    z[...] = d
    save("v2_nested", d, 0, [16, 32], "1/2", [[16, 32], [64, 96]], 2, ".zarray")

    if sw is not None:
        d = smooth((24, 100, 100), "uint16", 3)
        d[0:4, 0:16, 16:32] = 0     # an empty inner chunk in shard c/0/0/0
        d[8:16, 64:100, 64:100] = 0  # a whole shard of fill: c/1/1/1 not written
        sw.write_sharded_array(os.path.join(out, "v3_sharded.zarr"), d, (8, 64, 64), (4, 16, 16),
                               inner_codec="gzip", index_location="end", index_crc32c=True,
                               fill_value=0)
        assert not os.path.exists(os.path.join(out, "v3_sharded.zarr", "c", "1", "1", "1"))
        save("v3_sharded", d, 0, [8, 64, 64], "c/1/0/1", [[8, 16], [0, 64], [64, 100]], 3,
             "zarr.json", sharded=True)
        sw.write_sharded_array(os.path.join(out, "v3_sharded_start.zarr"), d, (8, 64, 64),
                               (4, 16, 16), inner_codec=["zstd", "crc32c"], index_location="start",
                               index_crc32c=True, fill_value=0)
        save("v3_sharded_start", d, 0, [8, 64, 64], "c/1/0/1", [[8, 16], [0, 64], [64, 100]], 3,
             "zarr.json", sharded=True)

        f = (np.arange(30 * 40, dtype=np.float32).reshape(30, 40) * np.float32(0.25)) - 7
        sw.write_plain_v3(os.path.join(out, "v3_plain.zarr"), f, (16, 16), codec="gzip",
                          fill_value=0.0)
        save("v3_plain", f, 0.0, [16, 16], "c/1/1", [[16, 30], [16, 32]], 3, "zarr.json")

    names = {}
    if sw is not None:
        # Node names that need percent-encoding in a URL; "pctA" is the decoy that an unescaped
        # "pct%41" would silently read instead.
        sw.write_group_v3(os.path.join(out, "names.zarr"))
        for i, n in enumerate(NODE_NAMES):
            v = (np.arange(6 * 7, dtype=np.uint8).reshape(6, 7) + np.uint8(11 * i + 1))
            sw.write_plain_v3(os.path.join(out, "names.zarr", n), v, (4, 4), codec="gzip")
            np.save(os.path.join(out, f"names_{i}.npy"), v)
            names[n] = f"names_{i}.npy"

    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump({"arrays": arrays, "sharded_writer": sw is not None,
                   "names": {"group": "names.zarr", "arrays": names}}, fh, indent=1)
    print(f"gen_fixtures: {len(arrays)} arrays in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
