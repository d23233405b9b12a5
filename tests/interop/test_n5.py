#!/usr/bin/python3
"""N5 input (SPEC §2): datasets written at test time by zarr-python 2.13's N5Store and N5FSStore
(every compression it writes: raw, gzip, gzip with useZlib, zstd, blosc, xz, bzip2; lz4 must be
refused by name), and by an independent writer below that follows the N5 specification the way
Java N5 writes (truncated edge blocks, a varlength-mode block, a missing block), are read by
`shardmill read` (whole arrays and sub-regions), `shardmill info` and a `scan` job, from files and
through nginx on 127.0.0.1, and compared value by value with the NumPy arrays that were written.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 tests/interop/test_n5.py --shardmill BIN --out DIR
"""

import argparse
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import warnings

import numcodecs
import numpy as np
import zarr

from shardmill_test import report_json
from shardmill_test.checks import Checks
from shardmill_test.nginx_server import NginxServer


warnings.simplefilter("ignore")  # zarr.n5 warns that blosc / lzma are not portable

# (path inside the container, dtype, shape, chunks, compressor)
ZARR_DATASETS = [
    ("raw_u8", "uint8", (7, 9, 11), (4, 4, 5), None),
    ("gzip_i16", "int16", (13, 10), (5, 4), numcodecs.GZip(5)),
    ("zlib_u16", "uint16", (7, 9, 11), (3, 4, 4), numcodecs.Zlib(1)),
    ("zstd_f32", "float32", (17,), (6,), numcodecs.Zstd(3)),
    ("blosc_f64", "float64", (5, 6, 7), (2, 4, 3), numcodecs.Blosc("lz4", 5, 1)),
    ("blosc_u16_bit", "uint16", (7, 9, 11), (4, 4, 5), numcodecs.Blosc("zstd", 3, 2)),
    ("xz_i16", "int16", (7, 9, 11), (4, 4, 5), numcodecs.LZMA()),
    ("bzip2_f32", "float32", (7, 9, 11), (4, 4, 5), numcodecs.BZ2(1)),
    ("deep/nested/gzip_f64", "float64", (6, 5, 4), (4, 4, 4), numcodecs.GZip(1)),
]


def values(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if np.dtype(dtype).kind == "f":
        a = rng.normal(0, 1000, n)
        a[::7] = -0.0
        a[3::11] = np.inf
        return a.astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, n, dtype=np.int64).astype(dtype).reshape(
        shape)


def write_zarr(root):
    """Two containers (N5Store and N5FSStore), every dataset in each; returns {(container, path):
    expected array}."""
    out = {}
    for seed_base, (name, store_cls) in enumerate([("zp.n5", zarr.n5.N5Store),
                                                  ("zpfs.n5", zarr.n5.N5FSStore)]):
        g = zarr.open_group(store_cls(os.path.join(root, name)), mode="w")
        for i, (path, dt, shape, chunks, comp) in enumerate(ZARR_DATASETS):
            a = values(dt, shape, 100 * seed_base + i)
            z = g.create_dataset(path, shape=shape, chunks=chunks, dtype=dt, compressor=comp)
            z[...] = a
            out[(name, path)] = a
        # lz4 is written by zarr (numcodecs' own framing) but is no N5 compression we read.
        z = g.create_dataset("lz4_u8", shape=(4, 4), chunks=(2, 2), dtype="uint8",
                             compressor=numcodecs.LZ4())
        z[...] = 1
    return out


def java_block(a, mode, compress):
    """One N5 block as Java N5 writes it: header (mode, ndim, sizes fastest-first[, count]),
    then the big-endian values (C order of the reversed axes), gzip-compressed or raw."""
    hdr = struct.pack(">HH", mode, a.ndim) + b"".join(struct.pack(">I", s) for s in a.shape[::-1])
    if mode == 1:
        hdr += struct.pack(">I", a.size)
    data = a.astype(a.dtype.newbyteorder(">")).tobytes()
    return hdr + (gzip.compress(data, mtime=0) if compress else data)


