#!/usr/bin/python3
"""Synthetic CT-like Zarr v3 uint16 volumes for the scaling and memory benchmarks (SPEC §8 W5,
issue 5), written chunk by chunk (or shard by shard), never held whole. Run with /usr/bin/python3.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/make_volume.py data/scaling/vol-1024.zarr \
        --shape 1024,1024,1024
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/make_volume.py OUT --shape 512,512,512 \
        --shard 256,256,256 --jobs 2

Layout (Zarr v3 core spec, https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html):
data_type uint16, regular chunk grid `--chunk` (default 64³), `default` chunk keys with "/",
fill_value 0, codecs [bytes little, zstd level `--level` (3), checksum false]; with `--shard`
one sharding_indexed codec (inner chunks `--chunk`, the same inner codecs, index codecs
[bytes little, crc32c], index at the end), encoded by shardmill_test/shard_writer.py's helpers.
Edge chunks are padded with the fill value, as the spec requires.

Content (deterministic, from the shape and `--seed` only): a head-CT-like phantom in 12-bit
values: air (~40), an ellipsoidal body (~1040) with a slow low-frequency variation, a bone shell
(~2200), a few dense spheres, plus Gaussian noise (σ = `--noise`, 20) from a NumPy PCG64 stream
seeded by (seed, chunk index), clipped to [0, 4095]. zstd level 3 compresses it ~2.4:1 (noise
dominates), like real CT rather than like a constant.

While writing, the generator computes the NumPy oracle of the whole array (SPEC §5): checksum
(Σ v, int64 wrapping), weighted_checksum (Σ v·(1+i) mod 2^64), the exact uint16 histogram
summary (min, max, non-zero bins, SHA-256 of the 65536 counts), and the output checksums of
`convert` with `normalize: {mode: scale, divisor: --divisor}` over the whole array (float32 bit
patterns of float32(v)/float32(divisor), i the linear output index). They are stored in
`<path>.manifest.json`, written last: the array is complete iff its manifest exists.

Idempotent: when `<path>.manifest.json` exists with the same parameters the array is kept (and
the manifest printed); otherwise the array is written into `<path>.tmp-<pid>` and renamed into
place. The data goes under an ignored folder (data/, build/), never into git.
"""

import argparse
import datetime
import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import time

import numpy as np
import zstandard

from shardmill_test import shard_writer as sw  # the project's independent Zarr v3 writer

GENERATOR = "scaling/make_volume.py v1"
U64 = np.uint64


def parse_dims(text):
    v = [int(x) for x in str(text).replace("x", ",").split(",") if x.strip()]
    if len(v) != 3 or min(v) <= 0:
        raise argparse.ArgumentTypeError(f"expected three positive extents, got {text!r}")
    return v


