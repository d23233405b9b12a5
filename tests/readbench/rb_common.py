"""Shared pieces of the read-bench and report tests (tests/readbench): the W3 arrays written at
test time by independent writers, the NumPy oracle of SPEC §5 checksums, chunk-grid arithmetic,
and the SPEC §7 report schema check.

Arrays (512x512 uint16, value (row*17 + col*31) % 65521 + 1, the W3 formula of SPEC §8):
  v2_gzip          Zarr v2, chunks 64x64, numcodecs GZip 5          zarr-python 2.13
  v3_gzip          Zarr v3, chunks 64x64, [bytes, gzip]              tests/lib/shardmill_test/shard_writer.py
  v3_shard_gzip    Zarr v3, shards 256x256, inner 64x64 gzip, index [bytes, crc32c] at the end
  v3_index_stress  Zarr v3, one 512x512 shard, inner 8x8 raw: a 65,540-byte index
Neither writer is shardmill, so the values and the files are an independent oracle.
"""

import json
import os
import shutil
import struct
import subprocess

import numpy as np

from shardmill_test import report_json
from shardmill_test import shard_writer as sw

N = 512
MASK = (1 << 64) - 1


def w3(n=N):
    r = np.arange(n, dtype=np.int64)[:, None]
    c = np.arange(n, dtype=np.int64)[None, :]
    return ((r * 17 + c * 31) % 65521 + 1).astype("<u2")


ARRAYS = {
    "v2_gzip": dict(chunks=(64, 64), shards=None),
    "v3_gzip": dict(chunks=(64, 64), shards=None),
    "v3_shard_gzip": dict(chunks=(64, 64), shards=(256, 256)),
    "v3_index_stress": dict(chunks=(8, 8), shards=(512, 512)),
}


def generate(root):
    """Writes every array of ARRAYS under root (fresh); returns {name: path}."""
    import numcodecs
    import zarr

    a = w3()
    paths = {}
    for name in ARRAYS:
        p = os.path.join(root, name + ".zarr")
        shutil.rmtree(p, ignore_errors=True)
        paths[name] = p
    z = zarr.create(shape=a.shape, chunks=(64, 64), dtype="<u2", compressor=numcodecs.GZip(5),
                    store=zarr.DirectoryStore(paths["v2_gzip"]), fill_value=0)
    z[...] = a
    sw.write_plain_v3(paths["v3_gzip"], a, (64, 64), codec="gzip")
    sw.write_sharded_array(paths["v3_shard_gzip"], a, (256, 256), (64, 64), inner_codec="gzip")
    sw.write_sharded_array(paths["v3_index_stress"], a, (512, 512), (8, 8), inner_codec="raw")
    return paths


def checksums(a, off, shape, full_shape):
    """SPEC §5 checksum (signed 64-bit sum) and weighted checksum (sum of v * (1 + i) mod 2^64,
    i the linear C-order index in the whole array) of the box of `a` (the whole array)."""
    sl = tuple(slice(o, o + s) for o, s in zip(off, shape))
    v = a[sl].astype(np.uint64)
    idx = np.zeros(v.shape, dtype=np.uint64)
    stride = 1
    for d in reversed(range(len(full_shape))):
        ax = (np.arange(off[d], off[d] + shape[d], dtype=np.uint64) * np.uint64(stride))
        idx += ax.reshape([-1 if k == d else 1 for k in range(len(full_shape))])
        stride *= full_shape[d]
    s = int(v.astype(np.int64).sum(dtype=np.int64))
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps: mod 2^64 as SPEC §5 says
        w = int((v * (idx + np.uint64(1))).sum(dtype=np.uint64)) & MASK
    return s, w