def write_java(root):
    """A dataset with truncated edge blocks (as Java N5 writes them), one varlength-mode block and
    one missing block (reads as 0). The metadata lists axes fastest-first."""
    out = {}
    for name, dt, comp in [("edges_gzip_u16", "uint16", True), ("edges_raw_f32", "float32", False)]:
        shape, chunks = (7, 9, 11), (4, 4, 5)
        a = values(dt, shape, 7 if comp else 8)
        d = os.path.join(root, "java.n5", name)
        os.makedirs(d)
        with open(os.path.join(d, "attributes.json"), "w") as f:
            json.dump({"dimensions": list(shape[::-1]), "blockSize": list(chunks[::-1]),
                       "dataType": dt, "compression": {"type": "gzip", "level": 6} if comp
                       else {"type": "raw"}, "resolution": [0.5, 0.5, 1.0]}, f)
        grid = [-(-shape[k] // chunks[k]) for k in range(3)]
        for gz in range(grid[0]):
            for gy in range(grid[1]):
                for gx in range(grid[2]):
                    if (gz, gy, gx) == (1, 0, 1):  # left out: reads as zero
                        a[4:8, 0:4, 5:10] = 0
                        continue
                    blk = a[gz * 4:gz * 4 + 4, gy * 4:gy * 4 + 4, gx * 5:gx * 5 + 5]
                    mode = 1 if (gz, gy, gx) == (0, 1, 0) else 0
                    p = os.path.join(d, str(gx), str(gy))
                    os.makedirs(p, exist_ok=True)
                    with open(os.path.join(p, str(gz)), "wb") as f:
                        f.write(java_block(np.ascontiguousarray(blk), mode, comp))
        out[("java.n5", name)] = a
    return out


class Checker(Checks):
    """The checks, and shardmill runs in a scratch directory."""

    def __init__(self, shardmill, tmp):
        super().__init__("interop.n5")
        self.shardmill = shardmill
        self.tmp = tmp

    def run(self, *args):
        return subprocess.run([self.shardmill, *args], capture_output=True, text=True, timeout=60)

    def read(self, store, path, a, offset=None, shape=None):
        out = os.path.join(self.tmp, "region.bin")
        args = ["read", store, "--array", path, "-o", out]
        want = a
        if offset is not None:
            args += ["--offset", ",".join(map(str, offset)), "--shape", ",".join(map(str, shape))]
            want = a[tuple(slice(o, o + s) for o, s in zip(offset, shape))]
        r = self.run(*args)
        label = f"read {store} {path} {offset or ''}"
        if r.returncode != 0:
            self.expect(False, label, f"exit {r.returncode}: {r.stderr.strip()}")
            return
        got = np.fromfile(out, dtype=np.dtype(a.dtype).newbyteorder("<")).reshape(want.shape)
        # Compare bit patterns: -0.0, inf and NaN included.
        self.expect(got.tobytes() == np.ascontiguousarray(want.astype(got.dtype)).tobytes(), label,
                   "values differ from NumPy")

    def info(self, store, path, a):
        r = self.run("info", store, "--array", path)
        label = f"info {store} {path}"
        if r.returncode != 0:
            self.expect(False, label, r.stderr.strip())
            return
        d = json.loads(r.stdout)
        self.expect(d.get("format") == "n5" and d["shape"] == list(a.shape)
                   and d["dtype"] == str(a.dtype), label, r.stdout[:200])

    def scan(self, store, path, a):
        cfg = os.path.join(self.tmp, "scan.yaml")
        rep = os.path.join(self.tmp, "scan-report.json")
        with open(cfg, "w") as f:
            f.write(f"job: scan\ninput:\n  store: {store}\n  array: {path}\n  format: n5\n"
                    f"tile: [3, 4, 5]\nreport: {rep}\n")
            if a.dtype.kind == "f":  # no exact default histogram for floats
                f.write("histogram: {bins: 16, range: [-10000, 10000]}\n")
        r = self.run("run", cfg)
        label = f"scan {store} {path}"
        if r.returncode != 0:
            self.expect(False, label, r.stderr.strip())
            return
        doc = report_json.load(rep)
        res = doc["result"]
        self.expect(doc["input"].get("format") == "n5" and doc["input"]["zarr_format"] is None
                   and doc["input"]["shape"] == list(a.shape), label + " report input",
                   json.dumps(doc["input"]))
        # SPEC §5: float values count by their bit patterns; signed ones widen to int64.
        v = a.reshape(-1)
        if v.dtype.kind == "f":
            v = v.view(f"u{v.dtype.itemsize}")
        v = v.astype(np.int64) if v.dtype.kind == "i" else v.astype(np.uint64)
        with np.errstate(over="ignore"):
            checksum = int(np.sum(v.astype(np.int64), dtype=np.int64))
            w = int(np.sum(v.view(np.uint64) * np.arange(1, v.size + 1, dtype=np.uint64),
                           dtype=np.uint64))
        self.expect(res["voxels"] == a.size and res["checksum"] == checksum
                   and res["weighted_checksum"] == w, label,
                   f"got {res['checksum']}/{res['weighted_checksum']}, want {checksum}/{w}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    root = os.path.join(args.out, "root")
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(root)
    arrays = write_zarr(root)
    arrays.update(write_java(root))
    c = Checker(os.path.abspath(args.shardmill), args.out)
    with NginxServer(root) as srv:
        # Files: everything. HTTP (to stay within the test budget): N5Store's container and the
        # Java-style one (N5FSStore writes the same layout).
        for base in (root, srv.url):
            for (container, path), a in sorted(arrays.items()):
                if base != root and container == "zpfs.n5":
                    continue
                store = f"{base}/{container}"
                c.read(store, path, a)
                if a.ndim == 3 and (base == root or container == "java.n5"):
                    # a region inside, crossing block edges
                    c.read(store, path, a, (1, 1, 2), tuple(n - 2 for n in a.shape))
                if base == root:
                    c.info(store, path, a)
            scans = [("java.n5", "edges_gzip_u16")]
            if base == root:
                scans += [("zp.n5", "blosc_f64"), ("zpfs.n5", "xz_i16")]
            for key in scans:
                c.scan(f"{base}/{key[0]}", key[1], arrays[key])
            # lz4 is refused by name, exit 3, one line.
            r = c.run("read", f"{base}/zp.n5", "--array", "lz4_u8", "-o",
                      os.path.join(args.out, "lz4.bin"))
            c.expect(r.returncode == 3 and r.stderr.count("\n") == 1
                    and "unsupported N5 compression 'lz4'" in r.stderr
                    and "lz4_u8/attributes.json" in r.stderr, f"lz4 refused ({base})",
                    f"exit {r.returncode}: {r.stderr!r}")
        # The N5 group root describes as a group.
        r = c.run("info", f"{root}/zp.n5")
        d = json.loads(r.stdout) if r.returncode == 0 else {}
        # Top level: every dataset but deep/nested/..., plus the group deep and lz4_u8.
        members = {m["path"]: m.get("node_type") for m in d.get("members", [])}
        c.expect(d.get("format") == "n5" and d.get("node_type") == "group"
                and members.get("raw_u8") == "array" and members.get("deep") == "group"
                and len(members) == len(ZARR_DATASETS) + 1, "info group (members listed)",
                r.stdout[:300] + r.stderr)
    return c.done()


if __name__ == "__main__":
    sys.exit(main())
