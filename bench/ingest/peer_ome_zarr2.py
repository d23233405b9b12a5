#!/usr/bin/python3
"""W7 OME peer: the user's job "TIFF/HDF5 -> windowed OME-Zarr pyramid" in Python (bench/ingest,
issue 20): tifffile or h5py reads the volume, NumPy applies SPEC §5's percentile window, computes
the 2x2x2 mean levels of SPEC §2, and zarr-python 2.13 writes them as an OME-Zarr (NGFF 0.4,
Zarr v2) image in the layout shardmill wrote.

    /usr/bin/python3 peer_ome_zarr2.py SOURCE OUT --kind tiff|hdf5 --chunks z,y,x [--chunks ...]
                     [--dataset NAME] [--lo 1] [--hi 99] [--spacing z,y,x] [--unit millimeter]
                     [--no-fsync]

One --chunks per level (the shard shape of shardmill's level: zarr-python 2.13 has no sharding);
the number of levels is the number of --chunks. Steps, each timed with perf_counter_ns from the
first line of this file:
  import   numpy, zarr, numcodecs, tifffile or h5py, and the repo's NumPy code used below
  read     the whole volume (peer_ingest_zarr2.read_volume: tifffile per slice / h5py [...])
  window   SPEC §5 with the test tier's oracle (tests/lib/shardmill_test/spec_oracle.py): the default
           histogram of the type (int16: one bin per value), the lo and hi percentiles of it,
           float32 window clamp((float32(v) - lo) / (hi - lo), 0, 1)
  levels   level k+1 = SPEC §2's mean of level k (ct_tools.py block_down, 2x2x2: float64 sums of
           the float32 values of each 2x2x2 block in C order / count, rounded once to float32)
  write    a Zarr v2 group OUT ('/' key separator) with arrays 0..L-1: float32, chunks --chunks,
           numcodecs Zstd(3), fill 0, write_empty_chunks=True; .zattrs multiscales (version 0.4,
           axes z y x with the unit, per level a scale of spacing x 2^k and, for k >= 1, a
           translation of (2^k - 1)/2 x spacing)
  fsync    os.fsync of every file written, then of every directory, deepest first
Prints one JSON line: timings (ms), the window, shapes, files written. Exit 0, or non-zero with a
traceback.
"""

import time

T0 = time.perf_counter_ns()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import numcodecs  # noqa: E402
import numpy as np  # noqa: E402,F401  (timed as import: the pipeline is NumPy)
import zarr  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

from shardmill_test import spec_oracle  # noqa: E402  (SPEC §2, §5: block mean, percentiles)

from peer_ingest_zarr2 import fsync_tree, ms, read_volume  # noqa: E402


def window(vol, p_lo, p_hi):
    """SPEC §5 percentile window: (float32 values, lo, hi)."""
    bins, h_lo, h_hi = spec_oracle.default_hist(vol.dtype)
    counts, under, over, _ = spec_oracle.histogram(vol, bins, h_lo, h_hi)
    lo = spec_oracle.percentile(counts, under, over, h_lo, h_hi, p_lo)
    hi = spec_oracle.percentile(counts, under, over, h_lo, h_hi, p_hi)
    return spec_oracle.normalize(vol, "window", lo=lo, hi=hi), float(lo), float(hi)


def multiscales(nlevels, spacing, unit):
    axes = [{"name": n, "type": "space", **({"unit": unit} if unit else {})} for n in "zyx"]
    datasets = []
    for k in range(nlevels):
        f = 2.0 ** k
        ct = [{"type": "scale", "scale": [s * f for s in spacing]}]
        if k:
            ct.append({"type": "translation", "translation": [s * (f - 1) / 2 for s in spacing]})
        datasets.append({"path": str(k), "coordinateTransformations": ct})
    return [{"version": "0.4", "name": "image", "axes": axes, "datasets": datasets,
             "type": "mean"}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--kind", choices=("tiff", "hdf5"), required=True)
    ap.add_argument("--chunks", action="append", required=True)
    ap.add_argument("--dataset", default="/data")
    ap.add_argument("--lo", type=float, default=1)
    ap.add_argument("--hi", type=float, default=99)
    ap.add_argument("--spacing", default="1,1,1")
    ap.add_argument("--unit", default="")
    ap.add_argument("--no-fsync", action="store_true")
    a = ap.parse_args()
    if a.kind == "tiff":
        import tifffile  # noqa: F401  (timed as import; read_volume uses it)
    else:
        import h5py  # noqa: F401
    t_import = time.perf_counter_ns()
    vol = read_volume(a.kind, a.source, a.dataset)
    t_read = time.perf_counter_ns()
    # the decimal strings of the percentiles, as the YAML gives them to shardmill
    p_lo = int(a.lo) if a.lo == int(a.lo) else a.lo
    p_hi = int(a.hi) if a.hi == int(a.hi) else a.hi
    levels = [None]
    levels[0], lo, hi = window(vol, p_lo, p_hi)
    del vol
    t_window = time.perf_counter_ns()
    chunks = [tuple(int(x) for x in c.split(",")) for c in a.chunks]
    for _ in chunks[1:]:
        levels.append(spec_oracle.block_mean(levels[-1], (2, 2, 2)))
    t_levels = time.perf_counter_ns()
    store = zarr.DirectoryStore(a.out, dimension_separator="/")
    g = zarr.group(store=store, overwrite=False)
    for k, (lv, ch) in enumerate(zip(levels, chunks)):
        z = g.create_dataset(str(k), shape=lv.shape, chunks=ch, dtype="<f4",
                             compressor=numcodecs.Zstd(level=3), fill_value=0,
                             write_empty_chunks=True, overwrite=False)
        z[...] = lv
    spacing = [float(x) for x in a.spacing.split(",")]
    g.attrs["multiscales"] = multiscales(len(levels), spacing, a.unit)
    t_write = time.perf_counter_ns()
    files, dirs = (0, 0) if a.no_fsync else fsync_tree(a.out)
    t_end = time.perf_counter_ns()
    print(json.dumps({"timing_ms": {"import": ms(T0, t_import), "read": ms(t_import, t_read),
                                    "window": ms(t_read, t_window),
                                    "levels": ms(t_window, t_levels),
                                    "write": ms(t_levels, t_write), "fsync": ms(t_write, t_end),
                                    "total": ms(T0, t_end)},
                      "window": [lo, hi], "shapes": [list(lv.shape) for lv in levels],
                      "files": files, "dirs": dirs}))


if __name__ == "__main__":
    main()
