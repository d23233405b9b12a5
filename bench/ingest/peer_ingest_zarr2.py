#!/usr/bin/python3
"""W7 peer: the ingest pipeline in Python (bench/ingest, SPEC §8 W7): tifffile or h5py reads the
volume, zarr-python 2.13 writes it as a Zarr v2 array in the layout shardmill wrote.

    /usr/bin/python3 peer_ingest_zarr2.py SOURCE OUT --kind tiff|hdf5 --chunks z,y,x
                                          [--dataset NAME] [--no-fsync]

SOURCE: a directory of TIFF slices (natural name order, as shardmill reads them), a multi-page
TIFF file, or an HDF5 file with --dataset. Steps, each timed with perf_counter_ns from the first
line of this file:
  import   numpy, zarr, numcodecs, tifffile or h5py
  read     the whole volume into memory (tifffile.imread of each slice / one multi-page file;
           h5py dataset[...])
  write    a Zarr v2 array OUT: the source's dtype, chunks --chunks (the shard shape of
           shardmill's output: zarr-python 2.13 has no sharding), numcodecs Zstd(3), fill 0,
           '/' key separator, write_empty_chunks=True
  fsync    os.fsync of every file written, then of every directory, deepest first
Prints one JSON line: timings (ms), shape, dtype, files written. Exit 0, or non-zero with a
traceback.
"""

import time

T0 = time.perf_counter_ns()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402

import numcodecs  # noqa: E402
import numpy as np  # noqa: E402
import zarr  # noqa: E402


def natural_key(name):
    return [(0, int(t), t) if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def ms(a, b):
    return round((b - a) / 1e6, 3)


def read_volume(kind, source, dataset):
    """The whole source volume as one array: tifffile.imread of each slice of a directory (natural
    name order, as shardmill reads it) or of one multi-page file; h5py dataset[...]."""
    if kind == "tiff":
        import tifffile
    else:
        import h5py
    if kind == "tiff" and os.path.isdir(source):
        names = sorted((n for n in os.listdir(source)
                        if n.lower().endswith((".tif", ".tiff")) and not n.startswith(".")),
                       key=natural_key)
        first = tifffile.imread(os.path.join(source, names[0]))
        vol = np.empty((len(names),) + first.shape, first.dtype)
        vol[0] = first
        for z, n in enumerate(names[1:], 1):
            vol[z] = tifffile.imread(os.path.join(source, n))
    elif kind == "tiff":
        vol = tifffile.imread(source)
        if vol.ndim == 2:
            vol = vol[None]
    else:
        with h5py.File(source, "r") as f:
            vol = f[dataset][...]
    return vol


def fsync_tree(root):
    """os.fsync of every file under root, then of every directory, deepest first: (files, dirs)."""
    files = dirs = 0
    walk = list(os.walk(root))
    for d, _, fnames in walk:
        for n in fnames:
            fd = os.open(os.path.join(d, n), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            files += 1
    for d, _, _ in reversed(walk):
        fd = os.open(d, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        dirs += 1
    return files, dirs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--kind", choices=("tiff", "hdf5"), required=True)
    ap.add_argument("--chunks", required=True)
    ap.add_argument("--dataset", default="/data")
    ap.add_argument("--no-fsync", action="store_true")
    a = ap.parse_args()
    if a.kind == "tiff":
        import tifffile  # noqa: F401  (timed as import; read_volume uses it)
    else:
        import h5py  # noqa: F401
    t_import = time.perf_counter_ns()
    vol = read_volume(a.kind, a.source, a.dataset)
    t_read = time.perf_counter_ns()
    chunks = tuple(int(x) for x in a.chunks.split(","))
    store = zarr.DirectoryStore(a.out, dimension_separator="/")
    z = zarr.create(shape=vol.shape, chunks=chunks, dtype=vol.dtype, store=store,
                    compressor=numcodecs.Zstd(level=3), fill_value=0,
                    write_empty_chunks=True, overwrite=False)
    z[...] = vol
    t_write = time.perf_counter_ns()
    files, dirs = (0, 0) if a.no_fsync else fsync_tree(a.out)
    t_end = time.perf_counter_ns()
    print(json.dumps({"timing_ms": {"import": ms(T0, t_import), "read": ms(t_import, t_read),
                                    "write": ms(t_read, t_write), "fsync": ms(t_write, t_end),
                                    "total": ms(T0, t_end)},
                      "shape": list(vol.shape), "dtype": vol.dtype.name, "files": files,
                      "dirs": dirs, "bytes": int(vol.nbytes)}))


if __name__ == "__main__":
    main()