def grid_range(off, shape, chunk):
    """Per axis, the chunk indices a box touches."""
    return [range(o // c, (o + s - 1) // c + 1) for o, s, c in zip(off, shape, chunk)]


def count(ranges):
    n = 1
    for r in ranges:
        n *= len(r)
    return n


def touched_files(path, name, off, shape):
    """Sizes of the chunk files (unsharded arrays) a box touches."""
    chunks = ARRAYS[name]["chunks"]
    sizes = []
    for i in grid_range(off, shape, chunks)[0]:
        for j in grid_range(off, shape, chunks)[1]:
            key = f"{i}.{j}" if name.startswith("v2") else f"c/{i}/{j}"
            sizes.append(os.path.getsize(os.path.join(path, key)))
    return sizes


def shard_index(path, key, inner_grid):
    """(offset, nbytes) per inner chunk of a shard whose index is [bytes, crc32c] at the end."""
    n = inner_grid[0] * inner_grid[1]
    with open(os.path.join(path, key), "rb") as f:
        f.seek(-(16 * n + 4), os.SEEK_END)
        raw = f.read(16 * n)
    return [struct.unpack_from("<QQ", raw, 16 * k) for k in range(n)]


def touched_inner(path, name, off, shape):
    """(shards touched, encoded bytes of the inner chunks touched) of a sharded array."""
    shards, inner = ARRAYS[name]["shards"], ARRAYS[name]["chunks"]
    per = [s // c for s, c in zip(shards, inner)]
    total, nshards = 0, 0
    for si in grid_range(off, shape, shards)[0]:
        for sj in grid_range(off, shape, shards)[1]:
            nshards += 1
            idx = shard_index(path, f"c/{si}/{sj}", per)
            for ci in grid_range(off, shape, inner)[0]:
                for cj in grid_range(off, shape, inner)[1]:
                    if ci // per[0] == si and cj // per[1] == sj:
                        total += idx[(ci % per[0]) * per[1] + (cj % per[1])][1]
    return nshards, total


def run(cmd, cwd=None, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout)


def write_config(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- SPEC §7 report schema ----

SPEC7 = {
    "engine": {"version": None, "commit": None},
    "job": None, "ranks": None, "threads": None,
    "input": {"store": None, "shape": None, "dtype": None, "chunks": None, "shards": None},
    "roi": {"offset": None, "shape": None}, "tile": None, "passes": None,
    "result": {"voxels": None, "tiles": None, "checksum": None, "weighted_checksum": None,
               "histogram": {"bins": None, "range": None, "counts": None, "underflow": None,
                             "overflow": None, "nan": None},
               "normalization": {"mode": None, "lo": None, "hi": None},
               "output_checksum": None, "output_weighted_checksum": None},
    "io": {"requests": {"metadata": None, "payload": None, "index": None},
           "bytes": {"metadata": None, "payload": None, "index": None},
           "cache": {"hits": None, "misses": None, "evictions": None},
           "index_cache": {"hits": None, "misses": None, "peak_bytes": None}},
    "timing_ms": {"total": None, "open": None, "hydrate": None, "decode": None, "process": None,
                  "allreduce": None, "write": None},
    "memory": {"peak_rss_bytes": None},
    "output": {"path": None, "shards": None, "bytes": None, "complete": None},
}

# Where each job may say null (SPEC §7: "what does not apply is null, not missing").
NULL_OK = {
    "scan": {"result.normalization", "result.output_checksum", "result.output_weighted_checksum",
             "output", "input.shards"},
    "convert": {"input.shards"},
    # ingest is convert with normalize none (issue 20): convert's report over a source, whose
    # normalization is {mode: none, lo: null, hi: null} and which is not read through a store
    "ingest": {"input.chunks", "input.shards", "result.normalization.lo",
               "result.normalization.hi", "io.requests", "io.bytes", "io.cache",
               "io.index_cache"},
    "read-bench": {"input.shards", "tile", "result.tiles", "result.histogram",
                   "result.normalization", "result.output_checksum",
                   "result.output_weighted_checksum", "timing_ms.process",
                   "timing_ms.allreduce", "timing_ms.write", "output"},
}


def schema_problems(rep, job, null_ok=None):
    """Every SPEC §7 key present; null only where NULL_OK[job] allows it. Returns problems."""
    allowed = NULL_OK[job] if null_ok is None else null_ok
    problems = []

    def walk(spec, obj, prefix):
        for k, sub in spec.items():
            path = prefix + k
            if not isinstance(obj, dict) or k not in obj:
                problems.append(f"{job}: {path} missing")
                continue
            v = obj[k]
            if v is None:
                if path not in allowed:
                    problems.append(f"{job}: {path} is null")
                continue
            if isinstance(sub, dict):
                walk(sub, v, path + ".")

    walk(SPEC7, rep, "")
    if rep.get("job") != job:
        problems.append(f"job is {rep.get('job')!r}, expected {job!r}")
    return problems


def load_json(path):
    with open(path) as f:
        return report_json.with_int_checksums(json.load(f))