def grid(shape, chunk):
    return [-(-s // c) for s, c in zip(shape, chunk)]


# ---- content ----

def phantom(shape, start, extent, seed, noise, block_index):
    """Values of the box [start, start+extent) clipped to the array, as uint16 (C order)."""
    Z, Y, X = shape
    ext = [min(e, s - o) for e, s, o in zip(extent, shape, start)]
    # normalized coordinates in [-1, 1] at voxel centres
    z = ((np.arange(start[0], start[0] + ext[0]) + 0.5) / Z * 2 - 1)[:, None, None]
    y = ((np.arange(start[1], start[1] + ext[1]) + 0.5) / Y * 2 - 1)[None, :, None]
    x = ((np.arange(start[2], start[2] + ext[2]) + 0.5) / X * 2 - 1)[None, None, :]
    r2 = (z / 0.92) ** 2 + (y / 0.80) ** 2 + (x / 0.70) ** 2   # body ellipsoid
    v = np.where(r2 < 1.0, 1040.0, 40.0)
    v = v + np.where(r2 < 1.0, 90.0 * np.sin(3.1 * z + 1.3) * np.cos(2.3 * y - 0.4) *
                     np.cos(1.7 * x + 0.2), 0.0)
    shell = (r2 > 0.78) & (r2 < 0.88)                            # a bone shell
    v = np.where(shell, 2200.0 + 200.0 * np.cos(5.0 * x) * np.cos(4.0 * y), v)
    for cz, cy, cx, rad, val in ((0.3, 0.2, -0.25, 0.16, 1800.0), (-0.35, -0.3, 0.2, 0.12, 2900.0),
                                 (0.0, 0.35, 0.3, 0.09, 600.0), (-0.1, -0.05, -0.05, 0.2, 1250.0)):
        d2 = (z - cz) ** 2 + (y - cy) ** 2 + (x - cx) ** 2
        v = np.where(d2 < rad * rad, val, v)
    rng = np.random.Generator(np.random.PCG64([seed, block_index]))
    v = v + rng.standard_normal(size=tuple(ext), dtype=np.float32) * np.float32(noise)
    return np.clip(np.rint(v), 0, 4095).astype(np.uint16)


# ---- the oracle, per block ----


def phantom_slices(shape, seed=33, noise=30.0):
    """The whole phantom of shape, slice by slice as the read-once tests and W9 make it (each
    z slice one block_index of phantom), as uint16."""
    z, y, x = shape
    return np.concatenate([phantom(shape, [k, 0, 0], [1, y, x], seed, noise, k) for k in range(z)])

def block_oracle(vals, start, shape, divisor):
    """Partial SPEC §5 sums of one block (all modulo 2^64) and its histogram."""
    Z, Y, X = shape
    ez, ey, ex = vals.shape
    zi = (np.arange(start[0], start[0] + ez, dtype=U64) * U64(Y * X))[:, None, None]
    yi = (np.arange(start[1], start[1] + ey, dtype=U64) * U64(X))[None, :, None]
    xi = np.arange(start[2], start[2] + ex, dtype=U64)[None, None, :] + U64(1)
    w = zi + yi + xi                                   # 1 + linear C-order index
    u = vals.astype(U64)
    out = (vals.astype(np.float32) / np.float32(divisor)).view(np.uint32).astype(U64)
    with np.errstate(over="ignore"):
        return {"sum": int(np.sum(u, dtype=U64)), "weighted": int(np.sum(u * w, dtype=U64)),
                "out_sum": int(np.sum(out, dtype=U64)),
                "out_weighted": int(np.sum(out * w, dtype=U64)),
                "hist": np.bincount(vals.reshape(-1), minlength=65536).astype(np.int64)}


def merge(acc, part):
    m = (1 << 64) - 1
    for k in ("sum", "weighted", "out_sum", "out_weighted"):
        acc[k] = (acc[k] + part[k]) & m
    acc["hist"] += part["hist"]
    acc["stored_bytes"] += part["stored_bytes"]
    acc["objects"] += part["objects"]


def padded(vals, shape):
    if vals.shape == tuple(shape):
        return vals
    b = np.zeros(shape, dtype=vals.dtype)
    b[tuple(slice(0, n) for n in vals.shape)] = vals
    return b


def write_file(path, blob):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(blob)


# ---- workers: one z-row of objects (chunks or shards) each ----

def work_row(args):
    root, p, oz = args
    shape, obj = p["shape"], p["shard"] or p["chunk"]
    g = grid(shape, obj)
    acc = {"sum": 0, "weighted": 0, "out_sum": 0, "out_weighted": 0,
           "hist": np.zeros(65536, dtype=np.int64), "stored_bytes": 0, "objects": 0}
    cctx = zstandard.ZstdCompressor(level=p["level"])
    cg = grid(shape, p["chunk"])
    for oy in range(g[1]):
        for ox in range(g[2]):
            idx = (oz, oy, ox)
            start = [i * n for i, n in zip(idx, obj)]
            if p["shard"] is None:
                lin = (oz * cg[1] + oy) * cg[2] + ox
                vals = phantom(shape, start, obj, p["seed"], p["noise"], lin)
                blob = cctx.compress(padded(vals, obj).astype("<u2").tobytes())
                part = block_oracle(vals, start, shape, p["divisor"])
            else:
                # a shard's block is generated inner chunk by inner chunk (the same noise stream
                # per chunk index as the unsharded layout, so both layouts hold equal values)
                block = np.zeros(obj, dtype=np.uint16)
                part = None
                sub = [o // c for o, c in zip(obj, p["chunk"])]
                for iz in range(sub[0]):
                    for iy in range(sub[1]):
                        for ix in range(sub[2]):
                            cidx = [i * s + j for i, s, j in zip(idx, sub, (iz, iy, ix))]
                            cstart = [c * n for c, n in zip(cidx, p["chunk"])]
                            if any(s >= e for s, e in zip(cstart, shape)):
                                continue
                            lin = (cidx[0] * cg[1] + cidx[1]) * cg[2] + cidx[2]
                            vals = phantom(shape, cstart, p["chunk"], p["seed"], p["noise"], lin)
                            sl = tuple(slice(j * c, j * c + n) for j, c, n in
                                       zip((iz, iy, ix), p["chunk"], vals.shape))
                            block[sl] = vals
                            q = block_oracle(vals, cstart, shape, p["divisor"])
                            if part is None:
                                part = q
                            else:
                                part["hist"] += q["hist"]
                                for k in ("sum", "weighted", "out_sum", "out_weighted"):
                                    part[k] = (part[k] + q[k]) & ((1 << 64) - 1)
                blob = sw._encode_shard(block, tuple(p["chunk"]), ["zstd"], "little", "end",
                                        True, np.uint16(0), False, None, p["level"])
            write_file(os.path.join(root, "c", str(oz), str(oy), str(ox)), blob)
            part["stored_bytes"] = len(blob)
            part["objects"] = 1
            merge(acc, part)
    return acc


def array_meta(p):
    inner = [sw._bytes_json("little")] + sw._b2b_json(["zstd"], p["level"], 2)
    if p["shard"] is None:
        codecs, grid_shape = inner, p["chunk"]
    else:
        codecs = [sw._sharding_json(p["chunk"], ["zstd"], "little", "end", True, None,
                                    p["level"], 2)]
        grid_shape = p["shard"]
    return {"zarr_format": 3, "node_type": "array", "shape": p["shape"], "data_type": "uint16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid_shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": codecs,
            "attributes": {"generator": GENERATOR, "params": p}}


def manifest_path(path):
    return path.rstrip("/") + ".manifest.json"


def load_manifest(path, params):
    mp = manifest_path(path)
    try:
        with open(mp) as f:
            man = json.load(f)
    except (OSError, ValueError):
        return None
    if man.get("params") != params or not os.path.exists(os.path.join(path, "zarr.json")):
        return None
    return man


def ensure_volume(path, shape, chunk=(64, 64, 64), shard=None, level=3, seed=20261203,
                  noise=20.0, divisor=4095.0, jobs=1, quiet=False):
    """Write the volume unless an identical one exists; return its manifest (with the oracle)."""
    path = os.path.abspath(path)
    params = {"generator": GENERATOR, "shape": list(shape), "chunk": list(chunk),
              "shard": list(shard) if shard else None, "level": int(level), "seed": int(seed),
              "noise": float(noise), "divisor": float(divisor)}
    if shard is not None and any(s % c for s, c in zip(shard, chunk)):
        raise SystemExit("make_volume: --shard must be a multiple of --chunk")
    man = load_manifest(path, params)
    if man is not None:
        if not quiet:
            print(f"make_volume: {path} exists with the same parameters: kept", file=sys.stderr)
        return man
    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    t0 = time.monotonic()
    with open(os.path.join(tmp, "zarr.json"), "w") as f:
        json.dump(array_meta(params), f, indent=2)
    rows = grid(shape, shard or chunk)[0]
    acc = {"sum": 0, "weighted": 0, "out_sum": 0, "out_weighted": 0,
           "hist": np.zeros(65536, dtype=np.int64), "stored_bytes": 0, "objects": 0}
    tasks = [(tmp, params, oz) for oz in range(rows)]
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for i, part in enumerate(pool.imap_unordered(work_row, tasks)):
                merge(acc, part)
                if not quiet:
                    print(f"\rmake_volume: {i + 1}/{rows} z-rows", end="", file=sys.stderr)
    else:
        for i, t in enumerate(tasks):
            merge(acc, work_row(t))
            if not quiet:
                print(f"\rmake_volume: {i + 1}/{rows} z-rows", end="", file=sys.stderr)
    if not quiet:
        print("", file=sys.stderr)
    hist = acc["hist"]
    nz = np.nonzero(hist)[0]
    voxels = int(np.prod(shape))
    assert int(hist.sum()) == voxels
    m64 = (1 << 64) - 1

    def signed(v):
        return v - (1 << 64) if v >= (1 << 63) else v

    man = {"path": path, "params": params, "zarr_json": array_meta(params),
           "voxels": voxels, "raw_bytes": voxels * 2, "stored_bytes": acc["stored_bytes"],
           "objects": acc["objects"],
           "compression_ratio": round(voxels * 2 / max(1, acc["stored_bytes"]), 3),
           "oracle": {"checksum": signed(acc["sum"] & m64), "weighted_checksum": acc["weighted"],
                      "histogram": {"bins": 65536, "min": int(nz[0]), "max": int(nz[-1]),
                                    "nonzero_bins": int(nz.size),
                                    "counts_sha256": hashlib.sha256(
                                        hist.astype("<u8").tobytes()).hexdigest()},
                      "normalize": {"mode": "scale", "divisor": float(divisor)},
                      "output_checksum": signed(acc["out_sum"] & m64),
                      "output_weighted_checksum": acc["out_weighted"]},
           "write_s": round(time.monotonic() - t0, 2), "jobs": jobs,
           "written_utc": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    mp = manifest_path(path)
    with open(mp + ".tmp", "w") as f:
        json.dump(man, f, indent=1)
    os.replace(mp + ".tmp", mp)
    if not quiet:
        print(f"make_volume: wrote {path}: {voxels * 2 / 2**20:.0f} MiB raw, "
              f"{acc['stored_bytes'] / 2**20:.0f} MiB stored ({man['compression_ratio']}:1), "
              f"{man['write_s']} s", file=sys.stderr)
    return man


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring (head of this file) for the "
                                        "layout, the content and the oracle.")
    ap.add_argument("path", help="output array directory (under data/ or build/)")
    ap.add_argument("--shape", type=parse_dims, required=True, help="z,y,x extents")
    ap.add_argument("--chunk", type=parse_dims, default=[64, 64, 64],
                    help="chunk (or inner chunk) shape (default 64,64,64)")
    ap.add_argument("--shard", type=parse_dims, default=None,
                    help="shard shape: write a sharding_indexed array (default: unsharded)")
    ap.add_argument("--level", type=int, default=3, help="zstd level (default 3)")
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--noise", type=float, default=20.0, help="noise sigma (default 20)")
    ap.add_argument("--divisor", type=float, default=4095.0,
                    help="scale divisor of the output-checksum oracle (default 4095)")
    ap.add_argument("--jobs", type=int, default=1, help="writer processes (default 1)")
    a = ap.parse_args()
    man = ensure_volume(a.path, a.shape, a.chunk, a.shard, a.level, a.seed, a.noise, a.divisor,
                        a.jobs)
    print(json.dumps({k: man[k] for k in ("path", "voxels", "stored_bytes", "compression_ratio",
                                          "oracle")}, indent=1))


if __name__ == "__main__":
    main()
