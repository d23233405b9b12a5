#!/usr/bin/python3
"""Fixtures for the scan oracle tests (tests/oracle), generated at test time in the build tree.

    /usr/bin/python3 gen_fixtures.py OUTDIR [--node NODE]

Writes 3-D arrays of shape [70, 90, 50] with chunks [16, 16, 16] (edge chunks on every axis),
for uint8, int16, uint16 and float32, twice: Zarr v2 by zarr-python 2.13 (OUTDIR/v2_<dtype>) and
Zarr v3 by zarrita.js 0.7.5 (OUTDIR/v3_<dtype>), plus OUTDIR/manifest.json. Values span the type
range (extremes included); float32 adds NaN, ±Infinity, -0.0, subnormals and exact bin edges of
the ranges the tests use. Some fixtures have order F, big-endian bytes, transpose codecs and
deleted chunks (read as the fill value). Nothing here reads the arrays with shardmill.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numcodecs
import numpy as np
import zarr

SHAPE = (70, 90, 50)
CHUNKS = (16, 16, 16)
HERE = os.path.dirname(os.path.abspath(__file__))

# Ranges of the explicit-histogram cases (check_scan.py uses the same table): float32 values
# include the exact edges of these.
CUSTOM_HIST = {
    "uint8": (10, 3.5, 200.25),
    "int16": (100, -1000.0, 3000.0),
    "uint16": (7, 100.0, 60000.0),
    "float32": (64, -500.5, 700.25),
}


def values(dtype, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(SHAPE))
    z, y, x = np.indices(SHAPE)
    if dtype == "float32":
        v = (rng.normal(0.0, 400.0, n).reshape(SHAPE) + 3.0 * z - 2.0 * y).astype(np.float32)
        flat = v.reshape(-1)
        b, lo, hi = CUSTOM_HIST["float32"]
        edges = (lo + np.arange(b + 1) * ((hi - lo) / b)).astype(np.float32)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 3.4e38, -3.4e38,
                             lo, hi, np.nextafter(np.float32(hi), np.float32(0))],
                            dtype=np.float32)
        pos = rng.choice(n, size=4000, replace=False)
        pool = np.concatenate([specials, edges])
        flat[pos] = pool[np.arange(pos.size) % pool.size]
        return v
    info = np.iinfo(dtype)
    v = rng.integers(int(info.min), int(info.max) + 1, size=n, dtype=np.int64).reshape(SHAPE)
    # a smooth part so histograms and weighted sums are not just noise
    smooth = ((z * 7 + y * 3 + x * 5) % (int(info.max) - int(info.min) + 1)) + int(info.min)
    v = np.where((z + y) % 3 == 0, smooth, v)
    flat = v.reshape(-1)
    flat[:4] = [info.min, info.max, 0, info.max]
    return v.astype(dtype)


V2 = {
    # dtype: (numpy dtype with byte order, compressor, order, fill, deleted chunk)
    "uint8": ("|u1", numcodecs.Zstd(level=3), "C", 0, (1, 2, 0)),
    "int16": ("<i2", numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE), "F",
              -7, (4, 5, 3)),
    "uint16": (">u2", numcodecs.GZip(level=6), "C", 0, None),
    "float32": ("<f4", numcodecs.Zlib(level=5), "C", np.nan, (0, 0, 0)),
}

BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}
BYTES_BE = {"name": "bytes", "configuration": {"endian": "big"}}
ZSTD = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
V3 = {
    "uint8": ([BYTES_LE, ZSTD], 0, [1, 2, 0]),
    "int16": ([{"name": "transpose", "configuration": {"order": [2, 0, 1]}}, BYTES_BE, ZSTD], -7,
              [4, 5, 3]),
    "uint16": ([BYTES_LE], 0, None),
    "float32": ([BYTES_LE, ZSTD], "NaN", [0, 0, 0]),
}


def fill_json(f):
    if isinstance(f, float) and np.isnan(f):
        return "NaN"
    return f


def apply_delete(data, chunk, fill):
    if chunk is None:
        return
    sl = tuple(slice(i * c, (i + 1) * c) for i, c in zip(chunk, CHUNKS))
    data[sl] = np.nan if fill == "NaN" else fill


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--node", default="node")
    a = ap.parse_args(argv)
    out = os.path.abspath(a.outdir)
    os.makedirs(out, exist_ok=True)
    manifest = {"shape": list(SHAPE), "chunks": list(CHUNKS), "custom_hist": CUSTOM_HIST,
                "arrays": []}
    js_spec = {"arrays": []}
    v3_data = {}
    for k, dtype in enumerate(V2):
        npdt, comp, order, fill, dele = V2[dtype]
        data = values(dtype, 100 + k)
        apply_delete(data, dele, fill)
        d = os.path.join(out, f"v2_{dtype}")
        shutil.rmtree(d, ignore_errors=True)
        z = zarr.open_array(d, mode="w", shape=SHAPE, chunks=CHUNKS, dtype=npdt,
                            compressor=comp, order=order, fill_value=fill)
        z[...] = data
        if dele is not None:
            os.unlink(os.path.join(d, ".".join(map(str, dele))))
        back = zarr.open_array(d, mode="r")[...]
        if not np.array_equal(back, data, equal_nan=True):
            sys.exit(f"gen_fixtures: zarr-python read back v2_{dtype} differently")
        manifest["arrays"].append({"name": f"v2_{dtype}", "path": f"v2_{dtype}", "dtype": dtype,
                                   "zarr_format": 2, "writer": f"zarr-python {zarr.__version__}",
                                   "fill_value": fill_json(fill), "order": order,
                                   "compressor": comp.codec_id,
                                   "deleted_chunk": list(dele) if dele else None})
    for k, dtype in enumerate(V3):
        codecs, fill, dele = V3[dtype]
        data = values(dtype, 200 + k)
        apply_delete(data, dele, fill)
        v3_data[dtype] = data
        raw = os.path.join(out, f"v3_{dtype}.input.raw")
        data.astype(np.dtype(dtype).newbyteorder("<")).tofile(raw)
        js_spec["arrays"].append({"dir": os.path.join(out, f"v3_{dtype}"), "raw": raw,
                                  "dtype": dtype, "shape": list(SHAPE), "chunks": list(CHUNKS),
                                  "codecs": codecs, "fill": fill,
                                  "delete": [dele] if dele else []})
        manifest["arrays"].append({"name": f"v3_{dtype}", "path": f"v3_{dtype}", "dtype": dtype,
                                   "zarr_format": 3, "writer": "zarrita.js",
                                   "fill_value": fill, "codecs": [c["name"] for c in codecs],
                                   "deleted_chunk": dele})
    spec_path = os.path.join(out, "v3_spec.json")
    with open(spec_path, "w") as f:
        json.dump(js_spec, f)
    subprocess.run([a.node, os.path.join(HERE, "gen_fixtures_v3.mjs"), spec_path], check=True)
    for raw in js_spec["arrays"]:
        os.unlink(raw["raw"])
    from shardmill_test import scan_oracle

    for dtype, data in v3_data.items():
        back = scan_oracle.load_array(os.path.join(out, f"v3_{dtype}"), node=a.node)
        if back.dtype != data.dtype or not np.array_equal(back, data, equal_nan=True):
            sys.exit(f"gen_fixtures: zarrita.js read back v3_{dtype} differently")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"gen_fixtures: {len(manifest['arrays'])} arrays in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
