#!/usr/bin/python3
"""W2 peer: the conversion pipeline in zarr-python 2.13 + NumPy (bench/convert_ct, SPEC §8 W2).

    /usr/bin/python3 peer_zarr2.py INPUT OUT --offset z,y,x --shape d,h,w
                                   [--tile d,h,w] [--mode roi|tile] [--no-fsync]

INPUT is the Zarr v2 copy of the W2 input (zarr-python 2.13 cannot read Zarr v3): a directory
(DirectoryStore) or an http:// URL, read through the small keep-alive http.client mapping below
(fsspec's HTTP filesystem needs aiohttp, which Debian's python3-zarr does not pull in).

Steps, each timed with perf_counter_ns from the first line of this file:
  import   numpy, zarr, numcodecs
  open     zarr.open_array(INPUT, mode="r")
  read     the ROI: --mode roi (default) one `z[roi]` slice, zarr-python's fastest path;
           --mode tile one slice per [8,32,32] tile (SPEC's processing tiles)
  process  256-bin histogram over [0, 256) (np.bincount of the uint8 values: bin = v, exact for
           uint8) and the SPEC §5 scale normalization np.float32(v) / np.float32(255)
  write    a new Zarr v2 array OUT: float32 '<f4', chunks [8,32,32] (the output's shard shape:
           the nearest layout zarr-python 2.13 writes; it has no sharding), numcodecs Zstd(3),
           fill 0.0, '/' key separator, write_empty_chunks=True (every chunk file written, as
           every shard is), provenance in .zattrs; DirectoryStore writes each key to a temporary
           file and os.replace()s it
  fsync    os.fsync of every file written, then of every directory, deepest first (--no-fsync
           skips it)
  marker   OUT/complete.json (the chunk keys and sizes), written to a temporary name, fsynced,
           renamed, then OUT fsynced: the completion marker, last
Prints one JSON line: timings (ms), the histogram, counts of files / fsyncs, and the HTTP
requests made. Exit 0, or non-zero with a traceback.
"""

import time

T0 = time.perf_counter_ns()

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import urllib.parse  # noqa: E402
from collections.abc import MutableMapping  # noqa: E402

import numcodecs  # noqa: E402
import numpy as np  # noqa: E402
import zarr  # noqa: E402

T_IMPORT = time.perf_counter_ns()


class HTTPStore(MutableMapping):
    """Read-only zarr-python 2 store over one keep-alive HTTP/1.1 connection (GET per key)."""

    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.base = u.path.rstrip("/")
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        self.requests = 0
        self.bytes = 0

    def __getitem__(self, key):
        for attempt in range(2):  # one reconnect if the server closed the idle connection
            try:
                self.conn.request("GET", f"{self.base}/{key}")
                r = self.conn.getresponse()
                body = r.read()
                break
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                if attempt:
                    raise
        self.requests += 1
        if r.status == 404:
            raise KeyError(key)
        if r.status != 200:
            raise OSError(f"GET {self.base}/{key}: HTTP {r.status}")
        self.bytes += len(body)
        return body

    def __contains__(self, key):
        try:
            self[key]
            return True
        except KeyError:
            return False

    def __setitem__(self, key, value):
        raise PermissionError("read-only store")

    def __delitem__(self, key):
        raise PermissionError("read-only store")

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0


def ints(text):
    return [int(x) for x in text.split(",")]


def fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("out")
    ap.add_argument("--offset", required=True, type=ints)
    ap.add_argument("--shape", required=True, type=ints)
    ap.add_argument("--tile", type=ints, default=[8, 32, 32])
    ap.add_argument("--chunks", type=ints, default=[8, 32, 32])
    ap.add_argument("--mode", choices=["roi", "tile"], default="roi")
    ap.add_argument("--no-fsync", action="store_true")
    a = ap.parse_args()
    off, shp = a.offset, a.shape
    t = {"import": (T_IMPORT - T0) / 1e6}

    t1 = time.perf_counter_ns()
    http_store = HTTPStore(a.input) if a.input.startswith("http://") else None
    src = zarr.open_array(http_store if http_store is not None else a.input, mode="r")
    if src.dtype != np.uint8:
        raise SystemExit(f"peer: input dtype {src.dtype}, expected uint8")
    t2 = time.perf_counter_ns()
    t["open"] = (t2 - t1) / 1e6

    # read + process: the histogram over the ROI and the normalized float32 output
    hist = np.zeros(256, dtype=np.int64)
    divisor = np.float32(255)
    read_ns = proc_ns = 0
    if a.mode == "roi":
        sl = tuple(slice(o, o + s) for o, s in zip(off, shp))
        roi = src[sl]
        t3 = time.perf_counter_ns()
        hist += np.bincount(roi.reshape(-1), minlength=256)
        out = roi.astype(np.float32) / divisor
        t4 = time.perf_counter_ns()
        read_ns, proc_ns = t3 - t2, t4 - t3
    else:
        out = np.empty(shp, dtype=np.float32)
        for z in range(0, shp[0], a.tile[0]):
            for y in range(0, shp[1], a.tile[1]):
                for x in range(0, shp[2], a.tile[2]):
                    r0 = time.perf_counter_ns()
                    box = (slice(z, min(z + a.tile[0], shp[0])),
                           slice(y, min(y + a.tile[1], shp[1])),
                           slice(x, min(x + a.tile[2], shp[2])))
                    v = src[tuple(slice(o + b.start, o + b.stop) for o, b in zip(off, box))]
                    r1 = time.perf_counter_ns()
                    hist += np.bincount(v.reshape(-1), minlength=256)
                    out[box] = v.astype(np.float32) / divisor
                    proc_ns += time.perf_counter_ns() - r1
                    read_ns += r1 - r0
    t4 = time.perf_counter_ns()
    t["read"] = read_ns / 1e6
    t["process"] = proc_ns / 1e6

    # write: Zarr v2, float32, chunks [8,32,32], Zstd(3), every chunk, provenance
    prov = {"peer": {"writer": f"zarr-python {zarr.__version__}", "numpy": np.__version__,
                     "input": a.input, "roi": {"offset": off, "shape": shp},
                     "normalization": {"mode": "scale", "divisor": 255.0},
                     "histogram": {"bins": 256, "range": [0, 256],
                                   "counts": [int(c) for c in hist]}}}
    dst = zarr.open_array(a.out, mode="w-", shape=tuple(shp), chunks=tuple(a.chunks),
                          dtype="<f4", compressor=numcodecs.Zstd(level=3), fill_value=0.0,
                          order="C", dimension_separator="/", write_empty_chunks=True)
    dst.attrs.put(prov)
    dst[...] = out
    t5 = time.perf_counter_ns()
    t["write"] = (t5 - t4) / 1e6

    # fsync every file, then every directory (deepest first)
    files, dirs = [], []
    for root, dnames, fnames in os.walk(a.out):
        dirs.append(root)
        files += [os.path.join(root, f) for f in fnames]
    fsyncs = 0
    if not a.no_fsync:
        for f in files:
            fsync_path(f)
            fsyncs += 1
        for d in sorted(dirs, key=lambda p: p.count(os.sep), reverse=True):
            fsync_path(d, directory=True)
            fsyncs += 1
    t6 = time.perf_counter_ns()
    t["fsync"] = (t6 - t5) / 1e6

    # completion marker, last
    keys = sorted(os.path.relpath(f, a.out) for f in files)
    marker = {"complete": True, "files": [{"key": k, "size": os.path.getsize(os.path.join(
        a.out, k))} for k in keys]}
    tmp = os.path.join(a.out, f"complete.json.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(marker, f)
        f.flush()
        if not a.no_fsync:
            os.fsync(f.fileno())
    os.replace(tmp, os.path.join(a.out, "complete.json"))
    if not a.no_fsync:
        fsync_path(a.out, directory=True)
        fsyncs += 2
    t7 = time.perf_counter_ns()
    t["marker"] = (t7 - t6) / 1e6
    t["total"] = (t7 - T0) / 1e6
    t["in_process"] = (t7 - t1) / 1e6  # open .. marker, without interpreter start and imports
    chunk_files = sum(1 for k in keys if not k.startswith("."))
    print(json.dumps({
        "peer": f"zarr-python {zarr.__version__}", "numpy": np.__version__,
        "numcodecs": numcodecs.__version__, "python": sys.version.split()[0], "mode": a.mode,
        "timing_ms": t, "histogram": [int(c) for c in hist],
        "files": len(files) + 1, "chunk_files": chunk_files, "fsyncs": fsyncs,
        "bytes": sum(m["size"] for m in marker["files"]),
        "http": None if http_store is None else {"requests": http_store.requests,
                                                 "bytes": http_store.bytes},
    }))


if __name__ == "__main__":
    main()
